"""High-water marks: the highest revision this host has written or seen, per resource.

Revisions must never repeat, and a ref moved back to an older record (a restored
backup, a hand-run ``git update-ref``) would otherwise let a second caller acquire
with a revision already used, while the first still holds. So every write that gives
a resource a new revision (acquire, ``verify --repair``) raises the resource's mark,
and so does every decision that reads a higher revision than the mark (a record
another host wrote, seen through a remote). A ref whose record is below its mark
was moved back: ``acquire`` refuses it (STORE) and ``verify`` reports it until
``verify --repair`` writes a tombstone above the mark (docs/reference/store.md).

One small file per resource, ``<store>/worklease/highwater/<hash>``, holding
``<revision> <ref>``. Marks only ever rise, and are written *after* the
compare-and-swap, never before: a crash in between leaves a mark behind its ref
(the reflog still shows the revision to ``verify``), never ahead of it, which would
refuse a healthy ref. A mark is therefore never above a revision that landed, and
a mark that cannot be written only weakens the check (it never fails a write).

A mark is raised on every acquire, so its write is the cheapest one that keeps it
exact (docs/performance.md, figure 1): overwritten in place under an ``flock`` of the
file itself, not replaced through a temporary file and a rename (three directory
operations an acquire). Why that is safe:

* readers take the shared lock and writers the exclusive one, so nobody reads a half
  written mark, and two raisers (one under the guard, one refusing early without it)
  compare and write in turn, so a lower value can never overwrite a higher one;
* a mark only rises, so its text never gets shorter: an overwrite leaves no tail of
  the old one (and a longer file is cut to size all the same);
* the write is ``fdatasync``'d before the acquire returns (docs/reference/store.md,
  durability): after a power cut the mark holds what the last acquire wrote, one
  sector, the old text or the new;
* a file removed meanwhile (``prune``'s :func:`forget`) is noticed under the lock
  and the mark written to the file at the path again.

``prune``'s revision floors are a separate thing (a removed ref's last revision);
an absent ref continues from the higher of its floor and its mark. ``prune`` folds
the mark into the floor when it removes a ref, then drops the mark, and never
removes a tombstone that is below its mark (it may hide a live claim).

No pygit2, click or cryptography here.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import suppress
from functools import lru_cache
from pathlib import Path

from .._util import sharing as perms
from .._util.files import fsync_dir, still_at
from ..gitio import layout

_READ = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
_WRITE = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


@lru_cache(maxsize=1024)  # (an acquire reads, then raises, the same mark)
def mark_path(git_dir: Path, ref: str) -> Path:
    """The mark file of ``ref`` in the store at ``git_dir``."""
    digest = layout.ref_digest(ref)
    return layout.highwater_dir(git_dir) / digest


def read(git_dir: Path, ref: str) -> int:
    """The mark of ``ref``: the highest revision written or seen here (0 if none)."""
    try:
        fd = os.open(mark_path(git_dir, ref), _READ)
    except OSError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _parse(os.pread(fd, 4096, 0), ref)
    except OSError:
        return 0
    finally:
        os.close(fd)


def read_every(git_dir: Path) -> dict[str, int]:
    """Every mark of the store, by ref: :func:`read` of each ref that has one, in one
    listing (a pass over every resource, ``verify``, reads them all). A file whose name is
    not its ref's digest is no mark, as :func:`read` would never open it."""
    folder = layout.highwater_dir(git_dir)
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    marks: dict[str, int] = {}
    for name in names:
        try:
            fd = os.open(os.path.join(folder, name), _READ)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            data = os.pread(fd, 4096, 0)
        except OSError:
            continue
        finally:
            os.close(fd)
        ref = data.decode("utf-8", "surrogateescape").strip().partition(" ")[2]
        revision = _parse(data, ref)
        if revision and layout.ref_digest(ref) == name:
            marks[ref] = revision
    return marks


def raise_to(git_dir: Path, ref: str, revision: int, *, durable: bool = True) -> None:
    """Raise the mark of ``ref`` to ``revision`` if it is lower (never lowers it).

    Best effort: a mark that cannot be written (a full disk) weakens the rollback
    check, and must not turn a write that landed into a failure. ``durable``: synced
    to disk before this returns (see the module's doc).
    """
    path = mark_path(git_dir, ref)
    with suppress(OSError):
        for _ in range(3):
            try:
                fd = os.open(path, _WRITE, 0o600)
            except FileNotFoundError:
                path.parent.mkdir(parents=True, exist_ok=True)
                perms.widen_parents(path)  # a store several users write (core.sharedRepository)
                fd = os.open(path, _WRITE, 0o600)
            try:
                perms.widen_fd(fd, path, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not still_at(fd, path):
                    continue  # removed (forget) while we waited: write the file at the path
                old = os.pread(fd, 4096, 0)
                if revision <= _parse(old, ref):
                    return
                data = f"{revision} {ref}\n".encode("utf-8", "surrogateescape")
                os.pwrite(fd, data, 0)
                if len(old) > len(data):  # (a mark of another ref in the file: not ours)
                    os.ftruncate(fd, len(data))
                if durable:
                    os.fdatasync(fd)
                    if not old:  # a new file: its name, too
                        fsync_dir(path.parent)
                return
            finally:
                os.close(fd)


def forget(git_dir: Path, ref: str) -> None:
    """Drop the mark of a ref that was removed once its floor holds at least the mark
    (``prune``): an absent ref continues above its floor, so the mark adds nothing."""
    with suppress(OSError):
        mark_path(git_dir, ref).unlink()


def _parse(data: bytes, ref: str) -> int:
    """The revision in a mark file's bytes, if it is this ref's and well formed (else 0: a
    mark that cannot be read is no mark, so it can never refuse a healthy ref)."""
    text = data.decode("utf-8", "surrogateescape")
    revision, _, named = text.strip().partition(" ")
    if named != ref or not (revision.isascii() and revision.isdigit() and len(revision) <= 19):
        return 0
    return int(revision)
