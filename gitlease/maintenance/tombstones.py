"""Resources leaving the store: old tombstones, and reflogs whose ref is gone, each removed
only once a revision floor durably holds the highest revision it carried.

A resource's revisions must keep increasing for as long as the store lives, so the last
revision of a ref that goes is kept in a floor (:mod:`gitlease.state.floors`) first. The
floors of a group of tombstones are written in one durable write of ``floors/packed``
before any of their refs goes (a floor only ever raises what an absent ref continues from,
so writing it early is harmless: a tombstone that is then left, because it was written
meanwhile, keeps a floor its record already carries). Each removal is then decided again
under the resource's guard from what is there at that moment: the ref must still hold the
tombstone that was judged (the removal is a compare-and-swap on it), no higher revision
may have been written or seen for it (it may hide a live claim: ``verify --repair``'s to
fix), and a revision found above the group's floor gets a floor of its own, durably,
before the ref goes. One fsync for a group rather than two a tombstone is what made the
first pass over a big store affordable (docs/performance.md, ``prune``).
"""

from __future__ import annotations

from collections.abc import Callable

from .._util import testing as _testing
from ..errors import CompareAndSwapFailed, GitleaseError, StoreError
from ..gitio.gitread import Snapshot
from ..model.claim import Claim
from ..model.clock import parse_rfc3339
from ..state import floors, highwater
from ..store.base import Store
from .history import GROUP, Kept, Records, max_revision, newest_written, reflog_refs
from .judging import RELEASED_LINE, Judged
from .retention import GUARD_WAIT_SECONDS


def remove_tombstones(
    store: Store,
    judged: Judged,
    limit_ms: int,
    records: Records,
    pruned: list[str],
    busy: list[str],
) -> None:
    """Remove the tombstones released longer ago than ``limit_ms``, each after its floor is
    durable, then its reflog (its history goes with it; the floor keeps the revision).
    The resources removed go to ``pruned``, those whose guard was held to ``busy``."""
    old = [
        (snap, claim)
        for snap in judged.snapshots
        if _may_be_old(judged, snap, limit_ms)
        and _is_old(claim := judged.claim(snap.ref), judged, limit_ms)
    ]
    before = _floor_reader(store)
    for at in range(0, len(old), GROUP):
        group = old[at : at + GROUP]
        kept = {snap.ref: Kept.read(store, snap.ref) for snap, _ in group}
        records.prefetch(oid for k in kept.values() for oid in k.named())
        tops = {
            snap.ref: _top(store, snap.ref, claim, kept[snap.ref], records) for snap, claim in group
        }
        try:
            _raise_packed_floors(store, tops)
        except StoreError:
            busy.extend(claim.resource for _, claim in group)
            continue
        _testing.pause("prune-tombstones")  # (tests: stall here, judged and floors written)
        for snap, claim in group:
            try:
                removed = _remove(store, snap, claim, before(snap.ref), tops[snap.ref], records)
            except GitleaseError:
                busy.append(claim.resource)
                continue
            if removed:
                pruned.append(claim.resource)
        records.clear()


def _may_be_old(judged: Judged, snap: Snapshot, limit_ms: int) -> bool:
    """The cheap look, no signature checked: only a record whose text says it is released,
    long enough ago, can be an old tombstone."""
    if snap.data is None or RELEASED_LINE not in snap.data:
        return False
    record = judged.unverified(snap.ref)
    return record is not None and _released_before(record.released_at, judged, limit_ms)


def _is_old(claim: Claim, judged: Judged, limit_ms: int) -> bool:
    record = claim.record
    if claim.state != "released" or record is None:
        return False
    return _released_before(record.released_at, judged, limit_ms)


def _released_before(released_at: str | None, judged: Judged, limit_ms: int) -> bool:
    return released_at is not None and judged.now.wall_ms - parse_rfc3339(released_at) >= limit_ms


def _top(store: Store, ref: str, claim: Claim, kept: Kept, records: Records) -> int:
    """The highest revision the resource carried: its record's, its reflog's, its mark's."""
    revision = claim.record.revision if claim.record else 0
    top = max(revision, max_revision(kept.named(), records))
    return max(top, highwater.read(store.git_dir, ref))


def _raise_packed_floors(store: Store, tops: dict[str, int]) -> None:
    """One durable write of ``floors/packed`` raising every floor in ``tops``."""
    packed = floors.read_packed(store.git_dir)
    raised = dict(packed)
    for ref, top in tops.items():
        name = floors.digest(ref)
        raised[name] = max(top, raised.get(name, 0))
    if raised == packed:
        return
    try:
        floors.write_packed(store.git_dir, raised)
    except OSError as exc:
        raise StoreError(f"cannot write the revision floors: {exc.strerror or exc}") from None


def _remove(
    store: Store, snap: Snapshot, claim: Claim, floor: int, written: int, records: Records
) -> bool:
    """Remove one tombstone under its guard if it is still what was judged; whether it went.
    ``floor``: its floor before this pass wrote any; ``written``: the floor written for it."""
    record = claim.record
    assert record is not None  # (a tombstone: released, so verified)
    try:
        with store.guard(snap.ref, wait=GUARD_WAIT_SECONDS):
            if store.read(snap.ref).oid != snap.oid:
                return False  # written meanwhile: no longer this tombstone
            mark = max(highwater.read(store.git_dir, snap.ref), floor)  # before the reflog
            kept = Kept.read(store, snap.ref)
            if newest_written(mark, kept.landed(snap.oid), records).revision > record.revision:
                return False  # moved back (it may hide a live claim): verify --repair's to fix
            top = _top(store, snap.ref, claim, kept, records)
            if top > written:
                store.write_revision_floor(snap.ref, top)
            _testing.pause("prune-remove")  # (tests: stall here, under the guard)
            store.remove_compare_and_swap(snap.ref, snap.oid or "")
            store.delete_reflog(snap.ref)
            highwater.forget(store.git_dir, snap.ref)  # the floor holds it now
    except CompareAndSwapFailed:
        return False
    return True


def _floor_reader(store: Store) -> Callable[[str], int]:
    """The floors as they are before the pass writes any (one read of every floor)."""
    by_name = floors.read_packed(store.git_dir)
    for name, revision in floors.loose(store.git_dir).items():
        by_name[name] = max(revision, by_name.get(name, 0))
    return lambda ref: by_name.get(floors.digest(ref), 0)


def remove_orphan_reflogs(store: Store, refs: set[str], records: Records, busy: list[str]) -> int:
    """Reflogs of refs that no longer exist (libgit2 leaves them when it deletes a ref, and
    an acquire that lost its race leaves an empty one): removed once a floor holds the
    highest revision they name, so that the next acquire still continues above it. How
    many went."""
    removed = 0
    for ref in reflog_refs(store):
        if ref in refs:
            continue
        try:
            with store.guard(ref, wait=GUARD_WAIT_SECONDS):
                if store.read(ref).oid is not None:
                    continue  # it exists (again), or cannot be read: not an orphan
                top = max_revision(Kept.read(store, ref).named(), records)
                top = max(top, highwater.read(store.git_dir, ref))
                if top > store.revision_floor(ref):
                    store.write_revision_floor(ref, top)
                store.delete_reflog(ref)
                highwater.forget(store.git_dir, ref)  # the floor holds it now
        except GitleaseError:
            busy.append(ref)
            continue
        removed += 1
    return removed
