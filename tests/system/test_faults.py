"""The fault catalogue: each fault gets its exit code and a clear message, and loses nothing."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import clock_ahead, git, make_repo, run_cli, store_git, store_path

R = "fault/1"
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a tmpfs needs root (CI is root)"
)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def on_the_mount(mnt: Path) -> Path:
    """A repository whose claim store is on the mount too (git config gitlease.store)."""
    repo = make_repo(mnt / "repo")
    git("init", "-q", "--bare", str(mnt / "store.git"), cwd=mnt)
    git("config", "gitlease.store", str(mnt / "store.git"), cwd=repo)
    return repo


def state(repo: Path) -> str:
    return store_git(
        "for-each-ref", "--format=%(refname) %(objectname)", "refs/worklease/", cwd=repo
    ).stdout


@needs_root
def test_read_only_store(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "8m") as mnt:
        repo = on_the_mount(mnt)
        assert run_cli("acquire", R, "--ttl", "1m", cwd=repo).code == 0
        before = state(repo)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        for args in (["acquire", "fault/2"], ["heartbeat", R], ["release", R]):
            got = run_cli(*args, "--json", cwd=repo)
            assert got.code == 7, (args, got)
            assert (
                "Read-only" in got.json["error"]["message"]
                or "read-only" in got.json["error"]["message"].lower()
            )
        assert run_cli("show", R, "--json", cwd=repo).json["state"] == "active"
        assert run_cli("check", R, cwd=repo).code == 0, "reads still work"
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True)
        assert state(repo) == before
        assert run_cli("heartbeat", R, cwd=repo).code == 0


@needs_root
def test_disk_full(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "4m") as mnt:
        repo = on_the_mount(mnt)
        assert run_cli("acquire", R, "--ttl", "1m", cwd=repo).code == 0
        before = state(repo)
        filler = mnt / "filler"
        with contextlib.suppress(OSError), open(filler, "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        got = run_cli("acquire", "fault/2", "--json", cwd=repo)
        assert got.code == 7 and "space" in got.json["error"]["message"], got
        assert run_cli("heartbeat", R, cwd=repo).code == 7
        assert state(repo) == before, "nothing durable was lost or half-written"
        filler.unlink()
        assert run_cli("heartbeat", R, cwd=repo).code == 0
        assert run_cli("acquire", "fault/2", cwd=repo).code == 0
        assert run_cli("verify", cwd=repo).code == 0


def test_corrupt_packed_refs(cli, repo: Path) -> None:
    assert cli("acquire", R).code == 0
    store_git("pack-refs", "--all", cwd=repo)
    packed = store_path(repo) / "packed-refs"
    good = packed.read_bytes()
    packed.write_bytes(good + b"this is not a packed ref\n")
    for args in (["acquire", "fault/2"], ["list"], ["verify"], ["free", "fault/2"], ["show", R]):
        got = cli(*args, "--json")
        assert got.code == 7, (args, got)
        assert "packed-refs" in got.json["error"]["message"]
    damaged = packed.read_bytes()
    # the CLI's heartbeat reads as its show does, and git's update-ref refuses such a store
    got = cli("heartbeat", R, "--json")
    assert got.code == 7 and "packed-refs" in got.json["error"]["message"], got
    # the holder's own line is intact: libgit2 (the library, the keeper) finds it and renews
    from gitlease.api.lease import heartbeat
    from gitlease.store.location import open_store

    assert heartbeat(open_store(cwd=repo), R).state == "active"
    assert packed.read_bytes() == damaged, "gitlease never rewrites packed-refs"
    packed.write_bytes(good)
    assert cli("acquire", "fault/2").code == 0


def test_truncated_loose_ref(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--json").json
    loose = store_path(repo) / doc["ref"]
    loose.write_text(doc["oid"][:20])
    assert cli("show", R).code == 7
    assert cli("acquire", R).code == 7
    assert loose.read_text() == doc["oid"][:20]


def test_receipt_faults(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--json").json
    receipt = Path(doc["receipt"])
    saved = receipt.read_bytes()

    receipt.write_text("{not json")
    got = cli("heartbeat", R, "--json")
    assert got.code == 4 and "corrupt" in got.json["error"]["message"]

    receipt.write_bytes(saved)
    receipt.chmod(0o644)
    got = cli("heartbeat", R, "--json")
    assert got.code == 4 and "not trusted" in got.json["error"]["message"]

    receipt.chmod(0o600)
    receipt.unlink()
    got = cli("release", R, "--json")
    assert got.code == 4 and "no receipt" in got.json["error"]["message"]
    assert cli("show", R, "--json").json["oid"] == doc["oid"], "the claim itself is untouched"
    again = cli("acquire", R, "--json")
    assert again.code == 3, "it stays held until its TTL: never adopted"

    receipt.write_bytes(saved)
    receipt.chmod(0o600)
    assert cli("release", R).code == 0


def test_receipt_path_in_a_shared_directory_is_refused(cli, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    got = cli("acquire", R, "--receipt", str(shared / "r.json"), "--json")
    assert got.code == 2 and "others can write" in got.json["error"]["message"]
    target = tmp_path / "private"
    target.mkdir(mode=0o700)
    (target / "evil").symlink_to(tmp_path / "elsewhere.json")
    got = cli("acquire", R, "--receipt", str(target / "evil"), "--json")
    assert got.code == 2 and "symbolic link" in got.json["error"]["message"], got
    assert not (tmp_path / "elsewhere.json").exists(), "the link is not followed"
    assert (target / "evil").is_symlink(), "and it is left as it was"


def test_worktree_removed(cli, worktrees) -> None:
    a, b = worktrees
    assert cli("acquire", R, "--ttl", "1m", cwd=a).code == 0  # live for the next two calls
    git("worktree", "remove", "--force", str(a), cwd=b)
    assert cli("heartbeat", R, cwd=b).code == 4
    assert cli("acquire", R, cwd=b).code == 3
    later = clock_ahead(61)  # its minute over (on a clock moved on)
    got = cli("acquire", R, cwd=b, env=later)
    assert got.code == 0, "the orphan expires by TTL"
    assert cli("verify", cwd=b, env=later).code == 0


def test_current_directory_removed(repo: Path, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "from gitlease.cli.app import main; from gitlease.cli import admin, claims; "
        "sys.exit(main(['show', 'x', '--json']))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(gone)], capture_output=True, text=True)
    assert out.returncode == 7, out
    assert "no longer exists" in json.loads(out.stdout)["error"]["message"]


def test_a_lock_dated_in_the_future_does_not_wedge_the_resource(cli, repo: Path) -> None:
    """kill -9 inside the lock window, then the wall clock stepped back."""
    assert cli("acquire", R).code == 0
    lock = store_path(repo) / "refs" / "worklease" / "fault" / "1.lease.lock"
    lock.write_text("")
    later = time.time() + 600
    os.utime(lock, (later, later))
    report = cli("verify", "--json")
    assert report.code == 7 and "future" in report.json["problems"][0]["message"]
    # at once: a lock dated in the future is stale (waited out, it would end AMBIGUOUS)
    assert cli("release", R).code == 0
    assert not lock.exists()


def test_a_damaged_packed_line_never_makes_a_held_claim_look_free(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--json").json
    store_git("pack-refs", "--all", cwd=repo)
    packed = store_path(repo) / "packed-refs"
    packed.write_text(packed.read_text().replace(doc["oid"], doc["oid"] + "ab"))
    contender = repo.parent / "contender"
    contender.mkdir(mode=0o700)
    got = cli("acquire", R, "--json", "--receipt", str(contender / "r.json"))
    assert got.code == 7 and "packed-refs" in got.json["error"]["message"], got
    assert doc["oid"] + "ab" in packed.read_text(), "nothing was overwritten"


def test_verify_repair_keeps_receipts_of_other_stores(cli, repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.git"
    git("init", "-q", "--bare", str(other), cwd=tmp_path)
    assert cli("acquire", "elsewhere/1", "--store", str(other)).code == 0
    assert cli("acquire", R).code == 0
    assert cli("verify", "--repair").code == 0
    assert cli("heartbeat", "elsewhere/1", "--store", str(other)).code == 0


def test_retried_release_without_a_resource_succeeds(cli) -> None:
    assert cli("acquire", R).code == 0
    assert cli("release").code == 0
    assert cli("release").code == 0, "idempotent for a retry after an ambiguous result"
    bid = cli("bundle", "acquire", "b/1", "b/2", "--json").json["bundle_id"]
    assert cli("bundle", "release").code == 0
    assert cli("bundle", "release").code == 0
    assert cli("bundle", "release", bid).code == 0


def test_a_locked_git_config_never_fails_a_claim(cli, repo: Path) -> None:
    """Racing first writers in a fresh store meet on config.lock (seen in the ring test)."""
    lock = store_path(repo) / "config.lock"
    lock.write_text("")
    assert cli("acquire", R).code == 0
    lock.unlink()
    assert cli("acquire", "fault/2").code == 0
    assert store_git(
        "config", "--get", "gc.refs/worklease/*.reflogExpireUnreachable", cwd=repo
    ).stdout
