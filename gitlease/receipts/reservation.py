"""Explicit receipt paths (``--receipt``, ``GITLEASE_RECEIPT``): checked, locked, written in place.

A path the caller names may hold anything: another store's receipt, a live
receipt of this store, a FIFO, a link, a stranger's file. It is refused unless
it is absent, an empty private file (what an acquire killed right after
creating it leaves), or a receipt of this store; and it is locked with
``flock`` from the decision to the commit, so two acquires racing for one path
meet one winner (docs/design.md, choices where the specification is silent).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from .._util.files import flock_polling, fsync_dir, noted, still_at
from ..errors import HeldError, ReceiptError, StoreError, UsageError
from .receipt import (
    MAX_RECEIPT_BYTES,
    RECEIPT_ENV,
    Receipt,
    check_directory,
    parse,
    private_dir,
    remove,
)


def explicit_path(path: str | os.PathLike[str] | None) -> Path | None:
    """``--receipt`` or ``GITLEASE_RECEIPT``, if given: absolute, its directory resolved.

    The directory's symbolic links are resolved once, here, so that the checks of
    :func:`check_directory` and every later use see the same real directory.
    """
    if path is None:
        path = os.environ.get(RECEIPT_ENV) or None
    if not path:
        return None
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("the receipt path is not valid UTF-8; choose another --receipt") from None
    absolute = Path(text).expanduser().absolute()
    if absolute.name in ("", ".", ".."):
        raise UsageError(f"receipt {absolute} names a directory, not a file")
    return absolute.parent.resolve() / absolute.name


def check_explicit_location(path: Path, store: str | None = None) -> None:
    """Refuse, before the store is touched, an explicit receipt path that must not be written.

    Its directory must pass :func:`check_directory`; the path itself must be absent
    or a spent receipt of ``store`` (a live one is judged by the caller, which knows
    the claims): see :func:`reserve`, which repeats these checks under a lock.
    """
    parent = path.parent
    if not parent.exists():
        private_dir(parent)
    try:
        check_directory(parent)
    except UsageError as exc:
        raise UsageError(f"receipt {path}: {exc.message}") from None
    if store is None:
        return
    try:
        fd = _open_existing(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        _existing_receipt(path, fd, store)
    finally:
        os.close(fd)


class Reserved:
    """An explicit receipt path held for one acquire: locked, and known to be ours to write.

    ``previous`` is the spent or live receipt of this store that was there (None:
    the file is new, or empty); ``created``: this call made the file, and removes it
    again if nothing was written to it. The caller refuses a live one (HELD); otherwise
    :meth:`write` replaces the content in place, under the lock, so a second
    acquire racing for the same path waits for this one and then finds its
    receipt, never a half-written file.
    """

    def __init__(self, path: Path, fd: int, created: bool, previous: Receipt | None) -> None:
        self.path = path
        self.fd = fd
        self.created = created
        self.previous = previous
        self.written = False

    def write(self, receipt: Receipt) -> None:
        """The acquire's first write of the receipt: in place, under the lock, mode 0600, and
        on disk before its claim is written (the file, and its folder when the file was new
        or empty), like a receipt of the worktree's own folder
        (:func:`gitlease.receipts.receipt.write`)."""
        data = receipt.to_json().encode("utf-8")
        if len(data) > MAX_RECEIPT_BYTES:
            raise UsageError(
                f"the receipt would be {len(data)} bytes; at most {MAX_RECEIPT_BYTES} can be "
                "read back: claim fewer or shorter resources at once"
            )
        try:
            os.fchmod(self.fd, 0o600)
            os.ftruncate(self.fd, 0)
            if os.pwrite(self.fd, data, 0) != len(data):
                raise OSError(errno.ENOSPC, "short write")
            os.fsync(self.fd)
            if self.previous is None:  # a new or empty file: its name may not be on disk yet
                fsync_dir(self.path.parent)
        except OSError as exc:
            raise StoreError(f"cannot write the receipt {self.path}: {exc.strerror}") from None
        self.written = True


#: How long an acquire waits for another one that holds the same explicit receipt path.
RESERVE_WAIT_SECONDS = 2.0


@contextlib.contextmanager
def reserve(path: Path | None, store: str) -> Iterator[Reserved | None]:
    """Hold the explicit receipt ``path`` for one acquire (nothing if ``path`` is None).

    Refuses at once (USAGE), without blocking and without changing anything: a
    symbolic link, a directory, a FIFO, a device or a socket; a file that is not a
    receipt of this user's; another store's receipt; a directory that fails
    :func:`check_directory`. Another acquire holding the path: HELD. A file this
    call created is removed again if nothing was written to it.
    """
    if path is None:
        yield None
        return
    private_dir(path.parent)
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(10):
        try:
            fd, created = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600), True
        except FileExistsError:
            try:
                fd, created = _open_existing(path, os.O_RDWR), False
            except FileNotFoundError:
                continue  # removed meanwhile (a failed racer's empty file): try again
        except OSError as exc:
            raise StoreError(f"cannot open the receipt {path}: {exc.strerror}") from None
        try:
            if not flock_polling(fd, time.monotonic() + RESERVE_WAIT_SECONDS):
                raise HeldError(
                    f"receipt {path} is being written by another acquire; "
                    "choose another --receipt, or try again"
                )
            if not still_at(fd, path):
                os.close(fd)
                continue  # replaced or removed while we waited for the lock
            # Judged only now, under the lock: a racer may have written it meanwhile,
            # even if this call created it.
            previous = _existing_receipt(path, fd, store)
        except BaseException:
            os.close(fd)
            raise
        break
    else:
        raise HeldError(f"receipt {path} keeps changing; another process is using it")
    reserved = Reserved(path, fd, created, previous)
    try:
        with noted(path, fd):  # (held by a git that writes the claim, should this one die)
            yield reserved
    finally:
        if reserved.created and not reserved.written and _still_empty(path, fd):
            remove(path)  # (still under the lock: nobody else writes it meanwhile)
        os.close(fd)  # drops the lock


def _open_existing(path: Path, mode: int) -> int:
    """Open an existing path only if it is a regular file, never blocking nor following a link.

    ``lstat`` first, so that a FIFO or a device is never even opened; then the
    descriptor's own ``fstat`` decides (the path may have changed in between).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"cannot inspect the receipt path {path}: {exc.strerror}") from None
    _refuse_non_file(path, st)
    try:
        fd = os.open(path, mode | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"receipt {path} cannot be opened ({exc.strerror}); refusing it") from None
    try:
        _refuse_non_file(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_non_file(path: Path, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    kind = (
        "a symbolic link" if stat.S_ISLNK(st.st_mode)
        else "a directory" if stat.S_ISDIR(st.st_mode)
        else "a FIFO" if stat.S_ISFIFO(st.st_mode)
        else "a socket" if stat.S_ISSOCK(st.st_mode)
        else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        else "not a regular file"
    )  # fmt: skip
    raise UsageError(f"receipt path {path} is {kind}, not a receipt file; refusing it")


def _existing_receipt(path: Path, fd: int, store: str) -> Receipt | None:
    """The receipt of ``store`` in the open regular file ``fd`` (None: an empty private
    file, nothing to lose); USAGE for anything else."""
    st = os.fstat(fd)
    refuse = f"receipt path {path} holds a file that is not "
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise UsageError(refuse + "a private receipt of yours; it was left untouched")
    if st.st_size == 0:
        return None  # empty and private: what an acquire killed right after creating it leaves
    try:
        raw = os.pread(fd, 1 << 20, 0)
        rec = parse(path, raw)
    except (OSError, ReceiptError):
        raise UsageError(refuse + "a gitlease receipt; it was left untouched") from None
    if rec.store != store:
        raise UsageError(
            f"receipt {path} belongs to the store {rec.store}, not {store}; it was left "
            "untouched (use one receipt path per store)"
        )
    return rec


def _still_empty(path: Path, fd: int) -> bool:
    """Whether ``path`` still names ``fd``'s file, and it is empty (nobody wrote a receipt)."""
    return still_at(fd, path) and os.fstat(fd).st_size == 0
