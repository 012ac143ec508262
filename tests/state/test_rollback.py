"""A ref moved back to an older record (a restored backup, a hand-run ``git update-ref``) is
refused against the resource's high-water mark, its revision floor or what a host saw; found
in the reflog without a mark; reported by ``verify``, shown by ``log``, repaired only once
the claim it hid cannot be live, kept by ``prune``, and never offered by ``free``
(docs/reliability.md, "At the edges", item 9).
"""

from __future__ import annotations

from pathlib import Path

from conftest import clock_ahead, git, run_cli, store_git, store_path
from forged import forge, put
from observe import ref_of, state

R = "edge/1"
REF = "refs/worklease/edge/1.lease"


def _rolled_back(cli, a: Path, ttl: str = "15m") -> tuple[dict, dict]:
    """A claim released, another taken at the next revision, then the ref moved back to the
    first one's tombstone: (the live claim hidden by the rollback, the tombstone's doc)."""
    first = cli("acquire", R, "--json", cwd=a).json
    tombstone = cli("release", R, "--json", cwd=a).json
    again = cli("acquire", R, "--ttl", ttl, "--json", cwd=a).json
    assert again["revision"] == first["revision"] + 1
    store_git("update-ref", ref_of(R), tombstone["oid"], cwd=a)  # a restored backup does this
    return again, tombstone


def test_a_ref_rolled_back_to_an_older_tombstone_is_refused(cli, worktrees) -> None:
    a, b = worktrees
    again, _ = _rolled_back(cli, a)
    got = cli("acquire", R, "--json", cwd=b)
    assert got.code == 7, f"a second holder while {again['claim_id']} holds: {got}"
    assert "moved back" in got.json["error"]["message"], got
    assert cli("verify", cwd=b).code == 7


def test_verify_reports_a_rollback_and_log_shows_the_hidden_live_claim(cli, worktrees) -> None:
    a, b = worktrees
    again, tombstone = _rolled_back(cli, a)
    report = cli("verify", "--json", cwd=b).json
    assert [(p["kind"], p["resource"]) for p in report["problems"]] == [("rolled-back", R)]
    history = cli("log", R, "--json", cwd=b).json["records"]
    live = [r for r in history if r["claim_id"] == again["claim_id"]]
    assert live and live[-1]["state"] == "active", "the live claim is not hidden"
    assert history[-1]["oid"] == tombstone["oid"] and "moved back" in history[-1]["problem"]
    assert "moved back" in cli("log", R, cwd=b).out
    assert cli("heartbeat", R, cwd=a).code == 4, "its holder learns at its next heartbeat"


def test_verify_repair_waits_for_the_hidden_claim_then_continues_above_it(cli, worktrees) -> None:
    a, b = worktrees
    again, _ = _rolled_back(cli, a, ttl="1m")
    waited = cli("verify", "--repair", "--json", cwd=b)
    assert waited.code == 7 and "left alone until" in waited.json["problems"][0]["message"]
    assert cli("acquire", R, cwd=b).code == 7, "not while the hidden claim may be live"
    later = clock_ahead(61)  # the hidden claim's minute has run out (on a clock moved on)
    repaired = cli("verify", "--repair", "--json", cwd=b, env=later)
    assert repaired.code == 0 and repaired.json["problems"][0]["repaired"], repaired
    took = cli("acquire", R, "--json", cwd=b, env=later)
    assert took.code == 0 and took.json["revision"] == again["revision"] + 2, "never repeated"
    assert cli("verify", cwd=b, env=later).code == 0
    ids = [r["claim_id"] for r in cli("log", R, "--json", cwd=b).json["records"]]
    assert again["claim_id"] in ids, "the history carries on from what really came last"


def test_prune_never_removes_a_tombstone_a_ref_was_moved_back_to(cli, repo: Path) -> None:
    """Removing it would hide the rollback, and let the next acquire in while the claim it
    hid may still be live."""
    again, tombstone = _rolled_back(cli, repo)
    assert cli("prune", "--older-than", "0s").code == 0
    assert cli("show", R, "--json").json["oid"] == tombstone["oid"], "left for verify --repair"
    assert cli("acquire", R, "--no-bind").code == 7
    store_git("update-ref", ref_of(R), again["oid"], cwd=repo)  # put back: no rollback
    assert cli("release", R).code == 0
    assert cli("prune", "--older-than", "0s").code == 0
    assert state(cli, R) == "free", "a healthy tombstone is pruned"
    took = cli("acquire", R, "--no-bind", "--json").json
    assert took["revision"] == again["revision"] + 1, "and continues above it"


def test_a_rollback_is_found_in_the_reflog_without_a_mark(cli, repo: Path) -> None:
    _rolled_back(cli, repo)
    marks = store_path(repo) / "worklease" / "highwater"
    for mark in marks.iterdir():
        mark.unlink()  # (an older gitlease wrote none, or a crash came before it)
    assert cli("verify").code == 7, "the reflog says what the ref held"
    assert cli("acquire", R, "--no-bind").code == 7, "and verify raised the mark"


def test_a_reflog_line_of_a_write_that_never_landed_is_no_rollback(cli, repo: Path) -> None:
    """libgit2 appends the reflog line before it renames the lock: a process killed in
    between leaves a line for a newer record that never reached the ref."""
    held = cli("acquire", R, "--no-bind", "--json").json
    phantom = put(repo, "refs/worklease/scratch.lease", forge(R, revision="9"))
    store_git("update-ref", "-d", "refs/worklease/scratch.lease", cwd=repo)
    log = store_path(repo) / "logs" / ref_of(R)
    with log.open("a") as f:
        f.write(f"{held['oid']} {phantom} killed <k@x> 1700000000 +0000\tgitlease acquire\n")
    assert cli("verify").code == 0
    assert cli("release", R).code == 0
    assert cli("acquire", R, "--no-bind", "--json").json["revision"] == held["revision"] + 1


def test_a_ref_removed_by_hand_continues_above_its_mark(cli, repo: Path) -> None:
    assert cli("acquire", R, "--no-bind").code == 0
    assert cli("release", R).code == 0
    second = cli("acquire", R, "--no-bind", "--json").json
    assert cli("release", R).code == 0
    store_git("update-ref", "-d", ref_of(R), cwd=repo)
    assert cli("acquire", R, "--no-bind", "--json").json["revision"] == second["revision"] + 1


def test_through_a_remote_a_host_refuses_a_ref_moved_back_below_what_it_saw(
    tmp_path: Path,
) -> None:
    from hosts import HOST_B_ENV, make_host, make_server

    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")

    def on_b(*args: str):
        return run_cli(*args, cwd=b, env=HOST_B_ENV)

    assert run_cli("acquire", R, "--ttl", "1m", cwd=a).code == 0
    tombstone = run_cli("release", R, "--json", cwd=a).json["oid"]
    assert on_b("acquire", R, "--ttl", "1m").code == 0  # host B writes revision 2
    assert run_cli("acquire", R, cwd=a).code == 3, "host A sees revision 2 (held)"
    git("update-ref", ref_of(R), tombstone, cwd=server)  # the server restored from a backup
    for host in (lambda *x: run_cli(*x, cwd=a), on_b):
        got = host("acquire", R, "--json")
        assert got.code == 7 and "moved back" in got.json["error"]["message"], got


def test_free_never_offers_a_ref_moved_back_that_acquire_refuses(cli, repo: Path) -> None:
    """A released claim, another taken at the next revision, then the ref moved back to the
    first one's tombstone (a restored backup): acquire refuses it (STORE), so `free`, which
    says what can be acquired now, must not offer it."""
    assert cli("acquire", R, "--no-bind").code == 0
    tombstone = cli("release", R, "--json").json["oid"]
    assert cli("acquire", R, "--no-bind", "--ttl", "1h").code == 0
    store_git("update-ref", REF, tombstone, cwd=repo)
    assert cli("acquire", R, "--no-bind").code == 7
    got = cli("free", R, "review/2", "--json")
    assert got.code == 0, got
    assert [c["resource"] for c in got.json["claims"]] == ["review/2"], got


def test_a_ref_restored_below_its_prune_floor_never_repeats_a_revision(cli, repo: Path) -> None:
    """prune removes a tombstone, keeps its revision as the floor and drops the high-water
    mark (the floor holds it); then a backup of the refs is restored, bringing back an
    older tombstone. The next acquire must not write a revision that was written before."""
    assert cli("acquire", R, "--no-bind").code == 0
    older = cli("release", R, "--json").json["oid"]
    second = cli("acquire", R, "--no-bind", "--json").json["revision"]
    assert cli("release", R).code == 0
    assert cli("prune", "--older-than", "0s").code == 0
    assert cli("show", R, "--json").json["state"] == "free", "the tombstone was pruned"
    store_git("update-ref", REF, older, cwd=repo)  # the restored backup
    got = cli("acquire", R, "--no-bind", "--json")
    if got.code == 0:
        assert got.json["revision"] > second, f"revision {second} repeated"
    else:
        assert got.code == 7 and "moved back" in got.json["error"]["message"], got
    assert cli("verify").code == 7 or got.code == 0, "verify names the ref moved back"
