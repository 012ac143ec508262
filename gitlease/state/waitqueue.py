"""The queue of callers waiting for resources on this host: who is first in line.

``acquire --wait`` used to retry with backoff alone, and the caller that had
just released a resource nearly always took it back before a sleeping waiter
looked again (docs/design.md, "Fair waiting"). Waiting callers now stand in one
queue per store: a *ticket* each, in ``<store>/worklease/waiters/``, naming the
refs the caller waits for. A caller may try a resource only when no live ticket
ahead of its own names it; a caller that does not wait has no ticket, so every
live ticket is ahead of it. The queue only decides who *tries*: the grant is
still the compare-and-swap under the guard, so nothing here can make two holders.

A ticket is a file whose owner holds an ``flock`` on it for as long as it waits
(the kernel drops the lock when the owner dies, so a killed waiter's ticket is
seen as dead at once and removed by whoever looks), and touches it at every
look (so a stopped or hung waiter, alive but silent for :data:`STALE_SECONDS`,
is passed over until it looks again). Tickets take their numbers under one lock
file, so everyone sees the same order; a new ticket is written under a
temporary name and renamed into place with its lock already held.

The queue lives in this host's store directory: with a remote store, waiters
are queued among this host's callers only.

No pygit2, click or cryptography here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from .._util.files import flocked, open_lock_file
from ..errors import GitleaseError, StoreError
from ..gitio import layout

#: A ticket not touched for this long belongs to a stopped or hung waiter: passed over.
STALE_SECONDS = 3.0
#: How long a caller waits for the queue's numbering lock before it waits unqueued.
JOIN_WAIT_SECONDS = 2.0
#: Temporary files of a join killed half-way are removed once this old.
_TMP_STALE_SECONDS = 10.0
_MAGIC = "gitlease-waiter v1"


def queue_dir(git_dir: Path) -> Path:
    """The waiters' directory of the store at ``git_dir``."""
    return layout.waiters_dir(git_dir)


class Ticket:
    """This caller's place in the queue: held (locked) until :meth:`leave`."""

    def __init__(self, path: Path, seq: int, fd: int, refs: tuple[str, ...] = ()) -> None:
        self.path = path
        self.seq = seq
        self.fd = fd
        #: The refs the ticket names now.
        self.refs = refs

    def replace_body(self, body: bytes, refs: tuple[str, ...]) -> None:
        """Name other refs, keeping the ticket's place: a new file, locked before it takes
        the ticket's name (as at the join), then the old one let go. A reader sees the old
        file (still locked) or the new one (locked): never a dead-looking ticket."""
        tmp = self.path.with_name(f".{self.path.name}-{os.urandom(4).hex()}.tmp")
        fd = _locked_file(tmp, body, self.path)
        old, self.fd, self.refs = self.fd, fd, refs
        with contextlib.suppress(OSError):
            os.close(old)

    def touch(self) -> None:
        """Show that this waiter is still looking (see :data:`STALE_SECONDS`)."""
        with contextlib.suppress(OSError):
            os.utime(self.fd)

    def leave(self) -> None:
        """Take the ticket out of the queue (the name first, then the lock)."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Line:
    """What one caller sees of the queue for the refs it wants.

    Without a ticket (a caller that does not wait) every live waiter is ahead of
    it; with one (:meth:`joined`), only the waiters that joined before it.
    """

    def __init__(self, git_dir: Path, refs: Iterable[str]) -> None:
        self.directory = queue_dir(git_dir)
        self.refs = tuple(refs)
        self.ticket: Ticket | None = None
        self._wanted = frozenset(self.refs)
        self._names: dict[tuple[str, int], frozenset[str]] = {}  # (ticket name, inode) -> refs

    def ahead(self) -> dict[str, int]:
        """For each of this caller's refs that live waiters ahead of it want: how many."""
        counts: dict[str, int] = {}
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return counts
        except OSError as exc:
            raise StoreError(f"cannot read {self.directory}: {exc.strerror or exc}") from None
        mine = self.ticket.seq if self.ticket is not None else None
        for name in names:
            if name.startswith("."):
                self._clear_temporary(name)
                continue
            seq = _seq(name)
            if seq is None or (mine is not None and seq >= mine):
                continue
            for ref in self._live_refs(name) & self._wanted:
                counts[ref] = counts.get(ref, 0) + 1
        return counts

    @contextlib.contextmanager
    def joined(self) -> Iterator[None]:
        """Stand in the queue meanwhile (or wait unqueued if the queue cannot be joined)."""
        try:
            self.ticket = self._join()
        except GitleaseError:
            self.ticket = None  # a hung joiner holds the numbering lock: wait unqueued
        try:
            yield
        finally:
            if self.ticket is not None:
                self.ticket.leave()
                self.ticket = None

    def touch(self) -> None:
        """Show that this caller is still waiting: its ticket's time is renewed."""
        if self.ticket is not None:
            self.ticket.touch()

    def stand_for(self, refs: Iterable[str]) -> None:
        """Let this caller's ticket name only ``refs``, those that refused its last try.

        A bundle waiter needs every member at once: while one member is held by someone
        else, its ticket must not make the free members untakeable for others (a free
        resource is never held hostage by a wait). It stands in line for what blocks it,
        and for everything again once nothing does. The ticket keeps its place
        (:meth:`Ticket.replace_body`); best effort: a failure leaves the ticket as it was.
        """
        wanted = tuple(r for r in self.refs if r in set(refs)) or self.refs
        if self.ticket is None or wanted == self.ticket.refs:
            return
        with contextlib.suppress(OSError):
            self.ticket.replace_body(_body(wanted), wanted)

    # ------------------------------------------------------------------ internals

    def _join(self) -> Ticket:
        directory = self.directory
        lock = directory.parent / "waiters.lock"

        def busy() -> StoreError:
            return StoreError(f"{lock} stayed locked")

        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {directory}: {exc.strerror or exc}") from None
        body = _body(self.refs)
        with flocked(lock, wait=JOIN_WAIT_SECONDS, busy=busy):
            seqs = [s for s in (_seq(n) for n in os.listdir(directory)) if s is not None]
            seq = max(seqs, default=0) + 1
            name = f"w-{seq:016d}-{os.getpid()}"
            tmp = directory / f".{name}-{os.urandom(4).hex()}.tmp"
            try:
                fd = _locked_file(tmp, body, directory / name)
            except OSError as exc:
                raise StoreError(f"cannot join the queue in {directory}: {exc}") from None
        return Ticket(directory / name, seq, fd, self.refs)

    def _live_refs(self, name: str) -> frozenset[str]:
        """The refs a waiter's ticket names, if the waiter is alive and looking; else none.

        A ticket whose lock can be taken was left by a dead waiter: it is removed.
        """
        path = self.directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return frozenset()  # gone meanwhile (its waiter was granted or gave up)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return frozenset()
            else:
                _remove_if_same(path, fd)  # nobody holds it: its waiter died
                return frozenset()
            info = os.fstat(fd)
            if time.time() - info.st_mtime > STALE_SECONDS:
                return frozenset()  # alive but not looking (stopped, hung): passed over
            key = (name, info.st_ino)
            refs = self._names.get(key)
            if refs is None:
                refs = _read_refs(fd)
                self._names[key] = refs
            return refs
        finally:
            os.close(fd)

    def _clear_temporary(self, name: str) -> None:
        """A temporary ticket left by a join that was killed half-way (never a live one)."""
        path = self.directory / name
        try:
            if time.time() - path.stat().st_mtime < _TMP_STALE_SECONDS:
                return
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return
        _remove_if_same(path, fd)
        os.close(fd)


def _body(refs: Iterable[str]) -> bytes:
    return (_MAGIC + "\n" + "".join(ref + "\n" for ref in refs)).encode("utf-8")


def _locked_file(tmp: Path, body: bytes, target: Path) -> int:
    """Write ``body`` to ``tmp`` under an exclusive lock taken before anyone can see it,
    then rename it to ``target``; its fd."""
    fd = open_lock_file(tmp)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # ours before anyone can see the name
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        os.rename(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        os.close(fd)
        raise
    return fd


def _seq(name: str) -> int | None:
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "w" and parts[1].isdigit() and parts[1].isascii():
        return int(parts[1])
    return None


def _read_refs(fd: int) -> frozenset[str]:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    lines = b"".join(chunks).decode("utf-8", "replace").split("\n")
    if not lines or lines[0] != _MAGIC:
        return frozenset()
    return frozenset(line for line in lines[1:] if line)


def _remove_if_same(path: Path, fd: int) -> None:
    """Unlink ``path`` if it is still the file open at ``fd``."""
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == os.fstat(fd).st_ino:
            os.unlink(path)


def waiting_for(git_dir: Path, refs: Iterable[str]) -> dict[str, int]:
    """For each ref: how many live callers on this host wait for it (``free`` uses it)."""
    return Line(git_dir, refs).ahead()
