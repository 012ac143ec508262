"""Fair waiting (docs/reference/guarantees.md): waiters on one host are served in turn.

With N callers waiting for one resource, each is granted before any other caller is
granted twice after it joined the line: at most N-1 other grants while it waits. A waiter
killed at any instant never wedges the resource; a stopped one is passed over.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import history
import pytest
from waitline import waiters_dir

CTX = multiprocessing.get_context("fork")
R = "hot/1"


def boot_ms() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) // 1_000_000


def store_dir(repo: Path) -> Path:
    """The store the CLI uses here (wherever the store is located)."""
    from conftest import store_path

    return store_path(repo)


def tickets(repo: Path) -> list[str]:
    directory = waiters_dir(repo)
    return sorted(n for n in os.listdir(directory) if n[0] != ".") if directory.is_dir() else []


def wait_for_tickets(repo: Path, count: int) -> None:
    from conftest import wait_for

    wait_for(lambda: len(tickets(repo)) >= count, what=f"{count} waiter(s) to join the line")


def spawn(repo: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gitlease", *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# ------------------------------------------------------------------ the hot loop


def _looper(cwd: str, me: int, rounds: int, barrier, results) -> None:
    """acquire --wait, hold 50 ms, release, again at once, until granted ``rounds`` times:
    the loop that used to starve everyone but the caller that had just released. Each grant
    is reported with the instant this caller joined the line (a probe around the join,
    nothing else changed). The wait is long: a grant ends it, however loaded the machine."""
    os.chdir(cwd)
    import pygit2  # noqa: F401

    from gitlease.cli import claims  # noqa: F401  (registers the commands: imports done here)
    from gitlease.cli.app import main
    from gitlease.state import waitqueue

    joined: list[int] = []
    join = waitqueue.Line._join

    def probe(self: waitqueue.Line) -> waitqueue.Ticket:
        ticket = join(self)
        joined.append(boot_ms())
        return ticket

    waitqueue.Line._join = probe  # type: ignore[method-assign]
    receipt = f"{cwd}/../receipts/w{me}.json"
    quiet = io.StringIO()
    barrier.wait(timeout=300)
    granted = 0
    while granted < rounds:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(quiet):
            code = main(["acquire", R, "--wait", "10m", "--ttl", "10m", "--owner", f"w{me}",
                         "--receipt", receipt, "--no-bind", "--json"])  # fmt: skip
        claim_id = json.loads(out.getvalue()).get("claim_id") if code == 0 else None
        results.put((me, joined[-1] if joined else None, code, claim_id))
        if code == 0:
            granted += 1
            time.sleep(0.05)
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                main(["release", "--receipt", receipt])
    results.put((me, None, None, "done"))


@pytest.mark.slow
def test_ten_waiters_in_a_hot_loop_are_served_in_turn(repo: Path) -> None:
    n = 10
    (repo.parent / "receipts").mkdir(mode=0o700)
    barrier = CTX.Barrier(n)
    results = CTX.Queue()
    procs = [
        CTX.Process(target=_looper, args=(str(repo), i, 4, barrier, results)) for i in range(n)
    ]
    for p in procs:
        p.start()
    grants: list[tuple[int, int, str]] = []  # (waiter, joined at, claim id)
    codes = []
    done = 0
    try:
        while done < n:
            me, joined, code, claim_id = results.get(timeout=300)
            if claim_id == "done":
                done += 1
                continue
            codes.append(code)
            if code == 0:
                assert joined is not None
                grants.append((me, joined, claim_id))
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.exitcode is None:
                p.kill()
    assert set(codes) == {0}, f"a wait ran out: {codes.count(3)} times"

    from gitlease.api.history import log
    from gitlease.store.location import open_store

    chain = log(open_store(cwd=repo), R)
    history.assert_no_two_holders(chain)
    started = {cid: start for cid, _rev, start, _end in history.claim_intervals(chain)}
    owner = {cid: me for me, _j, cid in grants}
    assert set(started) == set(owner), "every grant in the store was reported, and only those"
    per_waiter = {i: sum(1 for me, _j, _c in grants if me == i) for i in range(n)}
    assert set(per_waiter.values()) == {4}, per_waiter
    worst = 0
    for me, joined, cid in grants:
        others = [c for c, s in started.items() if joined < s < started[cid] and owner[c] != me]
        worst = max(worst, len(others))
    assert worst <= n - 1, f"a waiter saw {worst} other grants (bound {n - 1}); {per_waiter}"


# ------------------------------------------------------------------ who goes first


def test_the_caller_that_just_released_queues_behind_a_waiter(cli, repo: Path, monkeypatch):
    from gitlease.api import lease
    from gitlease.errors import HeldError
    from gitlease.store.location import open_store

    monkeypatch.chdir(repo)
    store = open_store()
    lease.acquire(store, R, ttl="1m", bind=False)
    waiter = spawn(repo, "acquire", R, "--wait", "30s", "--ttl", "1m", "--no-bind", "--json")
    try:
        wait_for_tickets(repo, 1)
        lease.release(store, R)
        with pytest.raises(HeldError):  # at once, with a wait: behind the waiter, not before
            lease.acquire(store, R, ttl="1m", bind=False, wait="3s")
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    assert cli("show", R, "--json").json["claim_id"] == json.loads(out)["claim_id"]


def test_a_caller_that_does_not_wait_yields_to_a_waiter(cli, repo: Path) -> None:
    import threading

    from gitlease.model.refname import encode
    from gitlease.state.waitqueue import STALE_SECONDS, Line

    line = Line(store_dir(repo), [encode(R)])
    looking = threading.Event()
    looking.set()

    def look() -> None:  # a live waiter touches its ticket at every look
        while looking.is_set():
            line.touch()
            time.sleep(0.1)

    with line.joined():
        assert line.ticket is not None
        toucher = threading.Thread(target=look, daemon=True)
        toucher.start()
        got = cli("acquire", R, "--json")
        assert got.code == 3, got
        assert "waiting for it" in got.json["error"]["message"]
        assert got.json["error"]["claim"]["state"] == "free"
        assert cli("free", R, "other/1").out.split() == ["other/1"], "free agrees with acquire"
        first = cli("acquire", "--first-free", R, "other/1", "--json")
        assert first.code == 0 and first.json["resource"] == "other/1"
        held = cli("acquire", "--first-free", R, "--json").json["error"]
        assert held["claims"][0]["waiting"] == 1

        looking.clear()  # the waiter stops looking ...
        toucher.join(timeout=60)
        old = time.time() - STALE_SECONDS - 1  # ... and is passed over
        os.utime(line.ticket.path, (old, old))
        assert cli("acquire", R, "--json").code == 0
    assert tickets(repo) == []


def test_first_free_waiters_take_their_turn_on_each_candidate(cli, repo: Path) -> None:
    for resource in ("c/1", "c/2"):
        assert cli("acquire", resource, "--ttl", "1m", "--no-bind", "--receipt",
                   f"../{resource[-1]}.json").code == 0  # fmt: skip
    first = spawn(repo, "acquire", "--first-free", "c/1", "c/2", "--wait", "30s", "--no-bind",
                  "--json")  # fmt: skip
    second = None
    try:
        wait_for_tickets(repo, 1)
        second = spawn(repo, "acquire", "c/2", "--wait", "30s", "--no-bind", "--json")
        wait_for_tickets(repo, 2)
        assert cli("release", "c/2", "--receipt", "../2.json").code == 0
        out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
        assert json.loads(out)["resource"] == "c/2", "the first in line for c/2 got it"
        assert second.poll() is None, "the second waits on"
        assert cli("release", "c/2").code == 0  # the first's claim (its receipt is here)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
        assert json.loads(out)["resource"] == "c/2"
    finally:
        first.kill()
        if second is not None:
            second.kill()


# ------------------------------------------------------------------ killed waiters


def test_a_killed_waiter_never_wedges_the_resource(cli, repo: Path) -> None:
    assert cli("acquire", R, "--ttl", "1m", "--no-bind", "--receipt", "../h.json").code == 0
    killed = spawn(repo, "acquire", R, "--wait", "60s", "--no-bind")
    waiter = None
    try:
        wait_for_tickets(repo, 1)
        waiter = spawn(repo, "acquire", R, "--wait", "60s", "--no-bind", "--json")
        wait_for_tickets(repo, 2)
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert cli("release", R, "--receipt", "../h.json").code == 0
        out, err = waiter.communicate(timeout=60)
        assert waiter.returncode == 0, err
        assert json.loads(out)["revision"] == 2
    finally:
        killed.kill()
        if waiter is not None:
            waiter.kill()
    assert cli("release", R).code == 0
    assert cli("acquire", R, "--json").code == 0, "the dead ticket is no one's turn"
    assert tickets(repo) == []


def test_what_a_waiter_killed_at_any_instant_leaves_behind_blocks_nobody(cli, repo: Path):
    """A ticket whose owner died, a temporary ticket of a join cut short, the numbering lock
    file: a plain acquire and a waiting one both go through."""
    directory = waiters_dir(repo)
    directory.mkdir(parents=True)
    from gitlease.model.refname import encode

    (directory / "w-0000000000000001-999999").write_text(f"gitlease-waiter v1\n{encode(R)}\n")
    tmp = directory / ".w-0000000000000002-999999-abcd.tmp"
    tmp.write_text("gitlease-waiter v1\n")
    old = time.time() - 60
    os.utime(tmp, (old, old))
    (directory.parent / "waiters.lock").write_text("")
    assert cli("acquire", R, "--ttl", "1m", "--json").code == 0
    assert cli("release", R).code == 0
    assert cli("acquire", R, "--wait", "10s", "--json").code == 0
    assert os.listdir(directory) == []


def _chaos_client(cwd: str, me: int) -> None:
    os.chdir(cwd)
    from gitlease.cli import claims  # noqa: F401
    from gitlease.cli.app import main

    receipt = f"{cwd}/../receipts/k{me}.json"
    quiet = io.StringIO()
    while True:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            code = main(["acquire", R, "--wait", "30s", "--ttl", "2s", "--owner", f"k{me}",
                         "--receipt", receipt, "--no-bind"])  # fmt: skip
            if code == 0:
                time.sleep(0.05)
                main(["release", "--receipt", receipt])


@pytest.mark.slow
def test_waiters_killed_at_random_instants_never_make_two_holders_or_wedge(cli, repo: Path):
    (repo.parent / "receipts").mkdir(mode=0o700)
    rng = random.Random(7)
    procs = {i: CTX.Process(target=_chaos_client, args=(str(repo), i)) for i in range(5)}
    for p in procs.values():
        p.start()
    from gitlease.api.history import log
    from gitlease.store.location import open_store

    def claims() -> int:
        return len({c.record.claim_id for c in log(open_store(cwd=repo), R) if c.record})

    kills = 0
    try:  # until enough kills and grants (not for a time: a loaded machine only takes longer)
        deadline = time.monotonic() + 300  # (a hang: the events come far sooner)
        while kills <= 10 or claims() <= 10:
            assert time.monotonic() < deadline, f"{kills} kills, {claims()} claims"
            time.sleep(rng.uniform(0.05, 0.4))
            i = rng.randrange(len(procs))
            os.kill(procs[i].pid, signal.SIGKILL)
            procs[i].join()
            kills += 1
            procs[i] = CTX.Process(target=_chaos_client, args=(str(repo), i))
            procs[i].start()
    finally:
        for p in procs.values():
            if p.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
            p.join()
    chain = log(open_store(cwd=repo), R)
    history.assert_no_two_holders(chain)
    assert kills > 10 and len({c.record.claim_id for c in chain if c.record}) > 10
    # whatever the kills left, the resource is free within its TTL (2 s), and nobody's turn
    got = cli("acquire", R, "--wait", "2m", "--json")
    assert got.code == 0, got
    assert tickets(repo) == []
    assert [c["resource"] for c in cli("list", "--json").json["claims"]] == [R]
