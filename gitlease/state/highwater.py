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

``prune``'s revision floors are a separate thing (a removed ref's last revision);
an absent ref continues from the higher of its floor and its mark. ``prune`` folds
the mark into the floor when it removes a ref, then drops the mark, and never
removes a tombstone that is below its mark (it may hide a live claim).

No pygit2, click or cryptography here.
"""

from __future__ import annotations

import hashlib
from contextlib import suppress
from pathlib import Path

from .._util.files import atomic_write

_DIR = ("worklease", "highwater")


def mark_path(git_dir: Path, ref: str) -> Path:
    """The mark file of ``ref`` in the store at ``git_dir``."""
    digest = hashlib.sha256(ref.encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return git_dir.joinpath(*_DIR, digest)


def read(git_dir: Path, ref: str) -> int:
    """The mark of ``ref``: the highest revision written or seen here (0 if none)."""
    return _parse(mark_path(git_dir, ref), ref)


def raise_to(git_dir: Path, ref: str, revision: int) -> None:
    """Raise the mark of ``ref`` to ``revision`` if it is lower (never lowers it).

    Best effort: a mark that cannot be written (a full disk) weakens the rollback
    check, and must not turn a write that landed into a failure.
    """
    if revision <= read(git_dir, ref):
        return
    path = mark_path(git_dir, ref)
    with suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, f"{revision} {ref}\n".encode("utf-8", "surrogateescape"), durable=False)


def forget(git_dir: Path, ref: str) -> None:
    """Drop the mark of a ref that was removed once its floor holds at least the mark
    (``prune``): an absent ref continues above its floor, so the mark adds nothing."""
    with suppress(OSError):
        mark_path(git_dir, ref).unlink()


def _parse(path: Path, ref: str) -> int:
    """The revision in a mark file, if it is this ref's and well formed (else 0: a mark
    that cannot be read is no mark, so it can never refuse a healthy ref)."""
    try:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return 0
    revision, _, named = text.strip().partition(" ")
    if named != ref or not (revision.isascii() and revision.isdigit() and len(revision) <= 19):
        return 0
    return int(revision)
