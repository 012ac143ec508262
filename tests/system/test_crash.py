"""kill -9 at random instants never makes two holders nor wedges a resource past TTL + 5 s."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, SUPPORT
from history import assert_no_two_holders

from gitlease.api.history import log
from gitlease.api.lease import acquire
from gitlease.store.location import open_store

TTL_S = 1.0
RESOURCES = ["chaos/a", "chaos/b", "chaos/c"]


def _spawn(repo: Path, i: int) -> subprocess.Popen[bytes]:
    """Worker ``i``: the even ones write as the CLI does (git update-ref), the odd ones
    through libgit2, as the library does; both race on the one store."""
    writer = "git" if i % 2 == 0 else "libgit2"
    return subprocess.Popen(
        [sys.executable, str(SUPPORT / "chaos_worker.py"), *RESOURCES],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CHAOS_WRITER": writer},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_kill_minus_nine_during_loops(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(int(os.environ.get("GITLEASE_CHAOS_SEED", "7")))
    workers = [_spawn(repo, i) for i in range(4)]
    kills = 0
    deadline = time.monotonic() + 120  # (a hang: the events come far sooner)
    monkeypatch.chdir(repo)
    store = open_store()

    def progressed() -> bool:  # on a loaded machine a worker takes seconds to import
        return all(len(log(store, resource)) > 3 for resource in RESOURCES)

    time.sleep(1.0)  # let them get past imports
    # kills until 25 and the workers made progress on each (events: not for a time)
    while kills < 25 or not progressed():
        assert time.monotonic() < deadline, f"{kills} kills and no progress on each resource"
        time.sleep(rng.uniform(0.02, 0.3))
        victim = rng.randrange(len(workers))
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait()
        kills += 1
        workers[victim] = _spawn(repo, victim)
    for w in workers:
        w.send_signal(signal.SIGKILL)
        w.wait()
    assert kills > 10

    for resource in RESOURCES:  # claimable within TTL + 5 s: the wait is the bound (HELD after)
        acquire(store, resource, ttl="30s", wait=f"{TTL_S + 5}s", bind=False)
    for resource in RESOURCES:
        chain = log(store, resource)
        assert len(chain) > 3, "the workers made no progress"
        assert_no_two_holders(chain)
