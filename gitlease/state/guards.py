"""The resource guard: an ``flock`` per resource around every decision about it.

A guard is a small file in ``<store>/worklease/guards/``. Every ownership
decision, and every guarded operation (``exec``, ``replace-file``) for its whole
duration, holds the resource's guard, so gitlease callers on one host decide
one at a time. The kernel drops the lock when its process dies, which is what
makes a git ``<ref>.lock`` found under the guard provably stale.

``exec`` lends its guard to the command it runs (and that command's
descendants) through ``GITLEASE_GUARD``: their own gitlease calls on the same
claim work under exec's guard instead of waiting for it, which would deadlock.
The lock itself is never inherited, so a killed exec frees the resource at once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from .._util.files import flock_taken, flocked
from .._util.files import remove_unheld as _remove_unheld
from ..errors import HeldError
from ..gitio import layout

#: Seconds a caller waits for another process's guard before the answer is HELD.
GUARD_WAIT_SECONDS = 2.0
#: exec's delegation to its command: one ``pid:guard-path`` line per enclosing exec.
GUARD_ENV = "GITLEASE_GUARD"


@lru_cache(maxsize=1024)  # (each decision names its guard several times)
def guard_path(git_dir: Path, ref: str) -> Path:
    """The guard file of ``ref`` in the store at ``git_dir``."""
    digest = layout.ref_digest(ref)
    return directory(git_dir) / digest


def directory(git_dir: Path) -> Path:
    """Where the guards of the store at ``git_dir`` live."""
    return layout.guards_dir(git_dir)


def remove_unheld(path: Path) -> bool:
    """Remove a guard file that nobody holds now; whether it did. Only the retention pass does
    this, for resources without a ref: every holder locks the file and then checks that the
    path still names it (:func:`gitlease._util.files.flocked`), so a caller that opened the file
    just before it went simply locks the new one."""
    return _remove_unheld(path)


class _Taken(HeldError):
    """The guard was taken at the first try (internal to :func:`hold`)."""


def _taken() -> HeldError:
    return _Taken("taken")


@contextmanager
def hold(
    path: Path, ref: str, *, wait: float = GUARD_WAIT_SECONDS, owned: bool = False
) -> Iterator[int]:
    """Hold the guard at ``path``, or raise HELD if another process keeps it.

    Re-entrant within a thread; free for the command of an ``exec`` that holds it
    (see the module's docstring). Yields the lock's descriptor (-1 when lent).

    ``owned``: the caller writes a claim it holds (``release``, ``heartbeat``): it must
    never fail because others contend for the resource, so it goes first. When the guard
    is taken, it locks ``<guard>.owner`` while it waits, and every caller without
    priority (an acquire) makes no try while that file is locked: the guard goes to the
    owner as soon as its holder lets go. A guard held for long (an ``exec``) still ends
    in HELD after ``wait``, with a message that says which of the two it met.
    """
    if held_by_ancestor(path):
        yield -1
        return
    owner = path.with_name(path.name + OWNER_SUFFIX)
    if owned or not flock_taken(owner):  # (an owner waiting: an acquirer does not even try)
        try:
            with flocked(path, wait=0.0, busy=_taken) as fd:  # uncontended: one try
                yield fd
                return
        except _Taken:
            pass
    started = time.monotonic()
    first = holder_pid(path)

    def busy() -> HeldError:
        return HeldError(_busy_message(ref, path, time.monotonic() - started, first))

    if not owned:
        with flocked(path, wait=wait, busy=busy, defer=lambda: flock_taken(owner)) as fd:
            yield fd
        return
    try:
        with (
            flocked(owner, wait=wait, busy=busy),
            flocked(path, wait=max(0.0, started + wait - time.monotonic()), busy=busy,
                    longest_pause=0.002) as fd,
        ):  # fmt: skip
            yield fd
    finally:
        _remove_unheld(owner)


#: The file an owned write locks while it waits for the guard (see :func:`hold`).
OWNER_SUFFIX = ".owner"


def _busy_message(ref: str, path: Path, waited: float, first: int | None) -> str:
    """HELD's message: what kept the guard, as far as the kernel's lock table tells."""
    last = holder_pid(path)
    if first is None and last is None:  # (the kernel's lock table does not say)
        return (
            f"the guard of {ref} stayed taken for {waited:.1f}s by other gitlease processes "
            "(callers contending for it, or a running exec or replace-file on it); try again "
            "later, or wait in line with --wait"
        )
    if first is not None and first == last:
        return (
            f"the guard of {ref} was held by process {last} for all of {waited:.1f}s "
            "(a running exec or replace-file on it, or a gitlease process that is stuck); "
            "try again later"
        )
    return (
        f"the guard of {ref} stayed busy for {waited:.1f}s: other gitlease callers kept "
        "deciding about it one after another (contention); try again, or wait in line "
        "with --wait"
    )


def holder_pid(path: Path) -> int | None:
    """The process that holds the ``flock`` on ``path`` now, from ``/proc/locks`` (None if
    nobody, or if this system does not say)."""
    try:
        st = os.stat(path)
        with open("/proc/locks", "rb") as f:
            table = f.read()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}".encode()
    for line in table.split(b"\n"):
        fields = line.split()
        if (
            len(fields) >= 6
            and fields[1] == b"FLOCK"
            and fields[5] == wanted
            and fields[4].isdigit()
        ):
            return int(fields[4])
    return None


def busy(path: Path) -> bool:
    """Whether another process holds the guard at ``path`` now (an ``exec`` or a
    ``replace-file`` running on the resource, or a decision being made): a caller would
    wait for it and then be told HELD. A guard lent to this process is not busy for it:
    its own calls work under it (see the module's docstring)."""
    return flock_taken(path) and not held_by_ancestor(path)


def contended(path: Path) -> bool:
    """Whether an acquirer would have to wait for the guard at ``path`` now: another process
    holds it, or an owned write waits for it (and goes first: :func:`hold`). A probe: it
    creates nothing and keeps nothing (it tries the lock and lets go at once, so a caller's
    single try at that instant may find it busy and wait its turn), and it may be out of date
    as soon as it answers."""
    return busy(path) or flock_taken(path.with_name(path.name + OWNER_SUFFIX))


def delegation(path: Path) -> str:
    """``GITLEASE_GUARD`` for this process's descendants: its guard on top of any inherited."""
    inherited = [e for e in os.environ.get(GUARD_ENV, "").split("\n") if e]
    return "\n".join([*inherited, f"{os.getpid()}:{path}"])


def held_by_ancestor(path: Path) -> bool:
    """Whether a live ancestor of this process (an ``exec``) lends us the guard at ``path``."""
    for entry in os.environ.get(GUARD_ENV, "").split("\n"):
        pid, _, held = entry.partition(":")
        if held == str(path) and pid.isdigit() and int(pid) > 1 and _is_ancestor(int(pid)):
            return True
    return False


def _is_ancestor(pid: int) -> bool:
    """Whether ``pid`` is an ancestor of this process (read from /proc on Linux)."""
    current = os.getppid()
    for _ in range(128):
        if current == pid:
            return True
        if current <= 1:
            return False
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
            current = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False
