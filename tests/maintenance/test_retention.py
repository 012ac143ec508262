"""A store that lives for years: the retention policy, the pass that applies it, and reads
whose cost follows what they print (docs/howto/cleanup.md, docs/reference/store.md).

The policy is set per test in the store's own config (``gitlease.historyRecords``,
``gitlease.historyAge``, ``gitlease.tombstoneAge``); the library's pass is run with
``grace="now"`` so that ``git gc`` drops what the pass expired at once (nothing else writes
during these tests), where the daily pass leaves unreferenced objects an hour.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import NEEDS_SHIM, git, make_repo, run_cli, store_git, store_path, wall_clock_moved
from gitcalls import counted, counting_git

import gitlease
from gitlease._util import files as _files
from gitlease.errors import HeldError
from gitlease.maintenance.prune import retain
from gitlease.model.refname import encode
from gitlease.state import floors, keepers

R = "github/acme/api/42"
DAY = 86_400


def _policy(repo: Path, **keys: str) -> None:
    for key, value in keys.items():
        store_git("config", f"gitlease.{key}", value, cwd=repo)


def _reflog(repo: Path, resource: str) -> list[str]:
    path = store_path(repo) / "logs" / encode(resource)
    return path.read_text().splitlines() if path.exists() else []


def _objects(repo: Path) -> set[str]:
    out = store_git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)", cwd=repo)
    return set(out.stdout.split())


def _named(repo: Path) -> set[str]:
    """Every object a ref or a reflog of the store names: all that should survive gc."""
    names = set(
        store_git(
            "for-each-ref", "--format=%(objectname)", "refs/worklease/", cwd=repo
        ).stdout.split()
    )
    logs = store_path(repo) / "logs" / "refs" / "worklease"
    for path in logs.rglob("*") if logs.exists() else []:
        if path.is_file():
            for line in path.read_text().splitlines():
                names.update(o for o in line.split(" ")[:2] if o.strip("0"))
    return names


def _cycle(store, resource: str, heartbeats: int = 1) -> None:
    gitlease.acquire(store, resource, ttl="10m", bind=False)
    for _ in range(heartbeats):
        gitlease.heartbeat(store, resource)
    gitlease.release(store, resource)


# ------------------------------------------------------------------ the history kept


def test_the_pass_shrinks_reflogs_and_objects_to_what_the_policy_keeps(store, repo: Path) -> None:
    for _ in range(5):
        _cycle(store, R, heartbeats=2)  # 4 records a claim: revisions 1..5, 20 records
    for _ in range(2):
        _cycle(store, "other/1")
    lines_before, objects_before = len(_reflog(repo, R)), len(_objects(repo))
    assert lines_before == 20
    _policy(repo, historyRecords="6", historyAge="0s")

    report = retain(store, grace="now")

    assert report.trimmed == 1 and report.expired == 20 - 6
    assert len(_reflog(repo, R)) == 6 and len(_reflog(repo, "other/1")) == 6
    assert _reflog(repo, R)[0].startswith("0" * 40), "the first kept line names no dropped record"
    after = _objects(repo)
    assert len(after) < objects_before and after == _named(repo), "gc dropped exactly the expired"
    kept = gitlease.history(store, R)
    assert len(kept.records) == 6 and kept.earlier_expired and kept.kept_from_revision == 4
    assert [r.record.revision for r in kept.records] == [4, 4, 5, 5, 5, 5]
    assert [r.state for r in kept.records][-1] == "released"
    untouched = gitlease.history(store, "other/1")
    assert len(untouched.records) == 6 and not untouched.earlier_expired
    assert gitlease.verify(store).ok


def test_log_says_where_the_kept_history_starts(cli, repo: Path) -> None:
    for _ in range(3):
        cli("acquire", R)
        cli("release", R)
    _policy(repo, historyRecords="2", historyAge="0s")
    assert cli("prune").code == 0
    text = cli("log", R).out.splitlines()
    assert text[0] == "history kept from revision 3; earlier records expired by retention"
    assert len(text) == 3 and " rev 3 " in text[1] and "released" in text[2]
    doc = cli("log", R, "--json").json
    assert doc["earlier_expired"] is True and doc["kept_from_revision"] == 3
    assert [r["revision"] for r in doc["records"]] == [3, 3]
    fresh = cli("log", "never/used", "--json").json
    assert fresh == {
        "resource": "never/used",
        "records": [],
        "earlier_expired": False,
        "kept_from_revision": None,
    }


@NEEDS_SHIM
def test_everything_younger_than_the_history_age_is_kept(cli, repo: Path) -> None:
    ten_days_ago = wall_clock_moved(-10 * DAY)
    for _ in range(4):  # revisions 1-4, written "ten days ago" (records and reflog lines)
        assert cli("acquire", R, env=ten_days_ago).code == 0
        assert cli("release", R, env=ten_days_ago).code == 0
    for _ in range(3):  # revisions 5-7, now
        cli("acquire", R)
        cli("heartbeat", R)
        cli("release", R)
    _policy(repo, historyRecords="2", historyAge="7d")
    doc = cli("prune", "--json").json
    assert doc["expired_records"] == 8 and doc["pruned"] == []
    history = cli("log", R, "--json").json
    assert [r["revision"] for r in history["records"]] == [5, 5, 5, 6, 6, 6, 7, 7, 7]
    assert history["earlier_expired"] is True


def test_an_active_claims_records_back_to_its_acquire_are_kept(store, repo: Path) -> None:
    for _ in range(3):
        _cycle(store, R)
    gitlease.acquire(store, R, ttl="10m", bind=False)
    for _ in range(25):
        gitlease.heartbeat(store, R)
    _policy(repo, historyRecords="3", historyAge="0s")

    assert retain(store, grace="now").expired == 9
    kept = gitlease.history(store, R)
    assert len(kept.records) == 26 and kept.kept_from_revision == 4 and kept.earlier_expired
    assert {c.record.revision for c in kept.records} == {4}
    assert kept.records[-1].state == "active"
    gitlease.heartbeat(store, R)  # the holder carries on
    assert gitlease.release(store, R).state == "released"
    assert gitlease.verify(store).ok
    assert retain(store, grace="now").expired == 27 - 3 + 1, "released: the policy applies now"
    assert len(gitlease.log(store, R)) == 3


def test_a_record_that_does_not_verify_keeps_its_history_for_repair(store, repo: Path) -> None:
    for _ in range(4):
        _cycle(store, R)
    bogus = store_git("hash-object", "-w", "--stdin", cwd=repo, check=True)  # empty blob
    ref = encode(R)
    subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "update-ref", ref, bogus.stdout.strip()],
        check=True,
    )
    _policy(repo, historyRecords="1", historyAge="0s")
    retain(store, grace="now")
    assert len(_reflog(repo, R)) == 13, "nothing expires from a resource verify must repair"
    report = gitlease.verify(store, repair=True)
    assert report.ok and "revision 5" in report.problems[0].message


def _forge(repo: Path, ref: str, *changes: tuple[str, str]) -> str:
    """The record at ``ref`` with ``changes`` made (its signature no longer holds), put at
    ``ref`` by hand; the forgery's object id."""
    oid = store_git("rev-parse", ref, cwd=repo).stdout.strip()
    raw = store_git("cat-file", "blob", oid, cwd=repo).stdout
    for old, new in changes:
        assert old in raw, old
        raw = raw.replace(old, new)
    forged = subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
        input=raw, text=True, capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    store_git("update-ref", ref, forged, oid, cwd=repo)
    return forged


def test_a_forged_tombstone_over_a_live_claim_is_never_removed(store, repo: Path) -> None:
    """The pass looks at a record's text before it checks a signature (most records need no
    check); a record whose text says "released long ago" is still judged before it goes:
    a forgery over a live claim is invalid, so its ref and its history stay."""
    for _ in range(3):
        _cycle(store, R)
    gitlease.acquire(store, R, ttl="10m", bind=False)
    ref = encode(R)
    held = store_git("cat-file", "blob", encode(R), cwd=repo).stdout
    released_at = held.split("\nacquired-at ")[1].split("\n")[0]
    forged = _forge(
        repo, ref, ("\nstate held\n", "\nstate released\n"),
        ("\nreleased-at -\n", f"\nreleased-at {released_at}\n"),
    )  # fmt: skip
    lines = len(_reflog(repo, R))
    _policy(repo, historyRecords="1", historyAge="0s")

    report = retain(store, older_than="0s", grace="now")
    assert report.pruned == [] and report.expired == 0, report.to_dict()
    assert store_git("rev-parse", ref, cwd=repo).stdout.strip() == forged
    assert len(_reflog(repo, R)) == lines, "nothing expires from a resource verify must repair"
    assert [p.kind for p in gitlease.verify(store).problems] == ["invalid-record"]


def test_a_pass_judges_only_the_records_it_may_act_on(
    worktrees: tuple[Path, Path], monkeypatch
) -> None:
    """Each record the pass acts on is judged (its signature checked) once, and only those:
    with nothing else due, a pass over live claims checks none of their signatures (before,
    every record of the store was checked, on every pass)."""
    from gitlease.maintenance import judging
    from gitlease.store.location import open_store

    a, b = worktrees
    for i in range(4):  # live claims whose receipts are in the other worktree
        assert run_cli("acquire", f"live/{i}", "--ttl", "10m", cwd=b).code == 0
        assert run_cli("heartbeat", f"live/{i}", cwd=b).code == 0
    assert run_cli("acquire", "old/1", cwd=b).code == 0
    assert run_cli("release", "old/1", cwd=b).code == 0
    judged: list[str] = []
    real = judging.judge

    def counting(snap, now, *args, **kw):
        judged.append(snap.ref)
        return real(snap, now, *args, **kw)

    monkeypatch.setattr(judging, "judge", counting)
    monkeypatch.chdir(a)
    report = retain(open_store(), older_than="0s", grace="now")
    assert report.pruned == ["old/1"], report.to_dict()
    assert judged == [encode("old/1")], "only the tombstone it removed was judged, once"
    judged.clear()
    report = retain(open_store(), grace="now")
    assert judged == [] and report.pruned == [], "nothing due: no signature checked"
    for i in range(4):
        assert run_cli("heartbeat", f"live/{i}", cwd=b).code == 0


# ------------------------------------------------------------------ revisions and floors


def test_revisions_keep_increasing_across_prune_and_reacquire(cli, repo: Path) -> None:
    floors_dir = store_path(repo) / "worklease" / "floors"
    for _ in range(3):
        cli("acquire", R)
        cli("release", R)
    cli("acquire", "b/1")
    cli("release", "b/1")
    ref = encode(R)
    guard = store_path(repo) / "worklease" / "guards" / floors.digest(ref)
    assert guard.exists()

    doc = cli("prune", "--older-than", "0s", "--json").json
    assert sorted(doc["pruned"]) == ["b/1", R] and doc["floors"] == 2
    assert sorted(os.listdir(floors_dir)) == ["packed"], "loose floors are folded into one file"
    assert not _reflog(repo, R), "a pruned resource's reflog goes with its ref"
    assert not guard.exists(), "an unheld guard of a resource without a ref is removed"
    assert cli("log", R).out.strip() == "no records kept: earlier records expired by retention"

    assert cli("acquire", R, "--json").json["revision"] == 4
    assert cli("prune", "--json").json["removed"]["floors"] == 1, "the ref carries it again"
    assert floors.read_packed(store_path(repo)) == {floors.digest(encode("b/1")): 1}
    assert cli("log", R).out.splitlines()[0].startswith("history kept from revision 4;")
    cli("release", R)
    assert cli("prune", "--older-than", "0s", "--json").json["pruned"] == [R]
    assert cli("acquire", R, "--json").json["revision"] == 5
    assert cli("acquire", "b/1", "--json").json["revision"] == 2


def test_a_floor_stays_while_its_ref_does_not_carry_a_higher_revision(store, repo: Path) -> None:
    for _ in range(3):
        _cycle(store, R)
    assert retain(store, older_than="0s", grace="now").pruned == [R]
    gitlease.acquire(store, R, ttl="10m", bind=False)  # revision 4
    bogus = store_git("hash-object", "-w", "--stdin", cwd=repo).stdout.strip()
    store_git("update-ref", encode(R), bogus, cwd=repo)  # the ref no longer shows a revision
    retain(store, grace="now")
    assert floors.read(store_path(repo), encode(R)) == 3


def test_a_reflog_left_without_its_ref_is_removed_and_its_revisions_kept(store, repo) -> None:
    for _ in range(6):
        _cycle(store, R)
    ref = encode(R)
    log = store_path(repo) / "logs" / ref
    saved = log.read_bytes()
    store_git("update-ref", "-d", ref, cwd=repo)  # by hand, or gitlease 0.1's prune
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(saved)  # libgit2 leaves the reflog behind when it deletes a ref

    report = retain(store, grace="now")
    assert report.removed["reflogs"] == 1 and not log.exists()
    assert _objects(repo) == _named(repo) == set()
    assert gitlease.acquire(store, R, bind=False).claim.record.revision == 7


def test_packed_floors_are_found_by_bisection_and_by_a_scan_after_a_hand_edit(tmp_path) -> None:
    refs = [encode(f"r/{i}") for i in range(500)]
    values = {floors.digest(ref): 10**12 + i for i, ref in enumerate(refs)}
    floors.write_packed(tmp_path, values)
    packed = tmp_path / "worklease" / "floors" / "packed"
    assert packed.stat().st_size == 61 * 500
    assert [floors.read(tmp_path, ref) for ref in refs] == [10**12 + i for i in range(500)]
    assert floors.read(tmp_path, encode("absent")) == 0
    floors.write(tmp_path, refs[7], 3)  # a loose floor below the packed one: never lowers it
    assert floors.read(tmp_path, refs[7]) == 10**12 + 7
    packed.write_bytes(packed.read_bytes() + b"# an edit by hand\n")
    assert floors.read(tmp_path, refs[499]) == 10**12 + 499


# ------------------------------------------------------------------ never what serves


def test_a_guard_someone_holds_is_never_removed(repo: Path, tmp_path: Path) -> None:
    ref = encode("absent/1")
    guard = store_path(repo) / "worklease" / "guards" / floors.digest(ref)
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, pathlib\n"
            "from gitlease.state import guards\n"
            "with guards.hold(pathlib.Path(sys.argv[1]), sys.argv[2]):\n"
            "    pathlib.Path(sys.argv[3]).touch()\n"
            "    time.sleep(30)\n",
            str(guard),
            ref,
            str(ready),
        ]
    )
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.02)
        inode = guard.stat().st_ino
        doc = run_cli("prune", "--json", cwd=repo).json
        assert doc["removed"]["guards"] == 0 and guard.stat().st_ino == inode
    finally:
        holder.kill()
        holder.wait()
    assert run_cli("prune", "--json", cwd=repo).json["removed"]["guards"] == 1
    assert not guard.exists()


def test_a_guard_held_by_a_running_exec_is_never_taken(cli, repo: Path, tmp_path: Path) -> None:
    for _ in range(4):
        cli("acquire", R)
        cli("release", R)
    cli("acquire", R, "--ttl", "1m")
    _policy(repo, historyRecords="1", historyAge="0s")
    started, go = tmp_path / "started", tmp_path / "go"
    script = (
        "import pathlib, time\n"
        f"pathlib.Path({str(started)!r}).touch()\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.02)\n"
    )
    guard = store_path(repo) / "worklease" / "guards" / floors.digest(encode(R))
    runner = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "exec", R, "--", sys.executable, "-c", script],
        cwd=repo,
    )
    try:
        deadline = time.monotonic() + 20
        while not started.exists():
            assert time.monotonic() < deadline and runner.poll() is None
            time.sleep(0.02)
        inode = guard.stat().st_ino
        doc = cli("prune", "--json").json
        assert doc["busy"] == [R] and doc["expired_records"] == 0
        assert guard.stat().st_ino == inode
    finally:
        go.touch()
    assert runner.wait(timeout=30) == 0
    assert cli("prune", "--json").json["expired_records"] == 8, "left for the next pass"
    assert cli("release", R).code == 0


def test_a_guard_removed_while_a_caller_opened_it_is_not_shared(
    tmp_path: Path, monkeypatch
) -> None:
    """The race that removing guards opens: a caller opens the guard file, the pass removes
    it, a second caller makes a new one and holds it. The first must not hold the old file."""
    path = tmp_path / "guards" / "g"
    path.parent.mkdir()
    path.touch()
    real_open = _files.open_lock_file
    holder_ready, release_holder = threading.Event(), threading.Event()

    def second_caller() -> None:
        with _files.flocked(path, wait=5, busy=lambda: HeldError("busy")):
            holder_ready.set()
            release_holder.wait(10)

    calls = []

    def open_then_race(target: Path) -> int:
        fd = real_open(target)
        if not calls:
            calls.append(fd)
            assert _files.remove_unheld(target), "nobody holds it yet: the pass removes it"
            threading.Thread(target=second_caller, daemon=True).start()
            assert holder_ready.wait(10)
        return fd

    monkeypatch.setattr(_files, "open_lock_file", open_then_race)
    try:
        with (
            pytest.raises(HeldError),
            _files.flocked(path, wait=0.3, busy=lambda: HeldError("busy")),
        ):
            pass
    finally:
        release_holder.set()


def test_live_receipts_stay_and_spent_or_orphaned_ones_go(cli, repo: Path) -> None:
    receipts = repo / ".git" / "worklease" / "receipts"
    live = Path(cli("acquire", "live/1", "--ttl", "10m", "--json").json["receipt"])
    spent = Path(cli("acquire", "spent/1", "--json").json["receipt"])
    cli("release", "spent/1")
    orphan = Path(cli("acquire", "gone/1", "--ttl", "1s", "--json").json["receipt"])
    time.sleep(1.2)
    other = repo.parent / "other"
    git("worktree", "add", "-q", "-b", "other", str(other), cwd=repo)
    assert cli("acquire", "gone/1", cwd=other).code == 0  # the claim is replaced
    old = time.time() - 2 * DAY
    for path in (spent, orphan):
        os.utime(path, (old, old))
    doc = cli("prune", "--json").json
    assert doc["removed"]["receipts"] == 2
    assert live.exists() and not spent.exists() and not orphan.exists()
    assert [p.name for p in receipts.glob("*/*.json")] == [live.name]  # a directory a resource
    assert cli("heartbeat", "live/1").code == 0


def test_registry_entries_of_ended_keepalives_and_stale_sightings_go(store, repo: Path) -> None:
    gitlease.acquire(store, R, ttl="10m", bind=False)
    git_dir = store_path(repo)
    dead = subprocess.Popen(["true"])
    dead.wait()
    entry = keepers.Keeper(
        pid=dead.pid, start=1, boot="x", claims=((R, encode(R), "c-0"),), bundle_id=None,
        watched_pid=1, watched_start=1, watched_name="agent", started_at="-", until="-",
        log="/dev/null",
    )  # fmt: skip
    keepers._write(git_dir, [entry])
    oid = store_git("rev-parse", encode(R), cwd=repo).stdout.strip()
    sightings = git_dir / "worklease" / "sightings"
    sightings.write_text(f"{encode(R)} {oid} boot 5\nrefs/worklease/gone.lease {oid} boot 6\n")
    report = retain(store, grace="now")
    assert report.removed["keepalive"] == 1 and report.removed["sightings"] == 1
    assert json.loads((git_dir / "worklease" / "keepalive.json").read_text()) == {"keepers": []}
    assert sightings.read_text() == f"{encode(R)} {oid} boot 5\n"


# ------------------------------------------------------------------ reads that stay cheap


def _calls(command: list[str], repo: Path, env: dict[str, str], calls: Path) -> int:
    calls.write_text("")
    out = run_cli(*command, cwd=repo, env=env)
    assert out.code == 0, out
    return counted(calls)  # (the store's location is read by git only when its cache is stale)


def test_log_and_verify_spawn_a_bounded_number_of_git_processes(store, repo, tmp_path) -> None:
    env, calls = counting_git(tmp_path)
    _cycle(store, "short/1")
    _cycle(store, R)
    log_short = _calls(["log", R], repo, env, calls)
    verify_small = _calls(["verify"], repo, env, calls)
    for _ in range(15):
        _cycle(store, R, heartbeats=3)  # 77 records
    for i in range(12):
        _cycle(store, f"more/{i}", heartbeats=2)
    assert len(gitlease.log(store, R)) == 78
    assert _calls(["log", R], repo, env, calls) == log_short <= 6
    assert _calls(["verify"], repo, env, calls) == verify_small <= 6


# ------------------------------------------------------------------ running by itself


def _wait_for_summary(stamp: Path, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = stamp.read_text() if stamp.exists() else ""
        if text.strip():
            return json.loads(text)
        time.sleep(0.1)
    raise AssertionError("the background pass never wrote its summary")


def test_writes_start_the_daily_pass_in_the_background(cli, repo: Path) -> None:
    for _ in range(4):
        cli("acquire", R)
        cli("release", R)
    stamp = store_path(repo) / "worklease" / "last-prune"
    assert stamp.exists() and stamp.read_text() == "", "the first write starts the day"
    _policy(repo, historyRecords="2", historyAge="0s")
    cli("acquire", "x/1")
    assert stamp.read_text() == "", "not due yet: no pass"
    two_days_ago = time.time() - 2 * DAY
    os.utime(stamp, (two_days_ago, two_days_ago))

    assert cli("acquire", "x/2").code == 0  # returns at once; the pass runs detached
    doc = _wait_for_summary(stamp)
    assert doc["gc"] is True and doc["skipped"] is None and doc["expired_records"] == 6
    assert time.time() - stamp.stat().st_mtime < 120
    assert len(_reflog(repo, R)) == 2


def test_the_daily_pass_can_be_turned_off(cli, repo: Path) -> None:
    cli("acquire", R)
    cli("release", R)
    _policy(repo, autoPrune="false", historyRecords="1", historyAge="0s")
    stamp = store_path(repo) / "worklease" / "last-prune"
    two_days_ago = time.time() - 2 * DAY
    os.utime(stamp, (two_days_ago, two_days_ago))
    cli("acquire", "x/1")
    assert _wait_for_summary(stamp)["skipped"] == "gitlease.autoPrune is false"
    assert len(_reflog(repo, R)) == 2
    assert cli("prune", "--json").json["expired_records"] == 1, "prune by hand still works"


def test_a_bad_policy_value_is_a_usage_error_naming_the_key(cli, repo: Path) -> None:
    cli("acquire", R)
    for key, value in (("historyRecords", "0"), ("historyAge", "a week"), ("autoPrune", "maybe")):
        _policy(repo, **{key: value})
        out = cli("prune")
        assert out.code == 2 and f"gitlease.{key}" in out.err, out
        store_git("config", "--unset", f"gitlease.{key}", cwd=repo)
    assert cli("prune").code == 0


# ------------------------------------------------------------------ through a remote


def test_through_a_remote_the_daily_pass_compacts_only_this_hosts_mirror(tmp_path: Path) -> None:
    from hosts import make_host, make_server

    server = make_server(tmp_path)
    host = make_host(server.as_uri(), tmp_path / "host-a")
    for _ in range(4):
        assert run_cli("acquire", R, cwd=host).code == 0
        assert run_cli("heartbeat", R, cwd=host).code == 0
        assert run_cli("release", R, cwd=host).code == 0
    refs = git("for-each-ref", "refs/worklease/", cwd=server).stdout
    git("config", "gitlease.historyRecords", "2", cwd=host)
    git("config", "gitlease.historyAge", "0s", cwd=host)

    assert run_cli("prune", cwd=host).code == 2, "prune by hand stays refused"
    doc = run_cli("prune", "--auto", "--older-than", "0s", "--json", cwd=host).json
    assert doc["pruned"] == [] and doc["expired_records"] == 10
    assert len((host / ".git" / "logs" / encode(R)).read_text().splitlines()) == 2
    assert git("for-each-ref", "refs/worklease/", cwd=server).stdout == refs
    assert run_cli("acquire", R, "--json", cwd=host).json["revision"] == 5
    other = make_repo(tmp_path / "unrelated")  # the project's own repository is not touched
    assert other.exists()
