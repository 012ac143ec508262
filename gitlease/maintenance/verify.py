"""``verify`` (and ``--repair``): checking every record of a store, and fixing only what
cannot hurt a live holder.

``verify`` checks every record (parse, signature, that it names its own
resource), the transitions along each record chain, stale ``<ref>.lock``
files, and this worktree's receipts. ``--repair`` fixes only what cannot hurt
a live holder: it removes stale locks and dead receipts, and replaces a record
that fails verification with a signed tombstone *only once the claim it may
describe can no longer be active*. It never touches an active claim, and never adopts.
Record chains are read through one ``git cat-file --batch`` process per command
(:meth:`Store.blob_reader`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._util import testing as _testing
from .._util.files import is_stale, lock_age, mtime
from ..api.reads import newest_written
from ..claims.ownership import receipt_dir, unwritten_members
from ..errors import CompareAndSwapFailed, GitleaseError, StoreError
from ..gitio.gitread import Snapshot, named_ids, parse_reflog
from ..model.bootclock import START_TOLERANCE_MS, kernel_boot, writer_start_ms
from ..model.claim import Claim, is_expired, judge, on_this_clock
from ..model.clock import Now, parse_rfc3339, rfc3339
from ..model.record import MAX_INT, RELEASED, Record, SigningKey, new_claim_id, new_token, parse
from ..model.refname import PREFIX, decode
from ..receipts import bindings as bindings_mod
from ..receipts import directory as receiptdir
from ..receipts import receipt as receipts_mod
from ..state import guards, highwater
from ..store.local import Store

#: Reads one blob: (bytes, None) or (None, why not) (:meth:`Store.blob_reader`).
BlobRead = Callable[[str], tuple[bytes | None, str | None]]


@dataclass
class Problem:
    """One thing ``verify`` found wrong, and whether ``--repair`` fixed it."""

    #: invalid-record, bad-ref-name, illegal-transition, stale-lock, orphan-receipt, partial-bundle
    kind: str
    ref: str
    message: str
    resource: str | None = None
    repaired: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The problem as a JSON object."""
        return dict(self.__dict__)


@dataclass
class Report:
    """What ``verify`` checked and found."""

    checked: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong (or everything found was repaired)."""
        return all(p.repaired for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        """The report as ``verify --json`` prints it."""
        return {
            "ok": self.ok,
            "checked": self.checked,
            "problems": [p.to_dict() for p in self.problems],
        }


def verify(store: Store, *, repair: bool = False) -> Report:
    """Check the whole store; with ``repair``, fix what is safe to fix."""
    report = Report()
    store.refresh()
    now = Now.read()
    snapshots = store.read_all()
    report.checked = len(snapshots)
    current: dict[str, Claim] = {}
    with store.blob_reader() as read_blob:  # one git process for every chain
        for snap in snapshots:
            try:
                resource = decode(snap.ref)
            except GitleaseError:
                report.problems.append(
                    Problem("bad-ref-name", snap.ref, f"{snap.ref} is not a ref gitlease writes")
                )
                continue
            claim = judge(snap, now, resource)
            current[snap.ref] = claim
            if claim.state == "invalid":
                problem = Problem("invalid-record", snap.ref, claim.problem or "invalid", resource)
                report.problems.append(problem)
                if repair:
                    _repair_record(store, snap, resource, problem, read_blob)
                continue
            moved = _rolled_back(store, snap, claim, read_blob)
            if moved is not None:
                report.problems.append(moved[0])
                if repair:
                    _repair_rollback(store, snap, claim, *moved, read_blob)
            start = store.history_start(snap.ref)
            for message in _illegal_transitions(read_blob, claim, snap.oid or "", start):
                report.problems.append(Problem("illegal-transition", snap.ref, message, resource))
    report.problems.extend(_stale_locks(store, repair))
    report.problems.extend(orphan_receipts(store, current, now, repair))
    return report


def _illegal_transitions(
    read_blob: BlobRead, claim: Claim, oid: str, start: str | None
) -> list[str]:
    """Walk back along the kept chain: every step must be an acquire, a renewal or a release.

    One blob read per kept record, all through one git process for the whole of ``verify``:
    the cost follows the history the retention policy keeps (docs/performance.md).
    ``oid``: the current record's; ``start``: where the kept history starts
    (:meth:`Store.history_start`).
    """
    problems: list[str] = []
    record = claim.record
    seen: set[str] = set()
    while record is not None and record.previous is not None and oid not in seen:
        if oid == start:
            break  # the retention pass cut the history here
        seen.add(oid)
        oid = record.previous
        data, _problem = read_blob(oid)
        if data is None:
            break  # collected: the kept history starts here
        try:
            prev = parse(data)
        except GitleaseError:
            break  # a repaired predecessor: the chain's known part ends here
        why = _transition_problem(prev, record)
        if why:
            problems.append(
                f"{claim.resource}: revision {prev.revision} -> {record.revision}: {why}"
            )
        record = prev
    return problems


def _transition_problem(prev: Record, cur: Record) -> str | None:
    same_claim = prev.claim_id == cur.claim_id
    if same_claim:
        if prev.revision != cur.revision or prev.public_key != cur.public_key:
            return "one claim changed its revision or key"
        if prev.state == RELEASED:
            return "a released claim was written again"
        start = cur.boot_expires_ms - (0 if cur.state == RELEASED else cur.ttl_ms)
        if _one_clock(prev, cur) and start > prev.boot_expires_ms:
            return "an expired claim was renewed or released"
        return None
    if cur.revision <= prev.revision:
        return "the revision did not increase"
    if cur.note and cur.note.startswith("verify --repair"):
        return None
    if prev.state != RELEASED and _one_clock(prev, cur):
        acquired = cur.boot_expires_ms - cur.ttl_ms
        if acquired < prev.boot_expires_ms:
            return f"claim {cur.claim_id} was granted while {prev.claim_id} was active"
    return None


def _repair_record(
    store: Store, snap: Snapshot, resource: str, problem: Problem, read_blob: BlobRead
) -> None:
    """Replace an unverifiable record with a signed tombstone, once nothing can be live."""
    if snap.data is None:
        problem.message += "; cannot be repaired automatically (fix or delete the ref by hand)"
        return
    try:
        suspect: Record | None = parse(snap.data)
    except GitleaseError:
        suspect = None
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
        max_revision_in_reflog(store, snap.ref, read_blob),
        store.revision_floor(snap.ref),
        highwater.read(store.git_dir, snap.ref),
        suspect.revision if suspect else 0,
    ]
    note = f"verify --repair: {problem.message}"
    tombstone = _signed_tombstone(resource, max(known) + 1, note, snap.oid, now)
    _write_repair(store, snap, tombstone, problem)


def _rolled_back(
    store: Store, snap: Snapshot, claim: Claim, read_blob: BlobRead
) -> tuple[Problem, int, Snapshot | None] | None:
    """A ref whose record is below the highest revision this host wrote or saw for it: the
    problem, that revision, and the newest record carrying it (if the reflog still has it).
    The high-water mark is raised to what the reflog shows, so that acquire refuses it too."""
    if claim.record is None:
        return None
    revision, newest = newest_written(store, snap.ref, snap.oid, read_blob)
    if claim.record.revision >= revision:
        return None
    if store.read(snap.ref).oid != snap.oid:
        return None  # it moved since it was read (a write just now raised the mark): no rollback
    highwater.raise_to(store.git_dir, snap.ref, revision)
    message = (
        f"{claim.resource}: the ref was moved back to an older record (revision "
        f"{claim.record.revision}); revision {revision} was written here before (a restored "
        "backup or a hand-run `git update-ref`). acquire refuses it until `gitlease verify "
        "--repair` replaces it, once no claim it may describe can be live"
    )
    return Problem("rolled-back", snap.ref, message, claim.resource), revision, newest


def _repair_rollback(
    store: Store,
    snap: Snapshot,
    claim: Claim,
    problem: Problem,
    revision: int,
    newest: Snapshot | None,
    read_blob: BlobRead,
) -> None:
    """Write a tombstone above every revision known, once neither the record the ref shows
    nor the newest one it was moved back from can describe a live claim. Its ``previous``
    is that newest record, so the history (``log``) carries on from what really came last."""
    now = Now.read()
    lost: Record | None = None
    if newest is not None and newest.data is not None:
        with suppress(GitleaseError):
            lost = parse(newest.data)
    for suspect, seen in ((claim.record, snap.first_seen_ms), (lost, None)):
        if suspect is not None and _may_be_live(suspect, now, seen):
            problem.message += (
                f"; left alone until {suspect.expires_at} (it may describe a live claim)"
            )
            return
    known = [
        revision,
        max_revision_in_reflog(store, snap.ref, read_blob),
        store.revision_floor(snap.ref),
    ]
    shown = claim.record.revision if claim.record else 0
    note = f"verify --repair: the ref was moved back to revision {shown}, below {revision}"
    previous = newest.oid if newest is not None else snap.oid
    _write_repair(store, snap, _signed_tombstone(claim.resource, max(known) + 1, note, previous,
                                                 now), problem)  # fmt: skip


def _one_clock(a: Record, b: Record) -> bool:
    """Whether two records were written on one boot clock (their boot-expiry times compare)."""
    if a.boot_id != b.boot_id:
        return False
    start_a = writer_start_ms(a.expires_at, a.boot_expires_ms)
    start_b = writer_start_ms(b.expires_at, b.boot_expires_ms)
    return start_a is None or start_b is None or abs(start_a - start_b) <= START_TOLERANCE_MS


def _this_boot(record: Record, now: Now) -> bool:
    return kernel_boot(record.boot_id) == kernel_boot(now.boot)


def _may_be_live(record: Record, now: Now, first_seen_ms: int | None) -> bool:
    """Whether ``record`` may still describe a live claim, judged without trusting another
    host's clock: on this boot's clock (or from when this host first saw it); a record of
    another boot never seen here counts as live for a whole TTL past its own expiry on this
    host's wall clock (a repair can wait)."""
    if record.state == RELEASED:
        return False
    if on_this_clock(record, now) or first_seen_ms is not None or _this_boot(record, now):
        return not is_expired(record, now, first_seen_ms)
    return parse_rfc3339(record.expires_at) + record.ttl_ms > now.wall_ms


def _signed_tombstone(
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


def _write_repair(store: Store, snap: Snapshot, tombstone: Record, problem: Problem) -> None:
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


def max_revision_in_reflog(store: Store, ref: str, read_blob: BlobRead) -> int:
    """The highest revision of a record the reflog of ``ref`` still names (both ids of each
    line: the retention pass clears the first kept line's old id only)."""
    best = 0
    try:
        lines = parse_reflog(store.read_reflog(ref))
    except StoreError:
        return 0
    for oid in sorted(named_ids(lines)):
        data, _ = read_blob(oid)
        try:
            best = max(best, parse(data).revision) if data else best
        except GitleaseError:
            continue
    return best


def _stale_locks(store: Store, repair: bool) -> list[Problem]:
    problems: list[Problem] = []
    base = store.git_dir / PREFIX
    if not base.exists():
        return problems
    for path in base.rglob("*.lock"):
        ref = str(path.relative_to(store.git_dir))[: -len(".lock")]
        age = lock_age(path)
        if age is None or not is_stale(age):
            continue  # gone, or young: a write in progress
        when = f"{age:.0f}s old" if age > 0 else "dated in the future (the clock went back)"
        problem = Problem("stale-lock", ref, f"{path} is {when}")
        if repair:
            try:
                with store.guard(ref):
                    store.clear_stale_lock(ref)
                problem.repaired = True
                problem.message += "; removed"
            except GitleaseError as exc:
                problem.message += f"; not removed: {exc}"
        problems.append(problem)
    return problems


def orphan_receipts(
    store: Store, current: dict[str, Claim], now: Now, repair: bool, *, spent: bool = False
) -> list[Problem]:
    """Receipts here whose claim is not the current one: they can never prove anything again.

    A spent receipt (released: no token) is housekeeping, not a problem: ``verify`` passes
    over it; the retention pass (``spent``) removes it as well once its claim is not current.
    """
    directory = receipt_dir(store)
    problems: list[Problem] = []
    _testing.pause("orphan-receipts")  # (tests: stall here, after the snapshot)
    for path in receiptdir.every_receipt(directory):
        try:
            rec = receipts_mod.read(path)
        except GitleaseError as exc:
            problems.append(Problem("orphan-receipt", str(path), str(exc)))
            continue
        if rec.store != str(store.git_dir):
            continue  # a claim in another store (--store): verify that store instead
        live = [c for c in rec.claims if _is_current(current.get(c.ref), c.claim_id)]
        missing = unwritten_members(store, rec) if rec.bundle_id and rec.token and live else []
        if missing:  # a bundle acquire interrupted mid-commit (docs/concepts.md, bundles)
            missed = ", ".join(c.resource for c in missing)
            problems.append(
                Problem(
                    "partial-bundle",
                    str(path),
                    f"bundle {rec.bundle_id} is partial: {missed} never written (its acquire "
                    "was interrupted), so nobody holds it whole and every action on it is "
                    f"refused. Release what is held with `gitlease bundle release "
                    f"{rec.bundle_id}`, or let it expire by its TTL",
                )
            )
            continue
        if live:
            continue
        if rec.token is None and not spent:
            continue  # spent (released): housekeeping for the daily tidy, never a problem
        young = time.time() - mtime(path) < 60  # an acquire may be in flight
        if rec.token and young:
            continue
        problem = Problem(
            "orphan-receipt",
            str(path),
            f"receipt for {', '.join(c.resource for c in rec.claims)} names no current claim",
        )
        if repair:
            why_not = _remove_if_orphan(store, path, rec)
            if why_not is None:
                problem.repaired = True
                problem.message += "; removed"
            else:
                problem.message += f"; not removed: {why_not}"
        problems.append(problem)
    return problems


def _remove_if_orphan(store: Store, path: Path, rec: receipts_mod.Receipt) -> str | None:
    """Remove the receipt ``rec`` at ``path`` only if, judged again under the guards of its
    resources at the moment of removal, it still names no current claim; else say why not.

    The snapshot the caller judged by may be old (a stalled ``verify --repair`` or ``prune``):
    a claim taken meanwhile writes its receipt under the guard before its ref, so under the
    guard both are final, and a receipt whose claim is now current is kept.
    """
    refs = sorted({c.ref for c in rec.claims})
    absent: list[str] = []
    try:
        with ExitStack() as held:
            for ref in refs:
                held.enter_context(store.guard(ref))
            now = Now.read()
            for c in rec.claims:
                snap = store.read(c.ref)
                if snap.oid is None:
                    absent.append(c.ref)
                claim = judge(snap, now, c.resource)
                if _is_current(claim, c.claim_id):
                    return f"{c.resource} is now held by this claim"
            try:
                again = receipts_mod.read(path)
            except GitleaseError:
                again = None
            if again is not None and again != rec:
                return "it changed meanwhile"
            receipts_mod.remove(path)
            _unbind_receipt(store, path)
    except GitleaseError as exc:
        return str(exc)
    for ref in absent:  # (the guard of a resource without a ref is only a file: made on use)
        guards.remove_unheld(store.guard_path(ref))
    return None


def _unbind_receipt(store: Store, path: Path) -> None:
    """Drop this worktree's bindings that name the receipt at ``path`` (just removed): they
    could only refuse commits for a claim nothing proves any more."""
    wt = store.location.worktree_git_dir
    if wt is None:
        return
    for binding in bindings_mod.bindings(wt):
        if isinstance(binding, bindings_mod.Binding) and binding.receipt == str(path):
            bindings_mod.unbind(wt, binding.ref, binding.claim_id)


def _is_current(claim: Claim | None, claim_id: str) -> bool:
    return claim is not None and claim.record is not None and claim.record.claim_id == claim_id
