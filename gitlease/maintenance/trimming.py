"""Trimming each resource's reflog to the history the retention policy keeps.

The policy (:mod:`.retention`) names the first reflog line to keep; the lines before it
go, and with them the records only they named (``git gc`` drops those later). Never the
current record, never an active claim's records back to its acquire, and nothing of a
resource whose record does not verify (``verify --repair`` takes its revision from that
history). Most resources have nothing to drop on a given day, so the look that finds out
reads only the reflog, without the guard and without a signature check
(:mod:`.judging`); the rest are judged, and their reflog is rewritten under the guard and
the ref's lock, from what it holds at that moment.
"""

from __future__ import annotations

from ..errors import GitleaseError, StoreError
from ..gitio.gitread import ReflogLine, Snapshot, named_ids, parse_reflog
from ..model.claim import Claim
from ..store.base import Store
from . import retention
from .history import GROUP, Records, read_reflog, reflog_refs
from .judging import Judged


class Trimmed:
    """What trimming did: resources trimmed, records expired, resources left (busy)."""

    def __init__(self) -> None:
        self.resources = 0
        self.records = 0
        self.busy: list[str] = []


def trim_histories(
    store: Store, judged: Judged, policy: retention.Policy, records: Records
) -> Trimmed:
    """Cut every resource's reflog to what the policy keeps (:func:`retention.first_kept`)."""
    done = Trimmed()
    now_s = judged.now.wall_ms / 1000
    # only a resource with a reflog has a history to cut (listed once: a reflog made since
    # is a write's since the refs were read, with nothing old in it to drop)
    logged = set(reflog_refs(store))
    snaps = [s for s in judged.snapshots if s.oid is not None and s.ref in logged]
    for at in range(0, len(snaps), GROUP):
        due: list[tuple[Snapshot, Claim]] = []
        wanted: set[str] = set()  # an active claim's records back to its acquire are read
        for snap in snaps[at : at + GROUP]:
            found = _due(store, snap, judged, policy, now_s)
            if found is not None:
                claim, lines = found
                due.append((snap, claim))
                if claim.active:
                    wanted |= named_ids(lines)
        records.prefetch(wanted)
        for snap, claim in due:
            _trim(store, snap, claim, policy, now_s, records, done)
        records.clear()
    return done


def _due(
    store: Store, snap: Snapshot, judged: Judged, policy: retention.Policy, now_s: float
) -> tuple[Claim, list[ReflogLine]] | None:
    """The claim and reflog of a resource whose history has something to drop, else None."""
    try:
        data = read_reflog(store, snap.ref)
    except StoreError:
        if judged.claim(snap.ref).state == "invalid":
            return None  # (its history is left alone, readable or not)
        raise
    if data.count(b"\n") + 1 <= policy.records:
        return None  # no more lines than the policy keeps in any case
    lines = parse_reflog(data)
    if retention.first_kept(lines, policy, now_s, frozenset({snap.oid or ""})) == 0:
        return None  # the cheap look, without the guard: most resources have nothing to drop
    claim = judged.claim(snap.ref)
    if claim.state == "invalid":
        return None  # verify --repair takes its revision from this history: all of it stays
    return claim, lines


def _trim(
    store: Store,
    snap: Snapshot,
    claim: Claim,
    policy: retention.Policy,
    now_s: float,
    records: Records,
    done: Trimmed,
) -> None:
    """Rewrite one reflog under the guard, from what it holds then."""
    oid = snap.oid or ""
    protected = claim_records(claim, oid, records) if claim.active else frozenset({oid})
    dropped = 0

    def change(data: bytes) -> bytes | None:
        nonlocal dropped
        current = parse_reflog(data)
        dropped = retention.first_kept(current, policy, now_s, protected)
        return retention.rewritten(current, dropped) if dropped else None

    try:
        with store.guard(snap.ref, wait=retention.GUARD_WAIT_SECONDS):
            if store.read(snap.ref).oid != snap.oid:
                done.busy.append(claim.resource)  # written meanwhile: judged next time
                return
            changed = store.rewrite_reflog(snap.ref, change)
    except GitleaseError:
        done.busy.append(claim.resource)
        return
    if changed:
        done.resources += 1
        done.records += dropped


def claim_records(claim: Claim, oid: str, records: Records) -> frozenset[str]:
    """The object ids of an active claim's records, from the current one back to its
    acquire: none of them may expire while the claim lives."""
    found = {oid}
    record = claim.record
    while record is not None and record.previous is not None and record.previous not in found:
        prev = records.get(record.previous)
        if prev is None:
            break
        if prev.claim_id != record.claim_id:
            break  # the record before the acquire: another claim's
        found.add(record.previous)
        record = prev
    return frozenset(found)
