"""A write of one's own claim never fails because others contend for the resource, and HELD
says what it met: a long hold (naming the process) or contention.

The test process plays a caller deciding: it holds the resource's guard while an acquirer (a
real process, the library's guard call) and then a real ``release`` or ``heartbeat`` queue
behind it; when it lets go, the owned write must go first. Each step waits on an event the
kernel shows (a lock file open in ``/proc/PID/fd``, a lock in ``/proc/locks``), never on a time
margin, and nothing hammers: who goes first is decided once, and shown exactly.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import store_git, store_path, wait_for

from gitlease.state import guards

pytestmark = pytest.mark.skipif(
    not Path("/proc/locks").exists(), reason="the waits read /proc/PID/fd and /proc/locks (Linux)"
)


def _ref(resource: str) -> str:
    return f"refs/worklease/{resource}.lease"


def _guard(repo: Path, resource: str) -> tuple[Path, Path]:
    """The guard file of ``resource`` and the file an owned write locks while it waits."""
    path = guards.guard_path(store_path(repo), _ref(resource))
    path.parent.mkdir(parents=True, exist_ok=True)
    return path, path.with_name(path.name + guards.OWNER_SUFFIX)


def _hold(path: Path) -> int:
    """Take the guard at ``path`` in this process (as a caller deciding about the resource)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _polls(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has the lock file ``path`` open for locking (read-write, as
    every caller that waits for the guard has it; a probe of the guard opens it read-only)."""
    wanted = os.path.realpath(path)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != wanted:
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        flags = next(int(line.split()[1], 8) for line in info.splitlines() if line[:6] == "flags:")
        if flags & os.O_ACCMODE == os.O_RDWR:
            return True
    return False


#: An acquirer at the guard: what every acquire does once its look at the store found the
#: resource free (the look is made without the guard, so under contention many callers reach
#: the guard with a look that is already out of date). Once it holds the guard it writes what
#: the claim's ref is then.
_ACQUIRER = """
import subprocess, sys
from pathlib import Path
from gitlease.errors import HeldError
from gitlease.state import guards
path, ref, store, seen = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
while True:
    try:
        with guards.hold(path, ref):
            got = subprocess.run(["git", "--git-dir=" + store, "rev-parse", ref],
                                 capture_output=True, text=True, check=True)
            seen.write_text(got.stdout)
            break
    except HeldError:  # (the queue ahead took longer than an acquirer waits: try again)
        pass
"""


def _gitlease(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gitlease", *args],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("write", ["release", "heartbeat"])
def test_an_owned_write_goes_before_contenders_at_the_guard(
    cli, repo: Path, tmp_path: Path, write: str
) -> None:
    """Before the fix, a release or heartbeat that met the guard taken polled for it like any
    acquirer and, under contention, lost every poll for 2 s and failed with HELD. Now it
    queues first (it locks ``<guard>.owner``) and every acquirer lets it go first."""
    resource = "hot/1"
    assert cli("acquire", resource, "--no-bind").code == 0
    path, owner = _guard(repo, resource)
    before = store_git("rev-parse", _ref(resource), cwd=repo).stdout
    seen = tmp_path / "seen"
    writer: subprocess.Popen[str] | None = None
    fd = _hold(path)  # a caller deciding about the resource
    # and an acquirer waits for the guard behind it
    acquirer = subprocess.Popen(
        [sys.executable, "-c", _ACQUIRER, str(path), _ref(resource), str(store_path(repo)),
         str(seen)]
    )  # fmt: skip
    try:
        try:
            wait_for(
                lambda: _polls(acquirer.pid, path), what="the acquirer at the guard", timeout=120
            )
            writer = _gitlease(write, resource, "--json", cwd=repo)
            wait_for(
                lambda: guards.holder_pid(owner) == writer.pid or writer.poll() is not None,
                what=f"the {write} to queue at the guard",
                timeout=120,
            )
            assert writer.poll() is None, (
                f"the {write} gave up behind one caller deciding: {writer.communicate()}"
            )
        finally:
            os.close(fd)
        assert acquirer.wait(timeout=120) == 0
        assert seen.read_text() != before, (
            f"the acquirer took the guard before the {write} that waited for it"
        )
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, (out, err)
    finally:
        for proc in (acquirer, writer):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()


_OWNED_WRITE = """
import sys, time
from pathlib import Path
from gitlease.state import guards
path, ref, stop = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
with guards.hold(path, ref, owned=True, wait=600):
    while not stop.exists():
        time.sleep(0.02)
"""


def test_held_names_contention(cli, repo: Path, tmp_path: Path) -> None:
    """An acquirer whose guard went from one caller to another while it waited is told that
    callers contended, not that one process held it (the long holder: the test below)."""
    assert cli("acquire", "warm/0").code == 0  # makes the store
    resource = "busy/1"
    path, owner = _guard(repo, resource)
    stop = tmp_path / "stop"
    fd = _hold(path)  # a caller deciding
    # an owned write queues behind it: acquirers now wait for both
    owned = subprocess.Popen(
        [sys.executable, "-c", _OWNED_WRITE, str(path), _ref(resource), str(stop)]
    )
    acquirer: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: guards.holder_pid(owner) == owned.pid, what="the owned write to queue")
        acquirer = _gitlease("acquire", resource, "--json", cwd=repo)
        # it noted who holds the guard (this process), and waits: stop it there
        wait_for(lambda: _polls(acquirer.pid, path), what="the acquirer at the guard", timeout=120)
        os.kill(acquirer.pid, signal.SIGSTOP)
        os.close(fd)
        fd = -1
        wait_for(lambda: guards.holder_pid(path) == owned.pid, what="the owned write's turn")
        os.kill(acquirer.pid, signal.SIGCONT)
        out, err = acquirer.communicate(timeout=120)
    finally:
        if fd >= 0:
            os.close(fd)
        stop.touch()
        owned.wait(timeout=120)
        if acquirer is not None and acquirer.poll() is None:
            os.kill(acquirer.pid, signal.SIGCONT)
            acquirer.kill()
            acquirer.communicate()
    assert acquirer.returncode == 3, (out, err)
    import json

    message = json.loads(out)["error"]["message"]
    assert "one after another (contention)" in message, message
    assert cli("acquire", resource).code == 0


def _refused_while_the_guard_is_held(cli, repo: Path, resource: str) -> str:
    """HELD's message for an acquire of ``resource`` while this test holds its guard."""
    path, _ = _guard(repo, resource)
    fd = _hold(path)
    try:
        got = cli("acquire", resource, "--json")
    finally:
        os.close(fd)
    assert got.code == 3, got
    return str(got.json["error"]["message"])


def test_held_names_a_long_holder_of_the_guard(cli, repo: Path) -> None:
    assert cli("acquire", "warm/0").code == 0  # makes the store
    message = _refused_while_the_guard_is_held(cli, repo, "long/1")
    # the kernel names the holder: this test's process
    assert f"held by process {os.getpid()} for all of" in message, message
    assert cli("acquire", "long/1").code == 0


def test_a_held_resource_whose_guard_is_taken_is_refused_from_a_look_without_it(
    cli, repo: Path
) -> None:
    """An acquire that finds the guard taken looks at the store without it first: a claim
    that is held answers HELD naming its holder at once, not after the guard's wait."""
    assert cli("acquire", "busy/1", "--owner", "first").code == 0
    message = _refused_while_the_guard_is_held(cli, repo, "busy/1")
    assert "first" in message and "guard" not in message, message


def test_an_uncontended_acquire_reads_its_resource_once(store, monkeypatch) -> None:
    """Nobody else deciding about the resource: the look under its guard is the only one
    (a second, unguarded look would only refuse sooner what the guarded one refuses)."""
    import gitlease

    reads: list[str] = []
    read = store.read
    monkeypatch.setattr(store, "read", lambda ref: reads.append(ref) or read(ref))
    gitlease.acquire(store, "once/1", ttl="5m", bind=False)
    assert reads == ["refs/worklease/once/1.lease"], reads
