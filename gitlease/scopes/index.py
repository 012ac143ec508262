"""The store's index of path scopes: the document, where it is kept, reading and rebuilding it
(docs/performance.md).

Every claim acquired with path scopes is noted in one small JSON document (one entry a
claim, naming its ref, claim id, resource and patterns):

* in a store on this host, the file ``<store>/worklease/scopes/index``;
* in a store coordinated through a git remote, the ref
  :data:`~gitlease.model.refname.SCOPES_INDEX_REF` (``refs/worklease/@scopes``), whose new
  value rides on the claim's own atomic push. Each entry there also names its claim's
  revision, so that a mirror that is behind is told apart from a claim that is gone.

This module is what the commit check reads (through :mod:`gitlease.scopes.lookup`), so it
holds only the index as a document; what an acquire decides from it, under the store-wide
scope guard, is :mod:`gitlease.scopes.acquiring`.

The index always holds every live scoped claim (a superset: entries of claims that were
released, expired, or never landed stay until the next compaction). It is a hint, never
the truth: every entry that matters is judged from its ref's current record (parsed,
verified, active, and that record's own patterns).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .._util import TYPE_CHECKING
from .._util.value import Value
from ..errors import CorruptRecordError
from ..gitio import layout
from ..gitio.gitread import Snapshot
from ..model.claim import is_expired
from ..model.clock import Now
from ..model.record import MAX_INT, Record, parse
from ..model.refname import LEAF_SUFFIX, PREFIX, SCOPES_INDEX_REF
from ..model.sightings import Sightings
from ..store.base import Store
from .wildmatch import MAX_PATTERN_CHARS

if TYPE_CHECKING:
    from typing import Any, ClassVar


VERSION = 1


class Entry(Value):
    """One scoped claim as the index notes it (a hint: judged from its ref when it matters)."""

    __slots__ = ("ref", "claim_id", "resource", "paths", "revision")
    _defaults: ClassVar[dict[str, Any]] = {"revision": None}
    ref: str
    claim_id: str
    resource: str
    paths: tuple[str, ...]
    #: The claim's revision, in a remote store's index (None in a local one): a mirror whose
    #: ref shows a lower one is behind the index, and a higher one means the claim is gone.
    revision: int | None


class Index(Value):
    """The index as read: its entries, and how many were live at the last compaction."""

    __slots__ = ("entries", "live", "oid", "mirrored")
    _defaults: ClassVar[dict[str, Any]] = {"oid": None, "mirrored": False}
    entries: list[Entry]
    live: int
    #: A remote store's: the object id its index ref held when read (None: absent), which
    #: the push that replaces it leases.
    oid: str | None
    #: Read from a remote store's mirror: other hosts' records, timed by this host's
    #: sightings (:func:`sighted`).
    mirrored: bool


def index_path(git_dir: Path) -> Path:
    """The index file of the store at ``git_dir``."""
    return layout.scopes_index(git_dir)


def guard_path(git_dir: Path) -> Path:
    """The store-wide scope guard of the store at ``git_dir``."""
    return layout.scopes_guard(git_dir)


def pointer_path(worktree_git_dir: Path) -> Path:
    """Where a repository notes its store's path for the commit hook's shell fast path."""
    from ..gitio.gitdirs import common_dir

    return layout.scopes_store_note(common_dir(worktree_git_dir))


def note_store(
    worktree_git_dir: Path | None, store_git_dir: Path, *, confirmed: bool = False
) -> None:
    """Note, in the repository's git dir, which store its claims live in: the installed
    hook reads it to know, without starting Python, whether any claim there has path
    scopes (hooks/gitlease-hook). Written only when it changes; never fails the caller.

    The hook trusts the note only while it is newer than the git configuration files that
    choose the store (a remote added since makes the repository a clone of another project);
    ``confirmed``: the commit check just located the store, so a note that names it is
    touched, and the hook's fast path holds again. It never rewrites the note: that commit
    may have chosen another store for itself alone (``GITLEASE_STORE``, ``git -c``), and a
    note naming it would leave every later commit unchecked; a note naming another store
    stays stale, and the hook keeps running the check, until ``hooks install`` or an
    acquire with ``--paths`` writes it."""
    if worktree_git_dir is None:
        return
    path = pointer_path(worktree_git_dir)
    text = f"{store_git_dir}\n"
    try:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        if confirmed:
            if same:
                os.utime(path)
            return
        if same:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".scopes-store.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, UnicodeError):
        pass


def read_index(git_dir: Path) -> Index | None:
    """The index, or None if there is none or it cannot be read as gitlease writes it."""
    try:
        data = index_path(git_dir).read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return None
    return _parse_index(data)


def _parse_index(data: bytes) -> Index | None:
    """The index in ``data``, or None for anything gitlease does not write (total: any
    bytes at all, a forged index ref's included)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
        return None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return None
    live, raw = doc.get("live"), doc.get("entries")
    if not isinstance(live, int) or not isinstance(raw, list):
        return None
    entries = []
    for item in raw:
        if not (isinstance(item, list) and len(item) in (4, 5)):
            return None
        ref, claim_id, resource, paths = item[:4]
        revision = item[4] if len(item) == 5 else None
        if not (
            isinstance(ref, str)
            and ref.startswith(PREFIX)
            and ref.endswith(LEAF_SUFFIX)
            and ref.isprintable()
            and isinstance(claim_id, str)
            and isinstance(resource, str)
            and isinstance(paths, list)
            and paths
            and all(isinstance(p, str) and 0 < len(p) <= MAX_PATTERN_CHARS for p in paths)
            and (
                revision is None
                or (type(revision) is int and 0 < revision <= MAX_INT)  # (never a bool)
            )
        ):
            return None
        entries.append(Entry._of((ref, claim_id, resource, tuple(paths), revision)))
    return Index(entries, live)


def document(index: Index) -> bytes:
    """The index as gitlease writes it: ``{"version": 1, "live": n, "entries": [[ref, claim
    id, resource, [pattern, ...]], ...]}``, each entry with its revision after the patterns
    in a remote store's index."""
    doc = {
        "version": VERSION,
        "live": index.live,
        "entries": [
            [e.ref, e.claim_id, e.resource, list(e.paths)]
            + ([] if e.revision is None else [e.revision])
            for e in index.entries
        ],
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def write_index(git_dir: Path, index: Index) -> None:
    """Replace the index file at once (a reader sees the old one or the new one, never a
    part)."""
    path = index_path(git_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".index.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(document(index))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_ref(store: Store) -> tuple[str | None, Index | None]:
    """A remote store's index ref as its mirror holds it: (its object id, or None if it is
    absent; the index, or None if it is absent or is not one gitlease writes)."""
    snap = store.read_here(SCOPES_INDEX_REF)  # (no sighting: it is no claim's record)
    if snap.data is None or snap.problem:
        return snap.oid, None
    return snap.oid, _parse_index(snap.data)


def read_mirrored(store: Store) -> Index:
    """The index of a remote store's mirror, to look with (the commit check, ``who``): its
    index ref, or, when that cannot be read, one made afresh from every record (slower,
    never blind)."""
    oid, index = read_ref(store)
    if index is None:
        index = rebuild(store, mirrored=True)
    return index.replace(oid=oid, mirrored=True)


def sighted(store: Store, snaps: list[Snapshot], *, mirrored: bool) -> list[Snapshot]:
    """``snaps``, read from a remote store's mirror through a plain store (the commit check
    reads it without the network), stamped with when this host first saw each record, as a
    remote store stamps what it reads (:mod:`gitlease.store.remote`): another host's record
    is timed on this host's clock, never on the writer's."""
    if not mirrored or store.remote is not None:
        return snaps
    return Sightings(layout.sightings(store.git_dir)).stamp(snaps, Now.read(), complete=False)


def rebuild(store: Store, *, mirrored: bool = False) -> Index:
    """The index made afresh from every record of the store (under the scope guard, or in
    memory to look with). ``mirrored``: a remote store's mirror read through a plain store
    (:func:`sighted`). A remote store's entries name their claims' revisions."""
    now = Now.read()
    remote = mirrored or store.remote is not None
    entries = []
    for snap in sighted(store, store.read_all(), mirrored=mirrored):
        record = parsed_record(snap)
        if (
            record is not None
            and record.held
            and record.paths
            and not is_expired(record, now, snap.first_seen_ms)
        ):
            revision = record.revision if remote else None
            entries.append(
                Entry(snap.ref, record.claim_id, record.resource, record.paths, revision)
            )
    return Index(entries, len(entries))


def parsed_record(snap: Snapshot) -> Record | None:
    """The record ``snap`` holds, parsed only (None: no record, or one that does not parse)."""
    if snap.data is None:
        return None
    try:
        return parse(snap.data)
    except CorruptRecordError:
        return None
