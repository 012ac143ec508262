"""The store's index of path scopes, and the checks made from it (docs/performance.md).

Every claim acquired with path scopes is noted in one small JSON document (one entry a
claim, naming its ref, claim id, resource and patterns):

* in a store on this host, the file ``<store>/worklease/scopes/index``, written under
  the store-wide scope guard (``<store>/worklease/scopes/guard``, an ``flock``) *before*
  the claim's compare-and-swap;
* in a store coordinated through a git remote, the ref
  :data:`~gitlease.model.refname.SCOPES_INDEX_REF` (``refs/worklease/@scopes``), whose new
  value rides on the claim's own atomic push, leased at the object id it was read at
  (:func:`note` gives the update, :func:`gitlease.claims.engine.write_signed` carries it):
  the claim and its entry land together or not at all, and of two acquires that read the
  same index only one push lands. The loser decides again from a fresh fetch, and sees
  the winner's entry. Each entry there also names its claim's revision, so that a mirror
  that is behind is told apart from a claim that is gone.

So the index always holds every live scoped claim (a superset: entries of claims that
were released, expired, or never landed stay until the next compaction, which rides on a
scoped acquire's write too), and:

* an acquire with scopes reads the index, judges the claims whose scopes overlap its own,
  notes itself and writes, as one decision: two acquires with overlapping scopes decide
  one after the other, and the second sees the first (exactly one wins a race);
* the commit check reads the index and the refs of only those entries whose patterns
  cover a changed path, never every record.

The index is a hint, never the truth: every entry that matters is judged from its ref's
current record (parsed, verified, active, and that record's own patterns). An acquire
rebuilds a missing or unreadable index from every record first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from .._util.text import printable
from .._util.value import Value
from ..errors import CorruptRecordError, HeldError, UsageError
from ..gitio import layout
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, is_expired, judge
from ..model.clock import Now, format_duration
from ..model.record import MAX_INT, Record, parse
from ..model.refname import LEAF_SUFFIX, PREFIX, SCOPES_INDEX_REF
from ..model.sightings import Sightings
from ..state.guards import hold
from ..store.base import Store
from .wildmatch import MAX_PATTERN_CHARS, compile_pattern, overlaps

VERSION = 1
#: Seconds an acquire with scopes waits for another one's scope guard before HELD.
SCOPE_GUARD_WAIT_SECONDS = 30.0
#: Compact when the index holds this many entries more than twice the live ones last seen.
_SLACK = 32


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


def note_store(worktree_git_dir: Path | None, store_git_dir: Path) -> None:
    """Note, in the repository's git dir, which store its claims live in: the installed
    hook reads it to know, without starting Python, whether any claim there has path
    scopes (hooks/gitlease-hook). Written only when it changes; never fails the caller."""
    if worktree_git_dir is None:
        return
    path = pointer_path(worktree_git_dir)
    text = f"{store_git_dir}\n"
    try:
        if path.is_file() and path.read_text(encoding="utf-8") == text:
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


@contextmanager
def scope_guard(store: Store) -> Iterator[None]:
    """Hold the store-wide scope guard (HELD if another process keeps it too long)."""
    path = guard_path(store.git_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Held only from reading the index to a compare-and-swap (never across an exec), and
    # dropped by the kernel if its holder dies: a longer wait than a resource guard's, so
    # that scoped acquires queued behind each other on a busy machine are not told HELD.
    with hold(path, "the path scopes of this store", wait=SCOPE_GUARD_WAIT_SECONDS):
        yield


def rebuild(store: Store, *, mirrored: bool = False) -> Index:
    """The index made afresh from every record of the store (under the scope guard, or in
    memory to look with). ``mirrored``: a remote store's mirror read through a plain store
    (:func:`sighted`). A remote store's entries name their claims' revisions."""
    now = Now.read()
    remote = mirrored or store.remote is not None
    entries = []
    for snap in sighted(store, store.read_all(), mirrored=mirrored):
        record = _parsed(snap)
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


def _parsed(snap: Snapshot) -> Record | None:
    if snap.data is None:
        return None
    try:
        return parse(snap.data)
    except CorruptRecordError:
        return None


def current(store: Store) -> Index:
    """The index to decide from (under the scope guard): read, or rebuilt (and, in a local
    store, written at once). A remote store's is its index ref as the mirror holds it, with
    that ref's object id for the lease; one that is absent or cannot be read is made afresh
    from every record, on a fresh look (the push that replaces it leases what was read)."""
    if store.remote is None:
        index = read_index(store.git_dir)
        if index is None:
            index = rebuild(store)
            write_index(store.git_dir, index)
        return index
    oid, found = read_ref(store)
    if found is None:
        store.refresh()  # a rebuild decides from every record: from the remote's own
        oid, found = read_ref(store)
        if found is None:
            found = rebuild(store)
    return found.replace(oid=oid, mirrored=True)


class ScopesOverlap(HeldError):
    """HELD because of a live claim's overlapping scope, not the resource itself: the same
    answer for every candidate of a ``--first-free``."""


class Conflict(Value):
    """A live claim whose scopes overlap the new claim's: (mine, theirs, witness) pairs."""

    __slots__ = ("claim", "pairs")
    claim: Claim
    pairs: list[tuple[str, str, str]]


def conflicts(
    store: Store, index: Index, paths: Sequence[str], exclude: Sequence[str], now: Now
) -> tuple[list[Conflict], bool]:
    """The live claims (on refs not in ``exclude``) whose scopes overlap ``paths``, and
    whether the store's view is behind the index (a remote store's mirror: an overlapping
    entry's ref shows no record of its claim's revision yet; decide again on a fresh look)."""
    skip = set(exclude)
    wanted = [e for e in index.entries if e.ref not in skip and _any_overlap(paths, e.paths)]
    if not wanted:
        return [], False
    out = []
    snaps = store.read_many(sorted({e.ref for e in wanted}))
    by_ref = {s.ref: s for s in sighted(store, snaps, mirrored=index.mirrored)}
    seen: set[str] = set()
    behind = False
    for entry in wanted:
        if entry.ref in seen:
            continue
        claim = judge(by_ref[entry.ref], now)
        behind = behind or _behind(entry, claim)
        if claim.state == "invalid":
            continue  # (an acquire of it is refused on its own; it holds no scope)
        record = claim.record
        if not claim.active or record is None or not record.paths:
            continue
        seen.add(entry.ref)
        pairs = overlaps(paths, _valid(record.paths))
        if pairs:
            out.append(Conflict(claim, pairs))
    return out, behind


def _behind(entry: Entry, claim: Claim) -> bool:
    """Whether the ref, as read, is older than the index's entry for it (a remote store's
    mirror fetched in the middle of a change): the ref is absent, or its record's revision
    is below the entry's claim's."""
    if entry.revision is None:
        return False
    if claim.state == "free":
        return True
    return claim.record is not None and claim.record.revision < entry.revision


def _valid(patterns: Sequence[str]) -> list[str]:
    """The patterns of a record that compile: one that does not (a forged record) covers
    nothing, since gitlease never writes it."""
    out = []
    for p in patterns:
        try:
            compile_pattern(p)
        except UsageError:
            continue
        out.append(p)
    return out


def _any_overlap(mine: Sequence[str], theirs: Sequence[str]) -> bool:
    try:
        return bool(overlaps(mine, theirs))
    except UsageError:  # a forged entry: judged from its record instead
        return True


def held_error(found: list[Conflict], paths: Sequence[str]) -> ScopesOverlap:
    """HELD naming every conflicting claim, its overlapping patterns and a witness path."""
    parts = []
    for c in found:
        r = c.claim.record
        assert r is not None
        pairs = "; ".join(
            f"{printable(mine)!r} overlaps {printable(theirs)!r} (both cover {printable(w)!r})"
            for mine, theirs, w in c.pairs
        )
        left = format_duration(c.claim.expires_in_ms or 0)
        parts.append(
            f"claim {r.claim_id} on {printable(c.claim.resource)} held by {printable(r.owner)} "
            f"(expires in {left}): {pairs}"
        )
    message = (
        "the path scopes overlap a live claim on another resource: "
        + " | ".join(parts)
        + ". Choose other work or narrower --paths, or wait until it is released"
    )
    docs: list[dict[str, Any]] = []
    for c in found:
        doc = c.claim.to_dict()
        doc["overlaps"] = [{"paths": m, "scope": t, "witness": w} for m, t, w in c.pairs]
        docs.append(doc)
    error = ScopesOverlap(message, claim=docs[0])
    error.claims = docs
    return error


def note(
    store: Store, index: Index, records: Sequence[tuple[str, Record]], now: Now
) -> list[tuple[str, str | None, bytes]]:
    """Add the new claims (ref, record) to the index, compacting first when the index has
    grown well past its live entries. A local store's index file is written now, before
    the claims' compare-and-swap (nothing to return). A remote store's new index is
    returned as the update of its ref, leased at the id it was read at, for the claims'
    own push to carry (:func:`gitlease.claims.engine.write_signed`): never written alone."""
    entries = index.entries
    live = index.live
    if len(entries) >= 2 * live + _SLACK:
        entries = _compact(store, index, now)
        live = len(entries)
    remote = store.remote is not None
    added = [
        Entry(ref, r.claim_id, r.resource, r.paths or (), r.revision if remote else None)
        for ref, r in records
    ]
    new = Index([*entries, *added], live)
    if not remote:
        write_index(store.git_dir, new)
        return []
    return [(SCOPES_INDEX_REF, index.oid, document(new))]


def _compact(store: Store, index: Index, now: Now) -> list[Entry]:
    """The entries whose claim may still be live (parsed only: an entry kept for a forged
    record is judged again when it matters)."""
    entries = index.entries
    snaps = store.read_many(sorted({e.ref for e in entries}))
    by_ref = {s.ref: s for s in sighted(store, snaps, mirrored=index.mirrored)}
    return [e for e in entries if not _gone(e, by_ref[e.ref], now)]


def _gone(entry: Entry, snap: Snapshot, now: Now) -> bool:
    """Whether the entry's claim is over for good: its ref holds that claim released or
    expired, or (an entry with a revision, a remote store's) a later claim. A local store's
    ref is the truth: one that holds another claim, or none, holds no scope of this one. A
    mirror's may be behind the index, so there only what proves the claim over counts."""
    record = _parsed(snap)
    if record is not None and record.claim_id == entry.claim_id:
        return not record.held or is_expired(record, now, snap.first_seen_ms)
    if entry.revision is None:
        return True
    return record is not None and record.revision > entry.revision
