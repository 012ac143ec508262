"""An explicit receipt path (``--receipt``, ``GITLEASE_RECEIPT``): refused, and left untouched,
when it holds another file, is not a file, or is another store's receipt; one winner when
acquires race on it (docs/reliability.md, "At the edges", items 1 and 7).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import stat
from pathlib import Path

import pytest
from conftest import git, make_repo
from observe import receipt_doc, state

R = "edge/1"


def test_a_receipt_path_holding_another_file_is_refused_and_left_untouched(
    cli, tmp_path: Path
) -> None:
    precious = tmp_path / "f"
    precious.write_text("precious\n")
    got = cli("acquire", R, "--receipt", str(precious), "--no-bind", "--json")
    assert got.code == 2, got
    assert precious.read_text() == "precious\n"
    assert state(cli, R) == "free", "nothing was claimed"


def test_a_receipt_of_another_store_is_refused_and_left_untouched(cli, tmp_path: Path) -> None:
    """One GITLEASE_RECEIPT used from two repositories."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    env = {"GITLEASE_RECEIPT": str(private / "r.json")}
    assert cli("acquire", R, "--no-bind", env=env).code == 0
    saved = (private / "r.json").read_bytes()
    other = make_repo(tmp_path / "other")
    got = cli("acquire", R, "--no-bind", "--json", cwd=other, env=env)
    assert got.code == 2 and "store" in got.json["error"]["message"], got
    assert (private / "r.json").read_bytes() == saved
    assert state(cli, R, cwd=other) == "free"
    assert cli("heartbeat", R, env=env).code == 0, "the first store's claim is still manageable"
    assert cli("release", R, env=env).code == 0


def test_a_live_receipt_of_this_store_is_held_and_a_spent_one_is_reused(
    cli, tmp_path: Path
) -> None:
    path = tmp_path / "r.json"
    assert cli("acquire", "edge/a", "--receipt", str(path), "--no-bind").code == 0
    saved = path.read_bytes()
    got = cli("acquire", "edge/b", "--receipt", str(path), "--no-bind")
    assert got.code == 3, got
    assert path.read_bytes() == saved and state(cli, "edge/b") == "free"
    assert cli("release", "edge/a", "--receipt", str(path)).code == 0
    assert cli("acquire", "edge/b", "--receipt", str(path), "--no-bind").code == 0
    assert receipt_doc(path)["claims"][0]["resource"] == "edge/b"


def _make(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        path.mkdir(mode=0o700)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root (CI runs as root)")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a private copy of /dev/null
    elif kind == "link to a file":
        (path.parent / "target").write_text("precious\n")
        path.symlink_to(path.parent / "target")
    elif kind == "dangling link":
        path.symlink_to(path.parent / "nowhere")


@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "link to a file", "dangling link"])
def test_a_receipt_path_that_is_not_a_file_is_refused_at_once(
    cli, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "receipt"
    _make(kind, path)
    before = os.lstat(path)
    got = cli("acquire", R, "--receipt", str(path), "--no-bind", "--json", timeout=30)
    assert got.code == 2, got
    after = os.lstat(path)
    assert (after.st_ino, stat.S_IFMT(after.st_mode)) == (
        before.st_ino,
        stat.S_IFMT(before.st_mode),
    )
    if kind == "link to a file":
        assert (tmp_path / "target").read_text() == "precious\n"
    assert not (tmp_path / "nowhere").exists()
    assert state(cli, R) == "free", "nothing was claimed (and the guard was let go)"


def _racer(cwd: str, resource: str, receipt: str, barrier, results) -> None:
    os.chdir(cwd)
    import io

    from gitlease.cli import claims, main  # noqa: F401  (imports done before the barrier)

    barrier.wait()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["acquire", resource, "--receipt", receipt, "--no-bind", "--json"])
    results.put((resource, code))


@pytest.mark.slow
def test_acquires_racing_on_one_receipt_path_have_one_winner(cli, repo: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for round_ in range(3):
        receipt = repo.parent / f"race-{round_}.json"
        names = [f"race/{round_}/{i}" for i in range(4)]
        barrier, results = ctx.Barrier(len(names)), ctx.Queue()
        procs = [
            ctx.Process(target=_racer, args=(str(repo), n, str(receipt), barrier, results))
            for n in names
        ]
        for p in procs:
            p.start()
        codes = dict(results.get(timeout=120) for _ in names)
        for p in procs:
            p.join(timeout=30)
        winners = [n for n, code in codes.items() if code == 0]
        assert len(winners) == 1, codes
        assert all(code in (2, 3) for n, code in codes.items() if n not in winners), codes
        proved = receipt_doc(receipt)["claims"][0]
        assert proved["resource"] == winners[0]
        assert cli("show", winners[0], "--json").json["claim_id"] == proved["claim_id"]
        assert all(state(cli, n) == "free" for n in names if n not in winners)


@pytest.mark.parametrize("verb", ["heartbeat", "check", "release", "show"])
def test_bundle_commands_refuse_another_stores_receipt(cli, tmp_path: Path, verb: str) -> None:
    other = tmp_path / "other.git"
    git("init", "-q", "--bare", str(other), cwd=tmp_path)
    receipt = tmp_path / "bundle.json"
    taken = cli("bundle", "acquire", "o/1", "o/2", "--store", str(other), "--receipt",
                str(receipt), "--no-bind")  # fmt: skip
    assert taken.code == 0, taken
    saved = receipt.read_bytes()
    got = cli("bundle", verb, "--receipt", str(receipt), "--json")
    assert got.code == 2 and "store" in got.json["error"]["message"], got
    assert receipt.read_bytes() == saved
    assert cli("bundle", "check", "--store", str(other), "--receipt", str(receipt)).code == 0
