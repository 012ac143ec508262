"""What an acquire with path scopes decides from the store's index (docs/performance.md).

The index itself, as the commit check reads it, is :mod:`gitlease.scopes.index`; this module
is the acquire's side, which the commit check never loads:

* in a store on this host, the index file is written under the store-wide scope guard
  (``<store>/worklease/scopes/guard``, an ``flock``: :func:`scope_guard`) *before* the
  claim's compare-and-swap;
* in a store coordinated through a git remote, the new index rides on the claim's own
  atomic push, leased at the object id it was read at (:func:`note` gives the update,
  :func:`gitlease.claims.engine.write_signed` carries it): the claim and its entry land
  together or not at all, and of two acquires that read the same index only one push
  lands. The loser decides again from a fresh fetch, and sees the winner's entry.

So an acquire with scopes reads the index (:func:`current`), judges the claims whose scopes
overlap its own (:func:`conflicts`), notes itself (:func:`note`, compacting the entries of
claims that are over, which rides on the same write) and writes, as one decision: two
acquires with overlapping scopes decide one after the other, and the second sees the first
(exactly one wins a race). An acquire rebuilds a missing or unreadable index from every
record first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .._util.text import printable
from .._util.value import Value
from ..errors import HeldError, UsageError
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, is_expired, judge
from ..model.clock import Now, format_duration
from ..model.record import Record
from ..model.refname import SCOPES_INDEX_REF
from ..state.guards import hold
from ..store.base import Store
from .index import (
    Entry,
    Index,
    document,
    guard_path,
    parsed_record,
    read_index,
    read_ref,
    rebuild,
    sighted,
    write_index,
)
from .wildmatch import compile_pattern, overlaps

#: Seconds an acquire with scopes waits for another one's scope guard before HELD.
SCOPE_GUARD_WAIT_SECONDS = 30.0
#: Compact when the index holds this many entries more than twice the live ones last seen.
_SLACK = 32


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
    record = parsed_record(snap)
    if record is not None and record.claim_id == entry.claim_id:
        return not record.held or is_expired(record, now, snap.first_seen_ms)
    if entry.revision is None:
        return True
    return record is not None and record.revision > entry.revision
