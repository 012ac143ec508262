"""A resource's kept history, read once for a whole pass (``verify``, the retention pass).

Both passes look at each resource's reflog and at the records it names: ``verify`` walks
each record chain and looks for a ref moved back below what it held; the retention pass
keeps an active claim's records and folds a removed ref's revisions into its floor. Read
one record at a time, each was a round trip to ``git cat-file`` and was read again by the
next check: 57,000 round trips for 10,000 resources of three records, two thirds of
``verify``'s time (docs/performance.md, ``verify``). Here each reflog is read once, the
records a group of reflogs names are read in one stream
(:meth:`~gitlease.gitio.catfile.BatchReader.blobs`) and parsed once, and the checks
look them up; a group's records are dropped before the next, so memory stays flat.

Nothing here trusts a record: it is parsed, never verified. The records of a chain are
history, not claims, and the current record of each ref is verified by the caller every
time, whatever was read here. An object id names exactly one blob, so what was read for an
id is what any later read of it would give.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import GitleaseError, StoreError
from ..gitio.catfile import BatchReader
from ..gitio.gitread import OID, ReflogLine, landed_ids, named_ids, parse_reflog
from ..model.record import Record, parse
from ..model.refname import PREFIX
from ..store.base import Store

#: How many resources' records are held at once (each keeps its reflog's records).
GROUP = 512


class Records:
    """Parsed records by object id, each blob read and parsed at most once while held."""

    def __init__(self, reader: BatchReader) -> None:
        self._reader = reader
        self._parsed: dict[str, Record | None] = {}

    def prefetch(self, oids: Iterable[str]) -> None:
        """Read every one of ``oids`` not held yet, in one stream."""
        wanted = [oid for oid in oids if oid not in self._parsed]
        for oid, (data, _problem) in self._reader.blobs(wanted).items():
            self._parsed[oid] = _parsed(data)

    def get(self, oid: str) -> Record | None:
        """The record stored as ``oid``; None if it is missing, not a blob, or not a record
        (a repaired predecessor), which every chain walk treats alike: the known part of
        the history ends there."""
        if oid not in self._parsed:
            data, _problem = self._reader.read(oid)
            self._parsed[oid] = _parsed(data)
        return self._parsed[oid]

    def add(self, oid: str, record: Record) -> None:
        """Hold ``record``, read already as ``oid`` (a ref's current record)."""
        self._parsed[oid] = record

    def clear(self) -> None:
        """Drop what is held (the next group of resources reads its own)."""
        self._parsed.clear()


@contextmanager
def reading(store: Store) -> Iterator[Records]:
    """Records of ``store`` through one ``git cat-file --batch`` for the whole pass."""
    reader = BatchReader(store.git_dir)
    try:
        yield Records(reader)
    finally:
        reader.close()


def _parsed(data: bytes | None) -> Record | None:
    if data is None:
        return None
    try:
        return parse(data)
    except GitleaseError:
        return None


@dataclass(frozen=True)
class Kept:
    """One resource's reflog as a pass reads it: its lines, and where its history starts."""

    lines: list[ReflogLine]
    #: The record where the kept history starts if the retention pass cut it
    #: (:meth:`Store.history_start`), else None.
    start: str | None

    @classmethod
    def read(cls, store: Store, ref: str) -> Kept:
        """The reflog of ``ref`` (none when it cannot be read: the checks then know only
        the ref and its marks, as :meth:`Store.reflog_landed` does)."""
        try:
            data = read_reflog(store, ref)
        except StoreError:
            return cls([], None)
        lines = parse_reflog(data)
        # the first line as history_start reads it (at most 512 bytes of it)
        end = data.find(b"\n", 0, 512)
        first = (lines[:1] if end > 0 else []) if end >= 0 else parse_reflog(data[:512])
        start = None
        if first and not first[0].old.strip("0") and OID.fullmatch(first[0].new):
            start = first[0].new
        return cls(lines, start)

    def named(self) -> frozenset[str]:
        """Every record id the reflog still names (both ids of each line)."""
        return named_ids(self.lines)

    def landed(self, current: str | None) -> list[str]:
        """The ids the ref pointed at, oldest first, without a line whose write never
        happened (:meth:`Store.reflog_landed`, from the lines read once)."""
        return landed_ids(self.lines, current)


def read_reflog(store: Store, ref: str) -> bytes:
    """:meth:`Store.read_reflog` in three system calls, its path made as a string (a pass
    reads every reflog)."""
    try:
        fd = os.open(os.path.join(store.git_dir, "logs", ref), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StoreError(f"cannot read the reflog of {ref}: {exc.strerror or exc}") from None
    try:
        chunks = [os.read(fd, 1 << 16)]
        while len(chunks[-1]) == 1 << 16:
            chunks.append(os.read(fd, 1 << 20))
        return b"".join(chunks)
    except OSError as exc:
        raise StoreError(f"cannot read the reflog of {ref}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Newest:
    """The highest revision this host wrote or saw for a ref, and the newest record that
    carries it (None when only a mark or a floor knows it)."""

    revision: int
    oid: str | None = None
    record: Record | None = None


def newest_written(mark: int, landed: list[str], records: Records) -> Newest:
    """:func:`gitlease.api.history.newest_written` from what a pass read once: ``mark`` (the
    higher of the high-water mark and the floor, read before the reflog: a write landing
    meanwhile can only raise what the reflog shows) and the reflog's ``landed`` ids."""
    best, newest, top = 0, "", None
    for oid in landed:  # oldest first: the last of the highest wins
        record = records.get(oid)
        if record is not None and record.revision >= best:
            best, newest, top = record.revision, oid, record
    return Newest(mark) if mark > best or top is None else Newest(best, newest, top)


def max_revision(named: Iterable[str], records: Records) -> int:
    """The highest revision of the records among ``named`` (a reflog's ids)."""
    found = (records.get(oid) for oid in named)
    return max((r.revision for r in found if r is not None), default=0)


def reflog_refs(store: Store) -> list[str]:
    """:meth:`Store.reflog_refs`, listed by ``scandir``: the kind of each entry comes with
    the listing, so a pass over a big store stats no reflog."""
    root = store.git_dir / "logs"
    found: list[str] = []
    folders = [os.path.join(root, PREFIX)]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif entry.is_file() and not entry.name.endswith(".lock"):
                found.append(os.path.relpath(entry.path, root))
    return sorted(found)
