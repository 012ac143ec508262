"""A resource's history survives ``git gc --prune=now`` and ``git pack-refs --all``: every
reflog entry still names a readable record.
"""

from __future__ import annotations

from pathlib import Path

from conftest import store_git, store_path

R = "github/acme/api/42"


def test_history_survives_gc_and_pack_refs(cli, repo: Path) -> None:
    cli("acquire", R, "--ttl", "1m")
    cli("heartbeat", R)
    cli("release", R, "--checkpoint", "c1")
    doc = cli("acquire", R, "--json").json
    store_git("gc", "--prune=now", "--quiet", cwd=repo)
    store_git("pack-refs", "--all", cwd=repo)
    history = cli("log", R, "--json").json["records"]
    assert [(h["revision"], h["state"]) for h in history] == [
        (1, "active"),
        (1, "active"),
        (1, "released"),
        (2, "active"),
    ]
    assert history[2]["checkpoint"] == "c1"
    log_file = store_path(repo) / "logs" / doc["ref"]
    assert len(log_file.read_text().strip().splitlines()) == 4
    for i in range(4):  # every reflog entry still names a readable record
        oid = store_git("rev-parse", f"{doc['ref']}@{{{i}}}", cwd=repo).stdout.strip()
        assert store_git("cat-file", "-t", oid, cwd=repo).stdout.strip() == "blob"
    assert "not a commit" not in store_git("gc", cwd=repo).stderr
