"""A write of one's own claim never fails because others contend for the resource, and HELD
says what it met: a long hold (naming the process) or contention.

Contenders are real processes calling the library in a loop; the test waits on their
progress (a count of their tries on disk), never on a time margin."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import store_path

_HAMMER = """
import os, sys
from pathlib import Path
from gitlease.api import lease
from gitlease.errors import GitleaseError
from gitlease.store.location import open_store
repo, resource, tries, stop = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
os.chdir(repo)
store = open_store()
receipt = f"{repo}/../c-{os.getpid()}/r.json"
os.makedirs(os.path.dirname(receipt), mode=0o700, exist_ok=True)
n = 0
while not stop.exists():
    try:
        lease.acquire(store, resource, ttl="1m", bind=False, receipt=receipt)
        lease.release(store, resource, receipt=receipt)
    except GitleaseError:
        pass
    n += 1
    tries.write_text(str(n))
"""


def _wait_for(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 120  # a hang, not a margin: the events come far sooner
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_an_owned_release_never_fails_under_contention(cli, repo: Path, tmp_path: Path) -> None:
    resource = "hot/1"
    stop = tmp_path / "stop"
    counts = [tmp_path / f"tries-{i}" for i in range(12)]
    procs = [
        subprocess.Popen([sys.executable, "-c", _HAMMER, str(repo), resource, str(c), str(stop)])
        for c in counts
    ]
    try:
        _wait_for(lambda: all(c.exists() for c in counts), "every contender to try")
        for round_ in range(4):
            while (got := cli("acquire", resource, "--wait", "2m", "--no-bind")).code != 0:
                assert got.code == 3, got
            # others hammer the guard while we hold: our release must go through
            started = sum(int(c.read_text() or 0) for c in counts)
            _wait_for(
                lambda s=started: sum(int(c.read_text() or 0) for c in counts) > s + 12,
                "the contenders to keep trying",
            )
            released = cli("release", resource, "--json")
            assert released.code == 0, (round_, released)
    finally:
        stop.touch()
        for p in procs:
            p.wait(timeout=120)


def test_held_names_a_long_holder_of_the_guard(cli, repo: Path) -> None:
    assert cli("acquire", "warm/0").code == 0  # makes the store
    from gitlease.state import guards

    path = guards.guard_path(store_path(repo), "refs/worklease/long/1.lease")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        got = cli("acquire", "long/1", "--json")
    finally:
        os.close(fd)
    assert got.code == 3, got
    message = got.json["error"]["message"]
    if Path("/proc/locks").exists():  # the kernel names the holder: this test's process
        assert f"held by process {os.getpid()} for all of" in message, message
    else:
        assert "exec or replace-file" in message, message
    assert cli("acquire", "long/1").code == 0
