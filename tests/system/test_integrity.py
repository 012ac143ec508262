"""Bad input and damaged stores: the documented exit code, a clear message, nothing changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import NEEDS_SHIM, git, store_git, store_path, wall_clock_moved

R = "work/1"


def refs(repo: Path) -> str:
    return store_git(
        "for-each-ref", "--format=%(refname) %(objectname)", "refs/worklease/", cwd=repo
    ).stdout


def forge(repo: Path, oid: str, old: str, new: str) -> str:
    raw = store_git("cat-file", "blob", oid, cwd=repo).stdout
    assert old in raw
    return subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
        cwd=repo,
        input=raw.replace(old, new),
        text=True,
        capture_output=True,
        check=True,
    ).stdout.strip()


@pytest.mark.parametrize("bad", ["", "a\nb", "x" * 513, "tab\there", "\x7f"])
def test_bad_resource_names(cli, repo: Path, bad: str) -> None:
    for args in (["acquire", bad], ["show", bad], ["free", bad], ["bundle", "acquire", "ok", bad]):
        got = cli(*args, "--json")
        assert got.code == 2, (args, got)
        assert got.json["error"]["code"] == "USAGE"
    assert refs(repo) == ""


@pytest.mark.parametrize(
    "args",
    [
        ["acquire", R, "--ttl", "soon"],
        ["acquire", R, "--ttl", "0"],
        ["acquire", R, "--ttl", "-5m"],
        ["acquire", R, "--wait", "1y"],
        ["check", R, "--min-remaining", "x"],
        ["acquire"],
        ["prune", "--older-than", "3 weeks"],
        ["acquire", R, "--no-such-option"],
    ],
)
def test_bad_arguments_are_usage_errors(cli, repo: Path, args: list[str]) -> None:
    got = cli(*args, "--json")
    assert got.code == 2, got
    assert got.json["error"]["exit"] == 2 and got.json["error"]["message"]
    assert refs(repo) == ""


def test_forged_record_is_refused_and_left_alone(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "1m", "--json").json
    forged = forge(repo, doc["oid"], "revision 1", "revision 2")
    store_git("update-ref", doc["ref"], forged, cwd=repo)
    before = refs(repo)

    other = repo.parent / "elsewhere"
    git("worktree", "add", "-q", "-b", "other", str(other), cwd=repo)
    got = cli("acquire", R, "--json", cwd=other)
    assert got.code == 7 and got.json["error"]["code"] == "STORE"
    assert "verify" in got.json["error"]["message"]
    assert cli("show", R, cwd=other).code == 7
    listed = cli("list", "--json", cwd=other).json["claims"]
    assert [(c["resource"], c["state"]) for c in listed] == [(R, "invalid")]
    assert cli("free", R, cwd=other).out.strip() == ""
    assert cli("heartbeat", R).code == 4  # the holder: its record is gone
    assert cli("release", R).code == 4
    assert cli("verify").code == 7
    assert cli("verify", "--repair").code == 7, "a possibly live claim is never repaired over"
    assert refs(repo) == before


def test_repair_replaces_a_dead_forged_record_with_a_tombstone(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "1s", "--json").json
    store_git(
        "update-ref", doc["ref"], forge(repo, doc["oid"], '"test-agent"', '"mallory"'), cwd=repo
    )
    time.sleep(1.2)
    assert cli("acquire", R).code == 7
    repaired = cli("verify", "--repair", "--json")
    assert repaired.code == 0, repaired
    assert [p["kind"] for p in repaired.json["problems"]] == ["invalid-record"]
    shown = cli("show", R, "--json").json
    assert shown["state"] == "released" and shown["revision"] == 2
    assert cli("acquire", R, "--json").json["revision"] == 3
    assert cli("verify").code == 0


def test_ref_pointing_at_a_commit(cli, repo: Path) -> None:
    empty_tree = store_git("hash-object", "-w", "-t", "tree", "/dev/null", cwd=repo).stdout.strip()
    commit = store_git("commit-tree", empty_tree, "-m", "not a record", cwd=repo).stdout.strip()
    store_git("update-ref", "refs/worklease/work/1.lease", commit, cwd=repo)
    before = refs(repo)
    got = cli("acquire", R, "--json")
    assert got.code == 7 and "not a blob" in got.json["error"]["message"]
    assert cli("show", R).code == 7
    assert refs(repo) == before


def test_stale_lock_is_cleared_young_lock_is_waited_for(cli, repo: Path) -> None:
    lock = store_path(repo) / "refs" / "worklease" / "work" / "1.lease.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    os.utime(lock, (time.time() - 60, time.time() - 60))
    assert cli("verify", "--json").json["problems"][0]["kind"] == "stale-lock"
    assert cli("acquire", R).code == 0
    assert not lock.exists()

    lock.write_text("")  # a young lock: a write in progress, perhaps by git itself
    assert cli("release", R).code == 0  # waits for it to age, then clears it
    assert not lock.exists()


def test_corrupt_loose_ref_and_missing_object(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--json").json
    loose = store_path(repo) / doc["ref"]
    loose.write_text("garbage\n")
    assert cli("acquire", R).code == 7
    assert cli("show", R).code == 7
    assert cli("heartbeat", R).code == 4
    assert loose.read_text() == "garbage\n"
    loose.write_text("1" * 40 + "\n")
    assert cli("acquire", R).code == 7
    listed = cli("list", "--json").json["claims"]
    assert listed[0]["state"] == "invalid" and "missing" in listed[0]["problem"]


def test_store_removed_while_in_use(cli, tmp_path: Path, repo: Path) -> None:
    bare = tmp_path / "gone.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    env = {"GITLEASE_STORE": str(bare)}
    assert cli("acquire", R, env=env).code == 0
    shutil.rmtree(bare)
    for args in (["heartbeat", R], ["show", R], ["acquire", "x/2"], ["list"]):
        got = cli(*args, "--json", env=env)
        assert got.code == 7, (args, got)


def test_no_token_anywhere_but_the_receipt(cli, repo: Path) -> None:
    outputs = []
    doc = cli("acquire", R, "--json").json
    token = __import__("json").loads(Path(doc["receipt"]).read_text())["token"]
    assert token.startswith("glt_")
    for args in (
        ["show", R],
        ["list"],
        ["heartbeat", R],
        ["check", R],
        ["log", R],
        ["verify"],
        ["bundle", "acquire", "b/1", "b/2"],
        ["where"],
        ["show", R, "--json"],
        ["exec", R, "--", "env"],
        ["acquire", R, "--json"],
        ["release", R, "--json"],
    ):
        got = cli(*args)
        outputs += [got.out, got.err]
    assert not any(token in o for o in outputs)
    receipts = repo / ".git" / "worklease" / "receipts"
    for git_dir in (repo / ".git", store_path(repo)):  # the repository and its claim store
        for path in git_dir.rglob("*"):
            if path.is_file() and receipts not in path.parents:
                assert token.encode() not in path.read_bytes(), path
        objects = subprocess.run(
            ["git", f"--git-dir={git_dir}", "cat-file", "--batch-all-objects", "--batch"],
            cwd=repo,
            capture_output=True,
            check=True,
        ).stdout
        assert token.encode() not in objects
        assert "glt_" not in git(f"--git-dir={git_dir}", "config", "--list", cwd=repo).stdout


@NEEDS_SHIM
@pytest.mark.parametrize("jump", [3600, -3600])
def test_wall_clock_jumps_change_no_decision(cli, repo: Path, jump: int) -> None:
    env = wall_clock_moved(jump)
    probe = subprocess.run(
        ["python3", "-c", "import time; print(time.time())"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    assert abs(float(probe.stdout) - time.time()) > 3000, "the moved wall clock is not in effect"
    assert cli("acquire", "live/1", "--ttl", "1m").code == 0
    assert cli("acquire", "dead/1", "--ttl", "1s").code == 0
    time.sleep(1.2)
    assert cli("acquire", "live/1", env=env).code == 3, "a jump must not expire a live claim"
    assert cli("show", "live/1", "--json", env=env).json["state"] == "active"
    assert cli("heartbeat", "live/1", env=env).code == 0
    assert cli("heartbeat", "dead/1", env=env).code == 4, "a jump must not revive a dead claim"
    assert cli("acquire", "dead/1", env=env).code == 0
    assert cli("acquire", "live/1").code == 3
