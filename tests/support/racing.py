"""Real processes racing for resources through the CLI's entry point, all released at once
by a barrier: :func:`race`, used by the race tests of one host (tests/system/test_races.py),
of clones (tests/store/test_clones.py) and of hosts through a remote (tests/store/test_remote.py).
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
from pathlib import Path

RACERS = 10
CTX = multiprocessing.get_context("fork")


def _racer(cwd: str, boot: dict[str, str], resources: list[str], barrier, results) -> None:
    """One contender: imports done, then for each round wait at the barrier and acquire.

    ``boot`` lets it play another host (``tests/support/hosts.py``) in a remote store's tests.
    """
    os.chdir(cwd)
    for name in ("HOME", "XDG_STATE_HOME"):  # another host keeps its own per-user state
        if name in boot:
            os.environ[name] = boot[name]
    if "GITLEASE_TESTING_BOOT_ID" in boot:  # it counts only with the gate (tests/support/hosts.py)
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
