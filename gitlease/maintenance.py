"""``verify`` (and ``--repair``) and ``prune``: keeping a store healthy without ever adopting.

``verify`` checks every record (parse, signature, that it names its own
resource), the transitions along each record chain, stale ``<ref>.lock``
files, and this worktree's receipts. ``--repair`` fixes only what cannot hurt
a live holder: it removes stale locks and dead receipts, and replaces a record
that fails verification with a signed tombstone *only once the claim it may
describe can no longer be active*. It never touches an active claim.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from . import receipts as receipts_mod
from ._files import is_stale, lock_age, mtime
from ._gitread import Snapshot
from .claim import Claim, is_expired, judge
from .clock import Now, parse_duration_ms, parse_rfc3339, rfc3339
from .errors import CompareAndSwapFailed, GitleaseError
from .ownership import receipt_dir
from .record import RELEASED, Record, SigningKey, new_claim_id, new_token, parse
from .refname import PREFIX, decode
from .store import Store


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
                _repair_record(store, snap, resource, problem)
            continue
        for message in _illegal_transitions(store, claim):
            report.problems.append(Problem("illegal-transition", snap.ref, message, resource))
    report.problems.extend(_stale_locks(store, repair))
    report.problems.extend(_orphan_receipts(store, current, now, repair))
    return report


def _illegal_transitions(store: Store, claim: Claim) -> list[str]:
    """Walk back along the chain: every step must be an acquire, a renewal or a release."""
    problems: list[str] = []
    record = claim.record
    steps = 0
    while record is not None and record.previous is not None and steps < 1000:
        data, _problem = store.read_blob(record.previous)
        if data is None:
            break
        try:
            prev = parse(data)
        except GitleaseError:
            break  # a repaired or pruned predecessor: the chain's known part ends here
        why = _transition_problem(prev, record)
        if why:
            problems.append(
                f"{claim.resource}: revision {prev.revision} -> {record.revision}: {why}"
            )
        record = prev
        steps += 1
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


def _repair_record(store: Store, snap: Snapshot, resource: str, problem: Problem) -> None:
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
    revision = (
        max([_max_revision_in_reflog(store, snap.ref), suspect.revision if suspect else 0]) + 1
    )
    token = new_token()
    key = SigningKey(token)
    stamp = rfc3339(now.wall_ms)
    tombstone = Record(
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
        note=f"verify --repair: {problem.message}"[:500],
        checkpoint=None,
        public_key=key.public_hex,
        previous=snap.oid,
    ).signed(key)
    try:
        with store.guard(snap.ref):
            store.compare_and_swap(
                snap.ref, snap.oid, tombstone.raw or b"", "gitlease verify --repair"
            )
    except CompareAndSwapFailed:
        problem.message += "; it changed during repair, run verify again"
        return
    problem.repaired = True
    problem.message += f"; replaced by a tombstone at revision {revision}"


def _max_revision_in_reflog(store: Store, ref: str) -> int:
    best = 0
    try:
        lines = (
            (store.git_dir / "logs" / ref)
            .read_text(encoding="utf-8", errors="replace")
            .splitlines()
        )
    except OSError:
        return 0
    for line in lines:
        parts = line.split(" ", 2)
        if len(parts) < 2:
            continue
        data, _ = store.read_blob(parts[1])
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
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return problems
    for name in names:
        path = directory / name
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            rec = receipts_mod.read(path)
        except GitleaseError as exc:
            problems.append(Problem("orphan-receipt", str(path), str(exc)))
            continue
        if rec.store != str(store.git_dir):
            continue  # a claim in another store (--store): verify that store instead
        live = [c for c in rec.claims if _is_current(current.get(c.ref), c.claim_id)]
        if rec.bundle_id and live and len(live) < len(rec.claims):
            missing = sorted(c.resource for c in rec.claims if c not in live)
            problems.append(
                Problem(
                    "partial-bundle",
                    str(path),
                    f"bundle {rec.bundle_id} holds {len(live)} of {len(rec.claims)} members; "
                    f"not held: {', '.join(missing)}. The held members expire by their TTL",
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


def prune(store: Store, *, older_than: str | int = "7d") -> list[str]:
    """Drop tombstones released longer ago than ``older_than``; revisions keep growing.

    The resource's last revision is written to ``<store>/worklease/floors/``
    (fsynced) before its ref is removed, under the resource's guard, so the
    next acquire continues from it.
    """
    limit_ms = parse_duration_ms(older_than, name="--older-than")
    store.ensure_prunable()
    now = Now.read()
    dropped = []
    for snap in store.read_all():
        claim = judge(snap, now)
        record = claim.record
        if claim.state != "released" or record is None or record.released_at is None:
            continue
        if now.wall_ms - parse_rfc3339(record.released_at) < limit_ms:
            continue
        with store.guard(snap.ref):
            if store.read(snap.ref).oid != snap.oid:
                continue
            store.write_revision_floor(snap.ref, record.revision)
            try:
                store.remove_compare_and_swap(snap.ref, snap.oid or "")
            except CompareAndSwapFailed:
                continue
        dropped.append(claim.resource)
    return dropped
