"""Acquiring the first free of a list of candidates (``acquire --first-free``).

One look reads every candidate's ref at once and passes over the held ones cheaply; only
the candidate being taken gets the guard, the judgement and the compare-and-swap of an
ordinary acquire (:mod:`gitlease.claims.acquire`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CompareAndSwapFailed, CorruptRecordError, HeldError
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, judge, seems_held
from ..model.clock import Now, format_duration
from ..receipts import reservation
from ..receipts.receipt import Receipt
from ..scopes.acquiring import ScopesOverlap
from ..state import guards as guards_mod
from ..state.waitqueue import Line
from ..store.base import Store
from . import ownership
from .acquire import check_bindings, finish_acquire, take
from .engine import CAS_ATTEMPTS
from .request import AcquireRequest
from .waiting import Waiting, retry_until


def acquire_first_free(
    store: Store, request: AcquireRequest, on_wait: Callable[[Waiting], None] | None = None
) -> tuple[Claim, Receipt, list[Claim]]:
    """Take one claim: the first of the candidates (``request.resources``, in order) that
    can be acquired. (the claim, its receipt, the invalid candidates passed over before it.)

    Each look reads every candidate's ref at once (:meth:`~gitlease.store.base.Store.read_many`)
    and passes over the held ones without checking their signatures
    (:func:`~gitlease.model.claim.seems_held`); only the candidate being taken gets the guard,
    the judgement under it and the compare-and-swap. HELD, naming every candidate, when
    none can be taken; with ``--wait``, until one can.
    """
    store.prepare_write()
    if request.receipt is not None:  # a path that must not be written: refused at once
        reservation.check_explicit_location(request.receipt, str(store.git_dir))
    check_bindings(store, request)  # likewise, before anything is written
    line = Line(store.git_dir, request.refs)
    skipped: dict[str, Claim] = {}

    def attempt() -> tuple[Claim, Receipt]:
        claim, rec = _take_first_free(store, request, line, skipped)
        return claim.replace(bound=finish_acquire(store, request, rec, [claim])), rec

    claim, rec = retry_until(
        request.wait_ms, attempt, on_wait, line=line, longest_pause=store.wait_poll_seconds
    )
    return claim, rec, list(skipped.values())


def _take_first_free(
    store: Store, request: AcquireRequest, line: Line, skipped: dict[str, Claim]
) -> tuple[Claim, Receipt]:
    """One look over the candidates: take the first that can be taken, or raise HELD.

    A candidate whose guard another caller holds is most likely being taken right now:
    the next one is tried at once, and only a fresh look that still shows it free waits
    for its guard. A lost race (the guarded read shows a new holder, or the
    compare-and-swap fails) starts again from a fresh look.
    """
    guard_wait = 0.0
    rechecked = False
    for _look in range(len(request.refs) + CAS_ATTEMPTS):
        skipped.clear()
        now = Now.read()
        if request.receipt is not None:  # a live one is refused here, not taken for a lost race
            with reservation.reserve(request.receipt, str(store.git_dir)) as held:
                if held is not None:
                    ownership.refuse_live_explicit(store, held, now)
        snaps = store.read_many(request.refs)
        ahead = line.ahead()
        outcome = "none"
        for resource, snap in zip(request.resources, snaps, strict=True):
            if ahead.get(snap.ref) or seems_held(snap, now, resource):
                continue
            claim = judge(snap, now, resource)
            if claim.state == "invalid":
                skipped[snap.ref] = claim
                continue
            if claim.state == "active":
                continue
            one = request.replace(resources=(resource,), refs=(snap.ref,))
            guarded = False
            try:
                with store.guard(snap.ref, wait=guard_wait):
                    guarded = True
                    with reservation.reserve(request.receipt, str(store.git_dir)) as held:
                        written, rec = take(store, one, held)
                return written[0], rec
            except ScopesOverlap:
                raise  # (a scope, not the candidate: the same for every other candidate)
            except HeldError:
                if guarded:
                    outcome = "lost"
                    break
                outcome = "busy"
            except CorruptRecordError as exc:  # unreadable now, or its ref was moved back
                oid = store.read(snap.ref).oid
                skipped[snap.ref] = Claim(resource, snap.ref, "invalid", oid=oid, problem=str(exc))
            except CompareAndSwapFailed:
                store.refresh()
                outcome = "lost"
                break
        if outcome == "busy":
            guard_wait = guards_mod.GUARD_WAIT_SECONDS
        elif outcome == "none":
            if rechecked or not store.recheck_refusal():
                raise _none_free(request, snaps, ahead, now, queued=line.ticket is not None)
            rechecked = True
    raise _none_free(request, snaps, ahead, Now.read(), queued=line.ticket is not None)


def _none_free(
    request: AcquireRequest,
    snaps: list[Snapshot],
    ahead: dict[str, int],
    now: Now,
    *,
    queued: bool,
) -> HeldError:
    """HELD naming every candidate: its claim, and how many wait for it ahead of the caller."""
    claims = [judge(s, now, r) for s, r in zip(snaps, request.resources, strict=True)]
    docs = []
    parts = []
    for claim in claims:
        doc = claim.to_dict()
        waiting = ahead.get(claim.ref, 0) if claim.state in ("free", "released", "expired") else 0
        if waiting:
            doc["waiting"] = waiting
        docs.append(doc)
        parts.append(_in_words(claim, waiting))
    shown = "; ".join(parts[:_NAMED])
    if len(parts) > _NAMED:
        shown += f"; and {len(parts) - _NAMED} more"
    active = [c for c in claims if c.state == "active"]
    soonest = min(active, key=lambda c: c.expires_in_ms or 0) if active else None
    n = len(claims)
    what = "the candidate" if n == 1 else f"any of the {n} candidates"
    advice = "" if queued else ". Choose other ready work, or wait with --wait"
    return HeldError(f"cannot take {what} now: {shown}{advice}", holder=soonest, claims=docs)


#: How many candidates a HELD message names (the JSON document names every one).
_NAMED = 5


def _in_words(claim: Claim, waiting: int) -> str:
    r = claim.record
    if claim.state == "active" and r is not None:
        left = format_duration(claim.expires_in_ms or 0)
        return f"{claim.resource} held by {r.owner} ({left} left)"
    if claim.state == "invalid":
        return f"{claim.resource} has an invalid record ({claim.problem}), never granted over"
    if waiting:
        return f"{claim.resource} is {claim.state}, {waiting} waiting for it before you"
    return f"{claim.resource} is {claim.state}, being taken by another caller"
