"""Many real processes racing for one resource: exactly one winner, every loser HELD (exit 3)."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import time
from pathlib import Path

import pytest

RACERS = 10
ROUNDS = 20
CTX = multiprocessing.get_context("fork")


def _racer(cwd: str, boot: dict[str, str], resources: list[str], barrier, results) -> None:
    """One contender: imports done, then for each round wait at the barrier and acquire.

    ``boot`` lets it play another host (``tests/hosts.py``) in a remote store's tests.
    """
    os.chdir(cwd)
    for name in ("HOME", "XDG_STATE_HOME"):  # another host keeps its own per-user state
        if name in boot:
            os.environ[name] = boot[name]
    if "GITLEASE_TESTING_BOOT_ID" in boot:  # it counts only with the gate (tests/hosts.py)
        from gitlease.model import clock

        os.environ.update(boot)
        clock.load_test_switches()
        assert clock.boot_id() == boot["GITLEASE_TESTING_BOOT_ID"]
    import pygit2  # noqa: F401

    from gitlease.cli import claims  # noqa: F401  (registers commands; imports done here)
    from gitlease.cli.app import main

    for resource in resources:
        barrier.wait()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(["acquire", resource, "--ttl", "1m", "--json"])
        results.put((resource, os.getpid(), code))


def race(
    places: list[tuple[Path, dict[str, str]]], resources: list[str], racers: int = RACERS
) -> dict[str, list[int]]:
    """``racers`` processes, dealt round-robin to ``places`` (a directory and the host it
    plays), acquire each resource in turn, all released at once: the exit codes."""
    barrier = CTX.Barrier(racers)
    results = CTX.Queue()
    dealt = [places[i % len(places)] for i in range(racers)]
    procs = [
        CTX.Process(target=_racer, args=(str(cwd), boot, resources, barrier, results))
        for cwd, boot in dealt
    ]
    for p in procs:
        p.start()
    codes: dict[str, list[int]] = {r: [] for r in resources}
    for _ in range(racers * len(resources)):
        resource, _pid, code = results.get(timeout=180)
        codes[resource].append(code)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return codes


def _holders(repo: Path, resource: str) -> list[dict]:
    from gitlease.api.reads import log
    from gitlease.store.location import open_store

    return [c.to_dict() for c in log(open_store(cwd=repo), resource)]


@pytest.mark.slow
def test_race_on_fresh_resources_has_exactly_one_winner(repo: Path) -> None:
    resources = [f"race/fresh/{i}" for i in range(ROUNDS)]
    codes = race([(repo, {})], resources)
    for resource in resources:
        assert sorted(codes[resource]) == [0] + [3] * (RACERS - 1), (resource, codes[resource])
        history = _holders(repo, resource)
        assert [h["revision"] for h in history] == [1]


@pytest.mark.slow
def test_race_on_expired_resources_has_exactly_one_winner(repo: Path, monkeypatch) -> None:
    from gitlease.api.lease import acquire
    from gitlease.store.location import open_store

    monkeypatch.chdir(repo)
    store = open_store()
    resources = [f"race/expired/{i}" for i in range(ROUNDS)]
    for resource in resources:
        acquire(store, resource, ttl="1s", bind=False)
    time.sleep(1.2)
    codes = race([(repo, {})], resources)
    for resource in resources:
        assert sorted(codes[resource]) == [0] + [3] * (RACERS - 1), (resource, codes[resource])
        history = _holders(repo, resource)
        assert [h["revision"] for h in history] == [1, 2]
        assert history[0]["claim_id"] != history[1]["claim_id"]
