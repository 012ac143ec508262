"""The worktree's receipt directory is checked on every use: a symbolic link or a directory
others can write is refused, and nothing changes (docs/reliability.md, "At the edges",
item 6).
"""

from __future__ import annotations

from pathlib import Path

from observe import state

R = "edge/1"


def _receipts(repo: Path) -> Path:
    return repo / ".git" / "worklease" / "receipts"


def test_a_receipt_directory_linked_to_a_shared_directory_is_refused(
    cli, repo: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    _receipts(repo).parent.mkdir(parents=True)
    _receipts(repo).symlink_to(shared)
    got = cli("acquire", R, "--json")
    assert got.code == 2, got
    assert list(shared.iterdir()) == [] and state(cli, R) == "free"


def test_a_shared_receipt_directory_is_refused(cli, repo: Path) -> None:
    _receipts(repo).mkdir(parents=True)
    _receipts(repo).chmod(0o777)
    got = cli("acquire", R, "--json")
    assert got.code == 2, got
    assert list(_receipts(repo).iterdir()) == [] and state(cli, R) == "free"


def test_the_receipt_directory_is_checked_on_every_use(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--json").json
    _receipts(repo).chmod(0o777)
    for args in (["heartbeat", R], ["release", R], ["check", R]):
        got = cli(*args, "--json")
        assert got.code in (2, 4), (args, got)
        assert "others can write" in got.json["error"]["message"], got
    assert cli("show", R, "--json").json["oid"] == doc["oid"], "nothing was changed"
    _receipts(repo).chmod(0o700)
    assert cli("release", R).code == 0
