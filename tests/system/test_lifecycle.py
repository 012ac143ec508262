"""The whole lifecycle between two linked worktrees of one repository, through the real CLI."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

from conftest import NEEDS_SHIM, git, store_path, wait_for, wall_clock_moved

R = "github/acme/api/42"
CLAIM_FIELDS = {
    "resource",
    "ref",
    "state",
    "claim_id",
    "owner",
    "revision",
    "bundle_id",
    "mode",
    "acquired_at",
    "renewed_at",
    "released_at",
    "expires_at",
    "expires_in",
    "renew_by",
    "note",
    "checkpoint",
    "oid",
}


def test_two_worktrees_share_one_store(cli, worktrees) -> None:
    a, b = worktrees
    store = cli("where", "--json", cwd=a).json["store"]
    assert cli("where", "--json", cwd=b).json["store"] == store == str(store_path(a))
    main = cli("where", "--json", cwd=a.parent / "repo").json
    assert main["store"] == store and main["project"] == f"file://{(a.parent / 'repo').resolve()}"


def test_lifecycle_with_exit_codes(cli, worktrees) -> None:
    a, b = worktrees
    got = cli("acquire", R, "--ttl", "1m", "--note", "fixing it", "--json", cwd=a)
    assert got.code == 0, got
    doc = got.json
    assert set(doc) >= CLAIM_FIELDS
    assert doc["state"] == "active" and doc["revision"] == 1 and doc["note"] == "fixing it"
    assert 55 < doc["expires_in"] <= 60
    receipt = Path(doc["receipt"])
    assert stat.S_IMODE(receipt.stat().st_mode) == 0o600
    assert stat.S_IMODE(receipt.parent.stat().st_mode) == 0o700
    assert str(receipt).startswith(git("rev-parse", "--absolute-git-dir", cwd=a).stdout.strip())

    held = cli("acquire", R, "--json", cwd=b)
    assert held.code == 3, held
    error = held.json["error"]
    assert error["code"] == "HELD" and error["exit"] == 3
    assert error["claim"]["claim_id"] == doc["claim_id"]
    for part in (R, doc["claim_id"], "test-agent", "revision 1", "expires"):
        assert part in error["message"]

    again = cli("acquire", R, cwd=a)
    assert again.code == 3 and "yours" in again.err, again  # never adopt, not even your own

    assert cli("heartbeat", R, cwd=b).code == 4  # b holds no receipt
    assert cli("check", R, cwd=b).code == 4
    assert cli("release", R, cwd=b).code == 4

    beat = cli("heartbeat", R, "--ttl", "2m", "--json", cwd=a)
    assert beat.code == 0 and beat.json["expires_in"] > 110 and beat.json["revision"] == 1
    assert cli("check", R, "--min-remaining", "1m", cwd=a).code == 0
    short = cli("check", R, "--min-remaining", "1h", "--json", cwd=a)
    assert short.code == 4 and "left" in short.json["error"]["message"]

    shown = cli("show", R, "--json", cwd=b).json
    assert shown["state"] == "active" and shown["oid"] == beat.json["oid"]
    assert "token" not in json.dumps(shown)

    rel = cli("release", R, "--checkpoint", "https://example.invalid/c/1", "--json", cwd=a)
    assert rel.code == 0 and rel.json["state"] == "released"
    assert rel.json["checkpoint"] == "https://example.invalid/c/1"
    assert json.loads(receipt.read_text())["token"] is None  # the token left the receipt
    assert cli("release", R, cwd=a).code == 0  # idempotent for a retry

    taken = cli("acquire", R, "--json", cwd=b)
    assert taken.code == 0 and taken.json["revision"] == 2
    assert cli("heartbeat", R, cwd=a).code == 4
    assert cli("release", R, cwd=a).code == 4

    listed = cli("list", "--json", cwd=a).json["claims"]
    assert [(c["resource"], c["state"], c["revision"]) for c in listed] == [(R, "active", 2)]
    assert cli("free", R, "other/1", cwd=a).out.split() == ["other/1"]

    history = cli("log", R, "--json", cwd=a).json["records"]
    states = [(h["revision"], h["state"]) for h in history]
    assert states == [(1, "active"), (1, "active"), (1, "released"), (2, "active")]


def test_expired_claim_is_taken_over_and_never_revived(cli, worktrees) -> None:
    a, b = worktrees
    assert cli("acquire", R, "--ttl", "1s", cwd=a).code == 0
    time.sleep(1.2)
    shown = cli("show", R, "--json", cwd=b).json
    assert shown["state"] == "expired" and shown["expires_in"] < 0
    assert cli("free", R, cwd=b).out.strip() == R
    assert cli("heartbeat", R, cwd=a).code == 4  # expired: never revived, even untaken
    release = cli("release", R, cwd=a)
    assert release.code == 4 and "after your ownership ended" in release.err
    assert cli("show", R, "--json", cwd=b).json["oid"] == shown["oid"]  # release wrote nothing
    taken = cli("acquire", R, "--json", cwd=b)
    assert taken.code == 0 and taken.json["revision"] == 2


def test_outside_a_repository_uses_the_per_user_store(cli, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    where = cli("where", "--json", cwd=plain).json
    assert where["store"].startswith(os.environ["XDG_STATE_HOME"])
    assert cli("acquire", "local/task", cwd=plain).code == 0
    assert cli("check", "local/task", cwd=plain).code == 0
    assert cli("show", "local/task", cwd=plain).code == 0
    assert cli("release", "local/task", cwd=plain).code == 0


def test_store_option_and_environment(cli, repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "shared.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    assert cli("--store", str(bare), "where", "--json").json["reason"] == "chosen by --store"
    env = {"GITLEASE_STORE": str(bare)}
    assert cli("acquire", "x/1", env=env).code == 0
    assert git("for-each-ref", "refs/worklease/", cwd=bare).stdout.strip().endswith("x/1.lease")
    assert cli("show", "x/1", "--store", str(bare), "--json").json["state"] == "active"
    missing = cli("show", "x/1", "--store", str(tmp_path / "nope"), "--json")
    assert missing.code == 7 and missing.json["error"]["code"] == "STORE"


def test_coordination_only_is_recorded_and_stated(cli) -> None:
    got = cli("acquire", "linear/ENG-1", "--coordination-only", "--json")
    assert got.json["mode"] == "coordination-only"
    assert "not fenced" in got.json["guarantee"]
    assert "not fenced" in cli("show", "linear/ENG-1").out
    assert cli("list").out.count("coordination-only") == 1


def test_library_context_manager_heartbeats_and_releases(store) -> None:
    import gitlease

    with gitlease.acquire_lease(store, "lib/1", ttl="12s") as lease:
        first = lease.claim.record.expires_at
        # nobody renews it but the background heartbeat (every TTL/3): the expiry moves on
        wait_for(lambda: gitlease.show(store, "lib/1").record.expires_at > first,
                 what="the background heartbeat")  # fmt: skip
        assert lease.check().record.expires_at > first
        assert gitlease.show(store, "lib/1").state == "active"
    assert gitlease.show(store, "lib/1").state == "released"


@NEEDS_SHIM
def test_receipts_of_released_claims_go_after_a_day(cli, repo: Path) -> None:
    """A long backlog worked from one worktree does not pile up one receipt per resource."""
    receipts = repo / ".git" / "worklease" / "receipts"
    later = wall_clock_moved(2 * 86_400)  # two days on: the wall clock only, not the boot clock
    for resource in ("old/1", "old/2", "recent/1", "held/1"):
        assert cli("acquire", resource, "--ttl", "1m").code == 0
    for resource in ("old/1", "old/2"):
        assert cli("release", resource).code == 0
    assert cli("release", "recent/1", env=later).code == 0
    assert cli("acquire", "next/1", "--ttl", "1m", env=later).code == 0
    left = {json.loads(p.read_text())["claims"][0]["resource"] for p in receipts.glob("*/*.json")}
    assert left == {"recent/1", "held/1", "next/1"}  # held/1 keeps its token: never removed
    assert cli("check", "held/1", env=later).code == 0
    assert cli("release", "recent/1", env=later).code == 0  # retried within the day: still OK
