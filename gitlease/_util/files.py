"""File primitives, each written once: atomic replacement, lock files, flock, lock age.

Every durable file gitlease writes goes through :func:`atomic_write`, and every
caller says whether it needs the write to survive a power cut (``durable``):
receipts and bindings do not (a lost receipt only lets its claim expire), a
revision floor and a file replaced by ``replace-file`` do. The other helpers
hold ``flock`` locks (which the kernel drops when a process dies) and judge
git's ``<ref>.lock`` files by their age.

No pygit2, click or cryptography here: the commit hook's path imports it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from _thread import _local  # threading.local itself, without threading's import
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..errors import GitleaseError, StoreError
from . import TYPE_CHECKING
from . import sharing as perms

if TYPE_CHECKING:
    from typing import IO

#: A git ``<ref>.lock`` older than this, found by a caller that holds the resource's guard,
#: was left by a process that is gone (git holds a ref lock for milliseconds).
STALE_LOCK_SECONDS = 3.0
#: A lock dated further in the future than this means the clock went back: it is stale too.
_FUTURE_SLACK_SECONDS = 1.0

_HELD = _local()  # path -> descriptor of the flocks this thread holds
#: What ``link()`` answers on a file system without hard links.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS})


def atomic_write(
    path: Path,
    data: bytes,
    *,
    durable: bool,
    mode: int = 0o600,
    exclusive: bool = False,
    private: bool = False,
    content_named: bool = False,
) -> None:
    """Replace ``path`` with ``data`` through a temporary file in the same directory.

    Readers see the old content or the new, never a torn file. ``durable``: fsync
    the file before the rename and the directory after it, so the new content
    survives a power cut; otherwise a crash may leave the old content. The
    temporary file is created exclusively and never through a symlink.
    ``exclusive``: ``path`` must not exist yet (``FileExistsError`` otherwise); the
    file appears whole, by a hard link, so it is never replaced. ``private``: a file of
    this user's alone (a per-user cache) keeps ``mode`` in a store several users share,
    where the others get the store's shared mode. ``content_named``: ``path`` is named by its
    bytes (a git object), so it is written as ``exclusive`` is, but where the file system has
    no hard links (vfat, some FUSE and SMB mounts) a rename does, as git's own writer falls
    back to (it can only replace the same bytes); and the temporary file is named as git
    names its own, ``tmp_obj_*``, which ``git gc`` removes should a crash leave one. Raises
    ``OSError``; the caller says what the file was.
    """
    if content_named:
        exclusive = True
        tmp = path.with_name(f"tmp_obj_{os.urandom(6).hex()}")
    else:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.gitlease")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask may have taken bits away
            if not private:
                perms.widen_fd(fd, path, mode)  # a store several users write (sharing.py)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            try:
                os.link(tmp, path)
            except OSError as exc:
                if not content_named or exc.errno not in _NO_HARD_LINKS:
                    raise
                os.replace(tmp, path)  # (the same bytes, if it was there)
            else:
                os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    perms.widen_parents(path)
    if durable:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mtime(path: Path) -> float:
    """The modification time of ``path``, or 0.0 if it cannot be read (sorts first)."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def lock_age(lock: Path) -> float | None:
    """Seconds since git's ``lock`` file was written (negative: dated in the future), or None."""
    try:
        return time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return None


def is_stale(age: float) -> bool:
    """Whether a lock file of this age was left behind (see :data:`STALE_LOCK_SECONDS`)."""
    return age > STALE_LOCK_SECONDS or age < -_FUTURE_SLACK_SECONDS


def open_lock_file(path: Path) -> int:
    """A descriptor of a small lock file (made 0600, with its directory), or STORE."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot open {path}: {exc.strerror or exc}") from None
    if perms.is_shared(path):  # a store several users write: made with git's shared mode
        with suppress(OSError):
            if os.fstat(fd).st_uid == os.geteuid():
                perms.widen_fd(fd, path, 0o600)
        perms.widen_parents(path)
    return fd


def flock_polling(
    fd: int,
    deadline: float,
    *,
    longest_pause: float = 0.05,
    defer: Callable[[], bool] | None = None,
) -> bool:
    """Take an exclusive ``flock`` on ``fd`` before the monotonic ``deadline``; False if not.

    ``defer``: while it answers True, do not even try (a caller with priority waits for
    the lock: see :func:`gitlease.guards.hold`). ``longest_pause``: between tries."""
    delay = 0.002
    while True:
        if defer is None or not defer():
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(delay, longest_pause))
        delay = min(delay * 2, longest_pause)


def flock_taken(path: Path) -> bool:
    """Whether another process (or another thread here) holds the ``flock`` on ``path`` now.

    A probe that never blocks and never creates the file: a read that must not write
    (``free``) uses it. A file that is missing or cannot be opened is not locked.
    """
    if str(path) in _HELD.__dict__.get("fds", {}):
        return False  # this thread's own lock
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # (drops the probe's lock, if it got one)
    return False


@contextmanager
def flocked(
    path: Path,
    *,
    wait: float | None,
    busy: Callable[[], GitleaseError],
    longest_pause: float = 0.05,
    defer: Callable[[], bool] | None = None,
) -> Iterator[int]:
    """Hold an exclusive ``flock`` on the file ``path``; yields its descriptor.

    Re-entrant within a thread (a thread that holds it gets it again at no cost);
    another thread of the same process waits like any other process, since each
    thread opens its own descriptor. ``wait``: seconds to wait before ``busy()`` is
    raised (None: as long as it takes); ``longest_pause`` and ``defer``: see
    :func:`flock_polling`. Closing the descriptor drops the lock, so a killed holder
    frees it at once.
    """
    held: dict[str, int] = _HELD.__dict__.setdefault("fds", {})
    key = str(path)
    if key in held:
        yield held[key]
        return
    deadline = None if wait is None else time.monotonic() + wait
    fd = open_lock_file(path)
    try:
        while True:
            if deadline is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            elif not flock_polling(fd, deadline, longest_pause=longest_pause, defer=defer):
                raise busy()
            if still_at(fd, path):
                break
            # The file was removed while we waited (remove_unheld: a retention pass tidying
            # guards): a lock on it excludes nobody, so lock the file now at ``path``.
            os.close(fd)
            fd = open_lock_file(path)
        held[key] = fd
        yield fd
    finally:
        held.pop(key, None)
        os.close(fd)


@contextmanager
def noted(path: Path, fd: int) -> Iterator[None]:
    """Count the flock held on ``fd`` (the file at ``path``), taken by other means than
    :func:`flocked` (a receipt reservation's, which refuses rather than waits at some
    files), as one this thread holds for the block: :func:`held_fds` hands it on too."""
    held: dict[str, int] = _HELD.__dict__.setdefault("fds", {})
    key = str(path)
    if key in held:
        yield
        return
    held[key] = fd
    try:
        yield
    finally:
        held.pop(key, None)


def held_fds() -> list[int]:
    """The descriptors of the flocks this thread holds (:func:`flocked`), for a child process
    that writes under them (``git update-ref``, :mod:`gitlease.store.plumbing`): the child
    holds them too, so that they outlive this process should it be killed while the child
    still writes. (A ref lock found under the guard is then surely a dead writer's.)"""
    return sorted(_HELD.__dict__.get("fds", {}).values())


def still_at(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the file at ``path`` (not removed or replaced)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def remove_unheld(path: Path) -> bool:
    """Remove the lock file ``path`` if nobody holds its ``flock`` now; whether it did.

    Safe against every :func:`flocked` caller: the file is removed while locked here, and
    a caller that opened it before and gets the lock afterwards finds that the path no
    longer names its file (:func:`still_at`), and locks the file at the path instead. A
    lock this thread holds itself is never removed.
    """
    if str(path) in _HELD.__dict__.get("fds", {}):
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # held: it serves someone right now
        if not still_at(fd, path):
            return False
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def unnamed_file(folder: Path) -> IO[bytes]:
    """A file with no name, read and written (what a child process says on stderr, say):
    ``O_TMPFILE`` in ``folder``, without ``tempfile``, whose import costs a short process
    3.5 ms; :func:`tempfile.TemporaryFile` where ``O_TMPFILE`` is missing (the system, the
    file system) or ``folder`` cannot take it."""
    try:
        fd = os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except (AttributeError, OSError):
        import tempfile

        return tempfile.TemporaryFile()
    return os.fdopen(fd, "w+b")
