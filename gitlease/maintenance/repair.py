"""``verify --repair`` for records: a signed tombstone over what cannot be trusted, written
only once no claim it may describe can still be live.

A record that fails verification, and a ref moved back below a revision it held, are
replaced by a released record ("tombstone") owned by ``gitlease verify --repair``, at a
revision above every one known for the resource (the reflog, the floor, the high-water
mark, the suspect record itself), so that the next acquire continues above all of them.
The repair never touches a record that may describe a live claim, never adopts, and writes
by compare-and-swap against what ``verify`` read, under the resource's guard, durably
(it hands out a revision, docs/reference/store.md).
"""

from __future__ import annotations

from contextlib import suppress

from ..errors import CompareAndSwapFailed, GitleaseError
from ..gitio.gitread import Snapshot
from ..model.bootclock import kernel_boot
from ..model.claim import is_expired, on_this_clock
from ..model.clock import Now, parse_rfc3339, rfc3339
from ..model.record import MAX_INT, RELEASED, Record, SigningKey, new_claim_id, new_token, parse
from ..state import highwater
from ..store.base import Store
from .history import Kept, Newest, Records, max_revision
from .problems import Problem


def repair_record(
    store: Store, snap: Snapshot, resource: str, problem: Problem, records: Records
) -> None:
    """Replace an unverifiable record with a signed tombstone, once nothing can be live."""
    if snap.data is None:
        problem.message += "; cannot be repaired automatically (fix or delete the ref by hand)"
        return
    suspect: Record | None = None
    with suppress(GitleaseError):
        suspect = parse(snap.data)
    now = Now.read()
    refusal = store.repair_refusal(parsed=suspect is not None)
    if refusal is not None:
        problem.message += f"; {refusal}"
        return
    live = not is_expired(suspect, now, snap.first_seen_ms) if suspect is not None else False
    if suspect is not None and suspect.state != RELEASED and live:
        problem.message += f"; left alone until {suspect.expires_at} (it may describe a live claim)"
        return
    known = [
        max_revision(Kept.read(store, snap.ref).named(), records),
        store.revision_floor(snap.ref),
        highwater.read(store.git_dir, snap.ref),
        suspect.revision if suspect else 0,
    ]
    note = f"verify --repair: {problem.message}"
    tombstone = signed_tombstone(resource, max(known) + 1, note, snap.oid, now)
    write_repair(store, snap, tombstone, problem)


def repair_rollback(
    store: Store,
    snap: Snapshot,
    record: Record,
    problem: Problem,
    newest: Newest,
    records: Records,
) -> None:
    """Write a tombstone above every revision known, once neither the record the ref shows
    nor the newest one it was moved back from can describe a live claim. Its ``previous``
    is that newest record, so the history (``log``) carries on from what really came last."""
    now = Now.read()
    for suspect, seen in ((record, snap.first_seen_ms), (newest.record, None)):
        if suspect is not None and may_be_live(suspect, now, seen):
            problem.message += (
                f"; left alone until {suspect.expires_at} (it may describe a live claim)"
            )
            return
    known = [
        newest.revision,
        max_revision(Kept.read(store, snap.ref).named(), records),
        store.revision_floor(snap.ref),
    ]
    resource = record.resource
    note = f"verify --repair: the ref was moved back to revision {record.revision}, below " + (
        f"{newest.revision}"
    )
    previous = newest.oid if newest.oid is not None else snap.oid
    tombstone = signed_tombstone(resource, max(known) + 1, note, previous, now)
    write_repair(store, snap, tombstone, problem)


def may_be_live(record: Record, now: Now, first_seen_ms: int | None) -> bool:
    """Whether ``record`` may still describe a live claim, judged without trusting another
    host's clock: on this boot's clock (or from when this host first saw it); a record of
    another boot never seen here counts as live for a whole TTL past its own expiry on this
    host's wall clock (a repair can wait)."""
    if record.state == RELEASED:
        return False
    this_boot = kernel_boot(record.boot_id) == kernel_boot(now.boot)
    if on_this_clock(record, now) or first_seen_ms is not None or this_boot:
        return not is_expired(record, now, first_seen_ms)
    return parse_rfc3339(record.expires_at) + record.ttl_ms > now.wall_ms


def signed_tombstone(
    resource: str, revision: int, note: str, previous: str | None, now: Now
) -> Record:
    """A released record owned by ``gitlease verify --repair``, signed by a fresh key."""
    key = SigningKey(new_token())
    stamp = rfc3339(now.wall_ms)
    return Record(
        resource=resource,
        state=RELEASED,
        claim_id=new_claim_id(),
        owner="gitlease verify --repair",
        revision=revision,
        bundle_id=None,
        mode="guarded",
        acquired_at=stamp,
        renewed_at=stamp,
        released_at=stamp,
        expires_at=stamp,
        renew_by=stamp,
        ttl_ms=1000,
        boot_id=now.boot,
        boot_expires_ms=now.boot_ms,
        note=note[:500],
        checkpoint=None,
        public_key=key.public_hex,
        previous=previous,
    ).signed(key)


def write_repair(store: Store, snap: Snapshot, tombstone: Record, problem: Problem) -> None:
    """Compare-and-swap the repair's tombstone over what verify read, under the guard."""
    if tombstone.revision > MAX_INT:  # above a forged record at the last revision
        problem.message += "; cannot be repaired: no revision that parses is left above it"
        return
    try:
        with store.guard(snap.ref), store.durable():
            store.compare_and_swap(
                snap.ref, snap.oid, tombstone.raw or b"", "gitlease verify --repair"
            )
    except CompareAndSwapFailed:
        problem.message += "; it changed during repair, run verify again"
        return
    highwater.raise_to(store.git_dir, snap.ref, tombstone.revision)
    problem.repaired = True
    problem.message += f"; replaced by a tombstone at revision {tombstone.revision}"
