"""Keeping claims alive in tests: a claim and its keeper, what the registry lists, a lapse.

Shared by tests/keepalive/test_keepalive.py and tests/keepalive/test_keeper.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import clock_ahead, store_path, wait_for

from gitlease._util import procs as _procs

#: Renewed every 5 s. At load 30 a keepalive took over 6 s to start, or to renew: a claim of
#: 6 s lapsed while kept (tests wait on a renewal, or see a lapse on a moved clock, not on this).
TTL = 15.0


def alive(pid: int) -> bool:
    """Running, not a zombie (an ended keepalive is reaped by init, maybe not at once)."""
    proc = _procs.inspect(pid)
    return proc is not None and proc.alive


def registered(repo: Path) -> list[dict]:
    path = store_path(repo) / "worklease" / "keepalive.json"
    try:
        return json.loads(path.read_text())["keepers"]
    except (OSError, ValueError):
        return []


def show(cli, resource: str) -> dict:
    result = cli("show", resource, "--json")
    assert result.code == 0, result
    return result.json


def gone(pid: int) -> None:
    """Wait for the keepalive ``pid`` to end (an event, however loaded the machine)."""
    wait_for(lambda: not alive(pid), what=f"the keepalive {pid} to end")


def assert_lapses(cli, resource: str, keeper: int) -> dict:
    """The keepalive ``keeper`` ends (waited for) and leaves the claim to lapse: nothing
    renews it after, and a TTL later (that clock moved on: ``clock_ahead``) it is expired,
    renewed last when it ended. The document shown then."""
    gone(keeper)
    return lapses(cli, resource)


def lapses(cli, resource: str) -> dict:
    """The claim, no longer kept (whatever kept it has stopped: the caller waited for that),
    is renewed no more: a TTL later (that clock moved on: ``clock_ahead``) it is expired,
    renewed last when its keeping ended. The document shown then."""
    now = show(cli, resource)
    then = cli("show", resource, "--json", env=clock_ahead(TTL + 1))
    assert then.code == 0, then
    doc = then.json
    assert doc["state"] == "expired" and doc["renewed_at"] == now["renewed_at"], (now, doc)
    assert doc["claim_id"] == now["claim_id"]
    return doc


def keep(cli, resource: str, pid: int, *more: str, ttl: float = TTL):
    """A claim of ``ttl`` and a keepalive on it. On a loaded machine the ``keepalive`` command
    can start after the short claim already ran out (LOST): only then, a fresh claim again."""
    for _ in range(20):
        started = time.monotonic()
        got = cli("acquire", resource, "--ttl", f"{ttl:g}s", "--json")
        assert got.code == 0, got
        kept = cli("keepalive", resource, "--while-pid", str(pid), "--json", *more)
        if kept.code == 4 and time.monotonic() - started >= ttl:
            continue  # it lapsed before the keepalive began: the machine, not the keepalive
        assert kept.code == 0, kept
        return got.json, kept.json
    raise AssertionError(f"no keepalive began within a {ttl:g} s TTL in 20 tries")


def kill_strays(repo: Path) -> None:
    """Kill every keepalive process the store's registry still names (with its start time,
    so a reused pid is left alone): one a test leaves watching pytest would live on."""
    import os
    import signal

    for entry in registered(repo):
        proc = _procs.inspect(entry["pid"])
        if proc is not None and proc.start == entry["start"]:
            os.kill(entry["pid"], signal.SIGKILL)
