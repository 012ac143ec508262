"""What a resource's history must show: every step a legal one, and never a move back.

Two checks of ``verify`` read a ref's kept history (:mod:`.history`) against its current
record. Each step along the record chain must be an acquire, a renewal or a release of the
claim before it (:func:`illegal_transitions`). And the ref must not show a record below
the highest revision this host wrote or saw for it (:func:`rolled_back`): a restored
backup or a hand-run ``git update-ref`` would otherwise let an acquire repeat a revision
while its first holder still holds. The rules live here, apart from the pass that applies
them, because they are the store's invariants and read nothing but what they are given
(except that a move back raises the high-water mark, so that acquire refuses it too).
"""

from __future__ import annotations

from ..gitio.gitread import Snapshot
from ..model.bootclock import START_TOLERANCE_MS, writer_start_ms
from ..model.record import RELEASED, Record
from ..state import highwater
from ..store.base import Store
from .history import Newest, Records
from .problems import Problem


def illegal_transitions(
    records: Records, resource: str, record: Record, oid: str, start: str | None
) -> list[str]:
    """Walk back along the kept chain from ``record`` (stored as ``oid``): every step must
    be an acquire, a renewal or a release. ``start``: where the kept history starts
    (:meth:`Store.history_start`). Each record is read once for the whole pass
    (:class:`.history.Records`): the cost follows the history the retention policy keeps.
    """
    problems: list[str] = []
    current: Record | None = record
    seen: set[str] = set()
    while current is not None and current.previous is not None and oid not in seen:
        if oid == start:
            break  # the retention pass cut the history here
        seen.add(oid)
        oid = current.previous
        prev = records.get(oid)
        if prev is None:
            break  # collected, or a repaired predecessor: the chain's known part ends here
        why = transition_problem(prev, current)
        if why:
            problems.append(f"{resource}: revision {prev.revision} -> {current.revision}: {why}")
        current = prev
    return problems


def transition_problem(prev: Record, cur: Record) -> str | None:
    """Why the step from ``prev`` to ``cur`` is not one a writer makes, or None."""
    same_claim = prev.claim_id == cur.claim_id
    if same_claim:
        if prev.revision != cur.revision or prev.public_key != cur.public_key:
            return "one claim changed its revision or key"
        if prev.state == RELEASED:
            return "a released claim was written again"
        start = cur.boot_expires_ms - (0 if cur.state == RELEASED else cur.ttl_ms)
        if one_clock(prev, cur) and start > prev.boot_expires_ms:
            return "an expired claim was renewed or released"
        return None
    if cur.revision <= prev.revision:
        return "the revision did not increase"
    if cur.note and cur.note.startswith("verify --repair"):
        return None
    if prev.state != RELEASED and one_clock(prev, cur):
        acquired = cur.boot_expires_ms - cur.ttl_ms
        if acquired < prev.boot_expires_ms:
            return f"claim {cur.claim_id} was granted while {prev.claim_id} was active"
    return None


def one_clock(a: Record, b: Record) -> bool:
    """Whether two records were written on one boot clock (their boot-expiry times compare)."""
    if a.boot_id != b.boot_id:
        return False
    start_a = writer_start_ms(a.expires_at, a.boot_expires_ms)
    start_b = writer_start_ms(b.expires_at, b.boot_expires_ms)
    return start_a is None or start_b is None or abs(start_a - start_b) <= START_TOLERANCE_MS


def rolled_back(
    store: Store, snap: Snapshot, resource: str, record: Record, newest: Newest
) -> Problem | None:
    """The problem of a ref whose record is below ``newest`` (the highest revision this host
    wrote or saw for it, :func:`.history.newest_written`), else None. The high-water mark
    is raised to what the reflog shows, so that acquire refuses the ref too."""
    if record.revision >= newest.revision:
        return None
    if store.read(snap.ref).oid != snap.oid:
        return None  # it moved since it was read (a write just now raised the mark): no rollback
    highwater.raise_to(store.git_dir, snap.ref, newest.revision)
    message = (
        f"{resource}: the ref was moved back to an older record (revision "
        f"{record.revision}); revision {newest.revision} was written here before (a restored "
        "backup or a hand-run `git update-ref`). acquire refuses it until `gitlease verify "
        "--repair` replaces it, once no claim it may describe can be live"
    )
    return Problem("rolled-back", snap.ref, message, resource)
