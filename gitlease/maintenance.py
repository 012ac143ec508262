"""``verify`` (and ``--repair``) and the retention pass (``prune``): keeping a store healthy
and small without ever adopting.

``verify`` checks every record (parse, signature, that it names its own
resource), the transitions along each record chain, stale ``<ref>.lock``
files, and this worktree's receipts. ``--repair`` fixes only what cannot hurt
a live holder: it removes stale locks and dead receipts, and replaces a record
that fails verification with a signed tombstone *only once the claim it may
describe can no longer be active*. It never touches an active claim.

The retention pass (:func:`retain`) applies the policy of :mod:`gitlease.retention`:
it removes old tombstones (leaving revision floors), trims each resource's reflog to
the history the policy keeps, removes the files that serve nothing any more, and runs
``git gc`` on the store so that git drops what nothing names. Record chains are read
through one ``git cat-file --batch`` process per command (:meth:`Store.blob_reader`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from . import floors, guards, highwater, keepers, receiptdir, retention
from . import receipts as receipts_mod
from ._files import atomic_write, flock_polling, is_stale, lock_age, mtime, open_lock_file
from ._gitread import Snapshot, named_ids, parse_reflog
from .claim import Claim, is_expired, judge
from .clock import Now, parse_duration_ms, parse_rfc3339, rfc3339
from .errors import CompareAndSwapFailed, GitleaseError, StoreError, UsageError
from .ownership import receipt_dir, unwritten_members
from .reads import newest_written
from .record import RELEASED, Record, SigningKey, new_claim_id, new_token, parse
from .refname import PREFIX, decode
from .sightings import Sightings
from .store import GC_GRACE, Store

#: Reads one blob: (bytes, None) or (None, why not) (:meth:`Store.blob_reader`).
BlobRead = Callable[[str], tuple[bytes | None, str | None]]
#: How long the pass waits for a resource's guard before it leaves that resource for the
#: next pass: a write holds it for milliseconds, an ``exec`` for as long as its command runs.
_GUARD_WAIT_SECONDS = 0.5


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
    report.problems.extend(_orphan_receipts(store, current, now, repair))
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
        if prev.boot_id == cur.boot_id and start > prev.boot_expires_ms:
            return "an expired claim was renewed or released"
        return None
    if cur.revision <= prev.revision:
        return "the revision did not increase"
    if cur.note and cur.note.startswith("verify --repair"):
        return None
    if prev.state != RELEASED and prev.boot_id == cur.boot_id:
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
        _max_revision_in_reflog(store, snap.ref, read_blob),
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
        _max_revision_in_reflog(store, snap.ref, read_blob),
        store.revision_floor(snap.ref),
    ]
    shown = claim.record.revision if claim.record else 0
    note = f"verify --repair: the ref was moved back to revision {shown}, below {revision}"
    previous = newest.oid if newest is not None else snap.oid
    _write_repair(store, snap, _signed_tombstone(claim.resource, max(known) + 1, note, previous,
                                                 now), problem)  # fmt: skip


def _may_be_live(record: Record, now: Now, first_seen_ms: int | None) -> bool:
    """Whether ``record`` may still describe a live claim, judged without trusting another
    host's clock: on this boot's clock (or from when this host first saw it); a record of
    another boot never seen here counts as live for a whole TTL past its own expiry on this
    host's wall clock (a repair can wait)."""
    if record.state == RELEASED:
        return False
    if record.boot_id == now.boot or first_seen_ms is not None:
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
    try:
        with store.guard(snap.ref):
            store.compare_and_swap(
                snap.ref, snap.oid, tombstone.raw or b"", "gitlease verify --repair"
            )
    except CompareAndSwapFailed:
        problem.message += "; it changed during repair, run verify again"
        return
    highwater.raise_to(store.git_dir, snap.ref, tombstone.revision)
    problem.repaired = True
    problem.message += f"; replaced by a tombstone at revision {tombstone.revision}"


def _max_revision_in_reflog(store: Store, ref: str, read_blob: BlobRead) -> int:
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


def _orphan_receipts(
    store: Store, current: dict[str, Claim], now: Now, repair: bool
) -> list[Problem]:
    """Receipts here whose claim is not the current one: they can never prove anything again."""
    directory = receipt_dir(store)
    problems: list[Problem] = []
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
        young = time.time() - mtime(path) < 60  # an acquire may be in flight
        if rec.token and young:
            continue
        problem = Problem(
            "orphan-receipt",
            str(path),
            f"receipt for {', '.join(c.resource for c in rec.claims)} names no current claim",
        )
        if repair:
            receipts_mod.remove(path)
            problem.repaired = True
            problem.message += "; removed"
        problems.append(problem)
    return problems


def _is_current(claim: Claim | None, claim_id: str) -> bool:
    return claim is not None and claim.record is not None and claim.record.claim_id == claim_id


@dataclass
class Retention:
    """What one retention pass did (``prune --json``, docs/reference/json.md)."""

    policy: retention.Policy
    #: Resources whose tombstone was removed (a revision floor carries their last revision).
    pruned: list[str] = field(default_factory=list)
    #: Resources whose history was trimmed, and the records that expired from it.
    trimmed: int = 0
    expired: int = 0
    #: Files (or entries) removed because they served nothing any more.
    removed: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("reflogs", "floors", "guards", "sightings", "keepalive", "receipts"), 0
        )
    )
    #: Floors kept (in ``floors/packed``), for resources whose ref is gone.
    floors: int = 0
    #: Resources left for the next pass: their guard was held (a write, an ``exec``).
    busy: list[str] = field(default_factory=list)
    gc: bool = False
    #: Why nothing was done (``--auto`` only), else None.
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The pass as ``prune --json`` prints it."""
        return {
            "pruned": self.pruned,
            "trimmed": self.trimmed,
            "expired_records": self.expired,
            "removed": dict(self.removed),
            "floors": self.floors,
            "busy": self.busy,
            "gc": self.gc,
            "skipped": self.skipped,
            "policy": self.policy.to_dict(),
        }

    def describe(self) -> str:
        """The pass for people, one line per kind of work."""
        if self.skipped:
            return f"nothing done: {self.skipped}"
        removed = ", ".join(f"{n} {kind}" for kind, n in self.removed.items() if n)
        lines = [
            f"pruned {len(self.pruned)} tombstone(s)",
            f"expired {self.expired} record(s) from the history of {self.trimmed} resource(s)",
            f"removed {removed} (they served nothing)" if removed else "removed no file",
            f"kept {self.floors} revision floor(s)",
        ]
        if self.busy:
            lines.append(f"left for the next pass (busy): {', '.join(sorted(set(self.busy)))}")
        lines.append("git gc: done" if self.gc else "git gc: not run")
        return "\n".join(lines)


def prune(store: Store, *, older_than: str | int | None = None) -> list[str]:
    """Run the retention pass (:func:`retain`); the resources whose tombstone it removed.

    ``older_than``: remove tombstones released longer ago than this (default: the
    store's ``gitlease.tombstoneAge``, 7 days).
    """
    return retain(store, older_than=older_than).pruned


def retain(
    store: Store,
    *,
    older_than: str | int | None = None,
    auto: bool = False,
    grace: str = GC_GRACE,
) -> Retention:
    """Apply the store's retention policy (:mod:`gitlease.retention`) once.

    In order, each resource under its guard (a busy one is left for the next pass):
    tombstones older than ``older_than`` are removed after their revision floor is
    written; each reflog is trimmed to what the policy keeps (never the current record,
    nor an active claim's records back to its acquire; a record that does not verify
    keeps its whole history for ``verify --repair``); reflogs of refs that are gone are
    removed once a floor holds their highest revision. Then what serves nothing goes:
    floors that a ref carries again (the rest are packed into one file), guards of refs
    that do not exist and that nobody holds, sightings of records no longer current,
    registry entries of keepalive processes that ended, and this worktree's spent and
    orphaned receipts. Last, ``git gc`` drops the objects nothing names (objects younger
    than ``grace`` stay: a write in flight stores its blob first).

    Revisions never decrease: a ref is removed only after its floor is durable, and a
    floor goes only while its ref shows a higher revision. ``auto``: the daily pass that
    writes start (:meth:`Store.start_retention_if_due`): nothing when ``gitlease.autoPrune``
    is false or a pass is running; through a remote, only this host's mirror is trimmed
    (tombstones are the remote's) and no receipt is looked at. Without ``auto``, a remote
    store refuses (:meth:`Store.ensure_prunable`).
    """
    policy = retention.read_policy(store.git_dir)
    if older_than is None:
        tombstone_ms = policy.tombstone_ms
    elif older_than == retention.NEVER:
        tombstone_ms = None
    else:
        tombstone_ms = parse_duration_ms(older_than, name="--older-than")
    result = Retention(policy)
    if auto and not policy.auto:
        result.skipped = "gitlease.autoPrune is false"
        _write_summary(store, result)
        return result
    try:
        store.ensure_prunable()
        own_refs = True
    except UsageError:
        if not auto:
            raise
        own_refs = False  # a remote's mirror: its refs and tombstones are the remote's
    with _one_pass(store, wait=0.0 if auto else 60.0) as running:
        if not running:
            result.skipped = "another retention pass is running"
            return result
        now = Now.read()
        claims = _retain(store, policy, tombstone_ms if own_refs else None, now, result)
        if own_refs and not auto:
            _tidy_receipts(store, claims, now, result)
        store.collect_garbage(grace)
        result.gc = True
        _write_summary(store, result)
    return result


def _retain(
    store: Store,
    policy: retention.Policy,
    tombstone_ms: int | None,
    now: Now,
    result: Retention,
) -> dict[str, Claim]:
    """Everything but receipts and gc; the claims as they are after it (ref -> claim)."""
    snaps = store.read_all()
    with store.blob_reader() as read_blob:
        if tombstone_ms is not None:
            _remove_tombstones(store, snaps, now, tombstone_ms, read_blob, result)
            if result.pruned:
                snaps = store.read_all()
        claims = {s.ref: judge(s, now) for s in snaps}
        for snap in snaps:
            _trim_history(store, snap, claims[snap.ref], policy, now, read_blob, result)
        _remove_orphan_reflogs(store, set(claims), read_blob, result)
    _tidy_floors(store, claims, result)
    _tidy_guards(store, set(claims), result)
    present = {s.ref: s.oid for s in snaps if s.oid is not None}
    result.removed["sightings"] = Sightings(store.git_dir / "worklease" / "sightings").forget(
        present
    )
    result.removed["keepalive"] = keepers.forget_dead(store.git_dir)
    return claims


@contextmanager
def _one_pass(store: Store, *, wait: float) -> Iterator[bool]:
    """Hold the store's pass lock, one retention pass at a time; yields False if another
    pass keeps it (after ``wait`` seconds: 0 for the automatic pass, which just ends)."""
    path = store.git_dir / "worklease" / "prune.lock"
    fd = open_lock_file(path)
    try:
        if not flock_polling(fd, time.monotonic() + wait):
            if wait:
                raise StoreError(f"another retention pass kept {path} for {wait:.0f}s")
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _remove_tombstones(
    store: Store,
    snaps: list[Snapshot],
    now: Now,
    limit_ms: int,
    read_blob: BlobRead,
    result: Retention,
) -> None:
    """Remove tombstones released longer ago than ``limit_ms``, each after its floor is
    durable, then its reflog (its history goes with it; the floor keeps the revision)."""
    for snap in snaps:
        claim = judge(snap, now)
        record = claim.record
        if claim.state != "released" or record is None or record.released_at is None:
            continue
        if now.wall_ms - parse_rfc3339(record.released_at) < limit_ms:
            continue
        try:
            with store.guard(snap.ref, wait=_GUARD_WAIT_SECONDS):
                if store.read(snap.ref).oid != snap.oid:
                    continue  # written meanwhile: no longer this tombstone
                if newest_written(store, snap.ref, snap.oid, read_blob)[0] > record.revision:
                    continue  # moved back (it may hide a live claim): verify --repair's to fix
                top = max(record.revision, _max_revision_in_reflog(store, snap.ref, read_blob))
                top = max(top, highwater.read(store.git_dir, snap.ref))
                store.write_revision_floor(snap.ref, top)
                store.remove_compare_and_swap(snap.ref, snap.oid or "")
                store.delete_reflog(snap.ref)
                highwater.forget(store.git_dir, snap.ref)  # the floor holds it now
        except CompareAndSwapFailed:
            continue
        except GitleaseError:
            result.busy.append(claim.resource)
            continue
        result.pruned.append(claim.resource)


def _trim_history(
    store: Store,
    snap: Snapshot,
    claim: Claim,
    policy: retention.Policy,
    now: Now,
    read_blob: BlobRead,
    result: Retention,
) -> None:
    """Cut one resource's reflog to what the policy keeps (:func:`retention.first_kept`)."""
    if claim.state == "invalid" or snap.oid is None:
        return  # verify --repair takes its revision from this history: all of it stays
    now_s = now.wall_ms / 1000
    lines = parse_reflog(store.read_reflog(snap.ref))
    protected = frozenset({snap.oid})
    if retention.first_kept(lines, policy, now_s, protected) == 0:
        return  # the cheap look, without the guard: most resources have nothing to drop
    if claim.state == "active":
        protected = _claim_records(claim, snap.oid, read_blob)
    dropped = 0

    def change(data: bytes) -> bytes | None:
        nonlocal dropped
        current = parse_reflog(data)
        dropped = retention.first_kept(current, policy, now_s, protected)
        return retention.rewritten(current, dropped) if dropped else None

    try:
        with store.guard(snap.ref, wait=_GUARD_WAIT_SECONDS):
            if store.read(snap.ref).oid != snap.oid:
                result.busy.append(claim.resource)  # written meanwhile: judged next time
                return
            changed = store.rewrite_reflog(snap.ref, change)
    except GitleaseError:
        result.busy.append(claim.resource)
        return
    if changed:
        result.trimmed += 1
        result.expired += dropped


def _claim_records(claim: Claim, oid: str, read_blob: BlobRead) -> frozenset[str]:
    """The object ids of an active claim's records, from the current one back to its
    acquire: none of them may expire while the claim lives."""
    found = {oid}
    record = claim.record
    while record is not None and record.previous is not None and record.previous not in found:
        data, _problem = read_blob(record.previous)
        if data is None:
            break
        try:
            prev = parse(data)
        except GitleaseError:
            break
        if prev.claim_id != record.claim_id:
            break  # the record before the acquire: another claim's
        found.add(record.previous)
        record = prev
    return frozenset(found)


def _remove_orphan_reflogs(
    store: Store, refs: set[str], read_blob: BlobRead, result: Retention
) -> None:
    """Reflogs of refs that no longer exist (libgit2 leaves them when it deletes a ref, and
    an acquire that lost its race leaves an empty one): removed once a floor holds the
    highest revision they name, so that the next acquire still continues above it."""
    for ref in store.reflog_refs():
        if ref in refs:
            continue
        try:
            with store.guard(ref, wait=_GUARD_WAIT_SECONDS):
                if store.read(ref).oid is not None:
                    continue  # it exists (again), or cannot be read: not an orphan
                top = _max_revision_in_reflog(store, ref, read_blob)
                top = max(top, highwater.read(store.git_dir, ref))
                if top > store.revision_floor(ref):
                    store.write_revision_floor(ref, top)
                store.delete_reflog(ref)
                highwater.forget(store.git_dir, ref)  # the floor holds it now
        except GitleaseError:
            result.busy.append(ref)
            continue
        result.removed["reflogs"] += 1


def _tidy_floors(store: Store, claims: dict[str, Claim], result: Retention) -> None:
    """Drop the floors whose ref exists again with a higher revision (its record carries
    the revision now), and fold the others into ``floors/packed`` (:mod:`gitlease.floors`)."""
    by_name = {floors.digest(ref): claim for ref, claim in claims.items()}

    def carried(name: str, revision: int) -> bool:
        claim = by_name.get(name)
        return claim is not None and claim.record is not None and claim.record.revision > revision

    loose = floors.loose(store.git_dir)
    packed = floors.read_packed(store.git_dir)
    keep = {name: rev for name, rev in packed.items() if not carried(name, rev)}
    dropped = len(packed) - len(keep)
    for name, revision in loose.items():
        if carried(name, revision):
            dropped += 1
        else:
            keep[name] = max(revision, keep.get(name, 0))
    try:
        if keep != packed:
            floors.write_packed(store.git_dir, keep)  # durable before any loose file goes
        for name in loose:
            floors.remove_loose(store.git_dir, name)
    except OSError as exc:
        raise StoreError(f"cannot pack the revision floors: {exc.strerror or exc}") from None
    result.removed["floors"] += dropped
    result.floors = len(keep)


def _tidy_guards(store: Store, refs: set[str], result: Retention) -> None:
    """Remove the guard files of resources without a ref that nobody holds (a running
    ``exec``, an acquire in flight): a guard is only a file to lock, made again on use."""
    wanted = {store.guard_path(ref).name for ref in refs}
    directory = guards.directory(store.git_dir)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name in wanted or len(name) != 40 or name.startswith("."):
            continue
        if guards.remove_unheld(directory / name):
            result.removed["guards"] += 1


def _tidy_receipts(store: Store, claims: dict[str, Claim], now: Now, result: Retention) -> None:
    """This worktree's receipts that can prove nothing: released more than a day ago, or
    naming no current claim (the rules of acquire and of ``verify --repair``)."""
    removed = receiptdir.sweep(receipt_dir(store), limit=1 << 30, every_hour=True)
    removed += sum(p.repaired for p in _orphan_receipts(store, claims, now, repair=True))
    result.removed["receipts"] += removed


def _write_summary(store: Store, result: Retention) -> None:
    """``<store>/worklease/last-prune``: what the last pass did; its time restarts the day
    after which writes start the next one. Best effort."""
    doc = {"finished_at": rfc3339(Now.read().wall_ms), **result.to_dict()}
    with suppress(OSError):
        atomic_write(
            store.git_dir / "worklease" / "last-prune",
            (json.dumps(doc, indent=2) + "\n").encode("utf-8"),
            durable=False,
            mode=0o644,
        )
