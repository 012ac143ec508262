"""``verify`` (and ``--repair``): checking every record of a store, and fixing only what
cannot hurt a live holder.

``verify`` checks every record (parse, signature, that it names its own resource), the
transitions along each record chain and that no ref was moved back (:mod:`.chains`), stale
``<ref>.lock`` files and this worktree's receipts (:mod:`.leftovers`). ``--repair`` fixes
only what cannot hurt a live holder: it removes stale locks and dead receipts, and
replaces a record that fails verification with a signed tombstone *only once the claim it
may describe can no longer be active* (:mod:`.repair`). It never touches an active claim,
and never adopts.

The check is the point, so nothing is taken on trust: every current record's signature is
checked here, in this process, whatever a read's cache of verified records says. What is
shared is only reading: one ``for-each-ref`` of every current record, each resource's
reflog read once, and the records the reflogs name read in one stream and parsed once for
all the checks (:mod:`.history`). That is about one parse and one signature check a
record, plus a reflog and a high-water mark a resource (docs/performance.md, ``verify``).
No record's time is judged: whether a claim is active decides nothing here but a repair,
which judges it itself.
"""

from __future__ import annotations

from ..errors import CorruptRecordError, GitleaseError
from ..gitio.gitread import Snapshot
from ..model.claim import verified
from ..model.refname import decode
from ..state import floors, highwater
from ..store.base import Store
from . import chains, repair
from .history import GROUP, Kept, Records, newest_written, reading
from .leftovers import orphan_receipts, stale_locks
from .problems import Problem, Report

__all__ = ["Problem", "Report", "verify"]


def verify(store: Store, *, repair: bool = False) -> Report:
    """Check the whole store; with ``repair``, fix what is safe to fix."""
    report = Report()
    store.refresh()
    snapshots = store.read_all()
    report.checked = len(snapshots)
    # the marks and floors after the refs and before the reflogs: a write landing between
    # the two reads can only raise what the reflog shows
    floor = _Floors(store)
    marks = highwater.read_every(store.git_dir)
    current: dict[str, str | None] = {}  # ref -> claim id of its verified record
    with reading(store) as records:
        for at in range(0, len(snapshots), GROUP):
            group = snapshots[at : at + GROUP]
            kept = {s.ref: Kept.read(store, s.ref) for s in group}
            records.prefetch(o for s in group for o in kept[s.ref].named() if o != s.oid)
            for snap in group:
                mark = max(marks.get(snap.ref, 0), floor.of(snap.ref))
                _check(store, snap, mark, kept[snap.ref], records, report, current, repair)
            records.clear()
    report.problems.extend(stale_locks(store, repair))
    report.problems.extend(orphan_receipts(store, current.get, repair))
    return report


def _check(
    store: Store,
    snap: Snapshot,
    mark: int,
    kept: Kept,
    records: Records,
    report: Report,
    current: dict[str, str | None],
    fix: bool,
) -> None:
    """Every check of one ref, in the order its problems are reported."""
    try:
        resource = decode(snap.ref)
    except GitleaseError:
        report.problems.append(
            Problem("bad-ref-name", snap.ref, f"{snap.ref} is not a ref gitlease writes")
        )
        return
    current[snap.ref] = None
    if snap.oid is None:
        return  # (gone between the listing and the read: nothing to check)
    try:
        record = verified(snap, resource)  # the signature checked, here, every time
    except CorruptRecordError as exc:
        problem = Problem("invalid-record", snap.ref, str(exc), resource)
        report.problems.append(problem)
        if fix:
            repair.repair_record(store, snap, resource, problem, records)
        return
    current[snap.ref] = record.claim_id
    records.add(snap.oid, record)
    newest = newest_written(mark, kept.landed(snap.oid), records)
    moved = chains.rolled_back(store, snap, resource, record, newest)
    if moved is not None:
        report.problems.append(moved)
        if fix:
            repair.repair_rollback(store, snap, record, moved, newest, records)
    for message in chains.illegal_transitions(records, resource, record, snap.oid, kept.start):
        report.problems.append(Problem("illegal-transition", snap.ref, message, resource))


class _Floors:
    """Every revision floor of the store, read once (:func:`gitlease.state.floors.read` a
    ref, without a file opened a ref)."""

    def __init__(self, store: Store) -> None:
        self._by_name = floors.read_packed(store.git_dir)
        for name, revision in floors.loose(store.git_dir).items():
            self._by_name[name] = max(revision, self._by_name.get(name, 0))

    def of(self, ref: str) -> int:
        return self._by_name.get(floors.digest(ref), 0) if self._by_name else 0
