"""What processes that are gone leave behind: stale ``<ref>.lock`` files, and receipts that
can never prove anything again.

``verify`` reports them and ``--repair`` removes them; the retention pass removes the
receipts too. A lock is stale once it is older than a write can take
(:func:`gitlease._util.files.is_stale`). A receipt is orphaned once its claim is not the
current record of any of its refs; before one is removed it is judged again under the
guards of its resources (:func:`_remove_if_orphan`), since the snapshot the pass judged by
may be old. Neither ever touches a ref.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from .._util import testing as _testing
from .._util.files import is_stale, lock_age, mtime
from ..claims.ownership import receipt_dir, unwritten_members
from ..errors import GitleaseError
from ..model.claim import Claim, judge
from ..model.clock import Now
from ..model.refname import PREFIX
from ..receipts import bindings as bindings_mod
from ..receipts import directory as receiptdir
from ..receipts import receipt as receipts_mod
from ..state import guards
from ..store.base import Store
from .problems import Problem

#: The claim id of a ref's current record, if that record verifies (else None).
CurrentClaim = Callable[[str], str | None]


def stale_locks(store: Store, repair: bool) -> list[Problem]:
    """``<ref>.lock`` files old enough that no write holds them; with ``repair``, removed
    under the resource's guard."""
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
    store: Store, current: CurrentClaim, repair: bool, *, spent: bool = False
) -> list[Problem]:
    """Receipts here whose claim is not the current one: they can never prove anything again.

    ``current``: the claim id each ref's current record shows, as the caller judged it.
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
        live = [c for c in rec.claims if current(c.ref) == c.claim_id]
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


def _is_current(claim: Claim, claim_id: str) -> bool:
    return claim.record is not None and claim.record.claim_id == claim_id
