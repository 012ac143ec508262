"""The engine of every owned write, over one ref or many: acquire, renew, release, check.

Every ownership decision follows one pattern: take the guards of every ref
involved (in ref order, so two bundles never deadlock), read the current
records, decide from exactly what was read, then compare-and-swap every ref
against the object id that was read, in one reference transaction (one atomic
push for a remote store). Nothing here overwrites a record it could not verify.
When a ref moved between the read and the write, the decision is made again
from a fresh read (:func:`with_cas_retry`); ``--wait`` retries HELD answers
with backoff and jitter (:func:`retry_until`).

The single-resource commands (:mod:`gitlease.lease`) and bundles
(:mod:`gitlease.bundle`) are thin wrappers over these functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import TypeVar

from . import bindings as bindings_mod
from . import guards as guards_mod
from . import highwater, keepers, ownership, reservation
from ._gitread import Snapshot
from .claim import (
    Claim,
    corrupt_error,
    held_error,
    is_expired,
    judge,
    rolled_back_error,
    seems_held,
)
from .clock import Now, format_duration, rfc3339
from .errors import (
    AmbiguousError,
    CompareAndSwapFailed,
    CorruptRecordError,
    GitleaseError,
    HeldError,
    LostError,
    StoreError,
)
from .receipts import ClaimRef, Receipt
from .record import (
    HELD,
    RELEASED,
    Record,
    SigningKey,
    check_text,
    new_bundle_id,
    new_claim_id,
    new_token,
)
from .refname import encode
from .request import AcquireRequest
from .store import Store
from .value import Value
from .waiting import Waiting, retry_until
from .waitqueue import Line

#: How often a decision is made again when the ref keeps moving under it.
CAS_ATTEMPTS = 5
T = TypeVar("T")


# ------------------------------------------------------------------ guards and retries


@contextmanager
def guards(store: Store, refs: Iterable[str]) -> Iterator[None]:
    """Hold the guards of several refs at once, always taken in ref order (no deadlock)."""
    with ExitStack() as stack:
        for ref in sorted(set(refs)):
            stack.enter_context(store.guard(ref))
        yield


def with_cas_retry(attempt: Callable[[], T], refresh: Callable[[], None] | None = None) -> T:
    """Decide again when the ref moved under us (with a fresh look at the store first)."""
    for i in range(CAS_ATTEMPTS):
        try:
            return attempt()
        except CompareAndSwapFailed:
            if i == CAS_ATTEMPTS - 1:
                raise
            time.sleep(0.01 * (i + 1))
            if refresh is not None:
                refresh()
    raise AssertionError("unreachable")


# ------------------------------------------------------------------ acquire


def acquire_claims(
    store: Store, request: AcquireRequest, on_wait: Callable[[Waiting], None] | None = None
) -> tuple[list[Claim], Receipt]:
    """Take every resource of ``request`` or none: (the new claims in order, the receipt)."""
    store.prepare_write()
    if request.receipt is not None:  # a path that must not be written: refused at once
        reservation.check_explicit_location(request.receipt, str(store.git_dir))
    line = Line(store.git_dir, request.refs)
    _check_bindings(store, request)  # likewise, before anything is written

    def attempt() -> tuple[list[Claim], Receipt]:
        _refuse_early(store, request, line)
        reserve = reservation.reserve(request.receipt, str(store.git_dir))
        with guards(store, request.refs), reserve as held:
            written, rec = _take(store, request, held)
        bound = _finish(store, request, rec, written)
        return [c.replace(bound=bound) for c in written], rec

    return retry_until(
        request.wait_ms,
        lambda: with_cas_retry(attempt, refresh=store.refresh),
        on_wait,
        line=line,
        longest_pause=store.wait_poll_seconds,
    )


def _binds(store: Store, request: AcquireRequest) -> bool:
    return request.bind and store.location.worktree_git_dir is not None


def _check_bindings(store: Store, request: AcquireRequest) -> None:
    """Refuse a bindings directory that cannot be used before any claim is written (a
    directory others can write is USAGE): a failure after the write must be undone."""
    wt = store.location.worktree_git_dir
    if _binds(store, request) and wt is not None:
        bindings_mod.check_bindings_dir(wt)


def _finish(store: Store, request: AcquireRequest, rec: Receipt, written: list[Claim]) -> bool:
    """After the write: bind this worktree (True if it did), tidy old receipts.

    The claims are written by now, so no failure may leave them behind with an exit
    code that says otherwise: if binding fails, they are released again and the
    failure raised (AMBIGUOUS, naming them, if even that fails: :func:`undo_acquire`).
    Tidying is housekeeping, and never fails an acquire.
    """
    bound = _binds(store, request)
    if bound:
        try:
            ownership.bind_all(store, rec, written)
        except BaseException as exc:
            undo_acquire(store, rec, exc)
            undone = _undone(exc)
            if undone is exc:
                raise
            raise undone from exc
    if request.receipt is None:
        with suppress(OSError, GitleaseError):
            ownership.tidy(rec)
    return bound


def undo_acquire(store: Store, rec: Receipt, cause: BaseException) -> None:
    """Release the claims of ``rec``, just written, after ``cause`` failed what followed
    the write (binding, a keepalive, the output): the caller then reports ``cause`` with
    no claim left behind. If the release fails too, AMBIGUOUS naming every claim: they
    stay active until they expire, and only the receipt can release them."""
    try:
        release_claims(store, rec, list(rec.claims), None)
    except BaseException as exc:
        ids = ", ".join(f"{c.claim_id} on {c.resource}" for c in rec.claims)
        raise AmbiguousError(
            f"the acquire failed after the claim was written ({_why(cause)}), and releasing "
            f"it again failed too ({_why(exc)}): claim {ids} stays active until it expires. "
            f"Release it with `gitlease {'bundle ' if rec.bundle_id else ''}release --receipt "
            f"{rec.path}`"
        ) from exc


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _undone(exc: BaseException) -> BaseException:
    """``exc`` as reported once the claims it followed were released again."""
    if isinstance(exc, GitleaseError):
        undone = type(exc)(f"{exc.message}; the claim was released again")
        undone.claim = exc.claim
        return undone
    if isinstance(exc, OSError):
        return StoreError(f"{_why(exc)} after the claim was written; it was released again")
    return exc


class _Members(Value):
    """The members' refs as read, with their high-water marks read *before* them: a mark
    read after the ref could be a racer's newer revision, and make the ref look moved back."""

    __slots__ = ("marks", "snaps")
    marks: list[int]
    snaps: list[Snapshot]


def _read_members(store: Store, refs: tuple[str, ...]) -> _Members:
    marks = [highwater.read(store.git_dir, ref) for ref in refs]
    return _Members(marks, [store.read(ref) for ref in refs])


def _judge_members(
    store: Store, request: AcquireRequest, members: _Members, now: Now
) -> list[Claim]:
    """The members' claims, or HELD / STORE if any of them cannot be taken."""
    claims = [judge(s, now, r) for s, r in zip(members.snaps, request.resources, strict=True)]
    for claim, mark in zip(claims, members.marks, strict=True):
        if claim.state == "invalid":
            raise corrupt_error(claim)
        _refuse_rolled_back(store, claim, mark)
        if claim.state == "active":
            raise held_error(claim, ownership.own_receipt_for(store, claim, request.receipt))
    return claims


def _refuse_rolled_back(store: Store, claim: Claim, mark: int) -> None:
    """STORE if the ref shows a record below ``mark``, the revision this host last wrote or
    saw for it (:mod:`gitlease.highwater`); a higher one seen here raises the mark."""
    if claim.record is None:
        return
    if claim.record.revision < mark:
        raise rolled_back_error(claim, mark)
    if claim.record.revision > mark:  # seen here (another host's write, an older version's)
        highwater.raise_to(store.git_dir, claim.ref, claim.record.revision)


def _refuse_early(store: Store, request: AcquireRequest, line: Line) -> None:
    """Refuse without the guard when what the store shows cannot be taken (on a fresh look
    if the store's view can be behind), or when callers on this host wait for it first."""
    try:
        claims = _judge_members(store, request, _read_members(store, request.refs), Now.read())
    except (HeldError, CorruptRecordError):
        if not store.recheck_refusal():
            raise
        claims = _judge_members(store, request, _read_members(store, request.refs), Now.read())
    ahead = line.ahead()
    for claim in claims:
        if ahead.get(claim.ref):
            raise _queued_error(claim, ahead[claim.ref], queued=line.ticket is not None)


def _queued_error(claim: Claim, ahead: int, *, queued: bool) -> HeldError:
    """HELD for a resource that could be taken, but that waiters ahead of the caller get first."""
    who = f"{ahead} caller{'s' if ahead != 1 else ''} on this host"
    if queued:
        message = f"{claim.describe()}; {who} waiting for it before you"
    else:
        message = (
            f"{claim.describe()}, but {who} {'is' if ahead == 1 else 'are'} waiting for it and "
            "go first. Choose other ready work, or wait in line with --wait"
        )
    return HeldError(message, claim=claim.to_dict())


def _take(
    store: Store, request: AcquireRequest, held: reservation.Reserved | None
) -> tuple[list[Claim], Receipt]:
    """Under the guards (and ``held``, the explicit receipt path reserved): read, judge,
    write the receipt, then compare-and-swap every ref."""
    now = Now.read()
    members = _read_members(store, request.refs)
    try:
        claims = _judge_members(store, request, members, now)
    except CorruptRecordError:  # a remote store's mirror may be behind its own marks
        if not store.recheck_refusal():
            raise
        now = Now.read()
        members = _read_members(store, request.refs)
        claims = _judge_members(store, request, members, now)
    snaps = members.snaps
    if held is not None:
        ownership.refuse_live_explicit(store, held, now)
    token = new_token()
    key = SigningKey(token)
    bundle_id = new_bundle_id() if request.bundle else None
    records = [
        _new_record(store, request, claim, snap, mark, key, now, bundle_id)
        for claim, snap, mark in zip(claims, snaps, members.marks, strict=True)
    ]
    claim_refs = tuple(
        ClaimRef(r.resource, ref, r.claim_id, r.revision)
        for r, ref in zip(records, request.refs, strict=True)
    )
    path = request.receipt or ownership.default_receipt_path(
        store, request.refs[0], records[0].claim_id, bundle_id
    )
    rec = Receipt(path, str(store.git_dir), token, claim_refs, bundle_id)
    ownership.write_new(store, rec, held)
    return _commit_acquire(store, rec, snaps, records, now), rec


def _new_record(
    store: Store,
    request: AcquireRequest,
    claim: Claim,
    snap: Snapshot,
    mark: int,
    key: SigningKey,
    now: Now,
    bundle_id: str | None,
) -> Record:
    previous = claim.record
    if previous is not None:
        revision = previous.revision + 1
    else:  # an absent ref continues above its prune floor and anything written here before
        revision = max(store.revision_floor(snap.ref), mark) + 1
    stamp = rfc3339(now.wall_ms)
    ttl_ms = request.ttl_ms
    return Record(
        resource=claim.resource,
        state=HELD,
        claim_id=new_claim_id(),
        owner=request.owner,
        revision=revision,
        bundle_id=bundle_id,
        mode=request.mode,
        acquired_at=stamp,
        renewed_at=stamp,
        released_at=None,
        expires_at=rfc3339(now.wall_ms + ttl_ms),
        renew_by=rfc3339(now.wall_ms + ttl_ms // 2),
        ttl_ms=ttl_ms,
        boot_id=now.boot,
        boot_expires_ms=now.boot_ms + ttl_ms,
        note=request.note,
        checkpoint=None,
        public_key=key.public_hex,
        previous=snap.oid,
    ).signed(key)


def _commit_acquire(
    store: Store, rec: Receipt, snaps: list[Snapshot], records: list[Record], now: Now
) -> list[Claim]:
    """Compare-and-swap every member; settle an error by looking at what actually landed."""
    first = records[0]
    what = f"bundle {first.bundle_id}" if first.bundle_id else first.claim_id
    message = f"gitlease acquire: {what} revision {first.revision} owner {first.owner}"
    updates = [(s.ref, s.oid, r.raw or b"") for s, r in zip(snaps, records, strict=True)]
    try:
        oids = store.compare_and_swap_many(updates, message)
    except BaseException as exc:
        if not store.outcome_readable(exc):
            raise  # the receipt stays, to settle the outcome with `show`
        landed = _landed(store, records)
        if landed == len(records):
            oids = [store.read(r.ref).oid or "" for r in rec.claims]
        elif landed == 0:
            ownership.discard(store, rec)
            raise
        else:
            raise AmbiguousError(
                f"the acquire was interrupted after {landed} of {len(records)} members were "
                f"written ({exc}); compare receipt {rec.path} with `gitlease bundle show`. "
                "The written members expire by their TTL"
            ) from exc
    for record, snap in zip(records, snaps, strict=True):  # after the write, never before
        highwater.raise_to(store.git_dir, snap.ref, record.revision)
    return [
        judge(Snapshot(s.ref, oid, r.raw), now, r.resource)
        for s, r, oid in zip(snaps, records, oids, strict=True)
    ]


def _landed(store: Store, records: list[Record]) -> int:
    count = 0
    for record in records:
        try:
            snap = store.read(encode(record.resource))
        except GitleaseError:
            continue
        if snap.data == record.raw:
            count += 1
    return count


# ------------------------------------------------------------------ the first free of a list


def acquire_first_free(
    store: Store, request: AcquireRequest, on_wait: Callable[[Waiting], None] | None = None
) -> tuple[Claim, Receipt, list[Claim]]:
    """Take one claim: the first of the candidates (``request.resources``, in order) that
    can be acquired. (the claim, its receipt, the invalid candidates passed over before it.)

    Each look reads every candidate's ref at once (:meth:`~gitlease.store.Store.read_many`)
    and passes over the held ones without checking their signatures
    (:func:`~gitlease.claim.seems_held`); only the candidate being taken gets the guard,
    the judgement under it and the compare-and-swap. HELD, naming every candidate, when
    none can be taken; with ``--wait``, until one can.
    """
    store.prepare_write()
    if request.receipt is not None:  # a path that must not be written: refused at once
        reservation.check_explicit_location(request.receipt, str(store.git_dir))
    _check_bindings(store, request)  # likewise, before anything is written
    line = Line(store.git_dir, request.refs)
    skipped: dict[str, Claim] = {}

    def attempt() -> tuple[Claim, Receipt]:
        claim, rec = _take_first_free(store, request, line, skipped)
        return claim.replace(bound=_finish(store, request, rec, [claim])), rec

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
                        written, rec = _take(store, one, held)
                return written[0], rec
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


# ------------------------------------------------------------------ owned claims


def renew_claims(
    store: Store, rec: Receipt, claim_refs: list[ClaimRef], new_ttl: int | None
) -> list[Claim]:
    """Extend each claim by its TTL (or ``new_ttl``). LOST if any expired: never revived."""
    store.prepare_write()

    def attempt() -> list[Claim]:
        with guards(store, [c.ref for c in claim_refs]):
            now = Now.read()
            snaps = _refuse_partial(store, rec, {c.ref: store.read(c.ref) for c in claim_refs})
            plans = []
            for claim_ref in claim_refs:
                snap = snaps[claim_ref.ref]
                claim = judge(snap, now, claim_ref.resource)
                record = ownership.owned_record(claim, rec, claim_ref)
                if record.state == RELEASED:
                    raise LostError(
                        f"claim {claim_ref.claim_id} on {claim.resource} was released",
                        claim=claim.to_dict(),
                    )
                if is_expired(record, now):
                    raise LostError(
                        f"{claim.describe()}: an expired claim is never renewed. Stop mutating, "
                        "preserve progress, re-acquire",
                        claim=claim.to_dict(),
                    )
                plans.append((snap, _renewed(record, now, new_ttl or record.ttl_ms, snap.oid)))
            written = _write(store, rec, plans, "heartbeat", now)
            ownership.note_landed(store, written)  # (under the guards: no release between)
            return written

    # From what this host last saw: its own writes are mirrored at once, and if the
    # coordinator moved on meanwhile the compare-and-swap refuses, and a fresh look follows.
    return with_cas_retry(attempt, refresh=store.refresh)


def _renewed(record: Record, now: Now, ttl_ms: int, oid: str | None) -> Record:
    return record.evolve(
        renewed_at=rfc3339(now.wall_ms),
        expires_at=rfc3339(now.wall_ms + ttl_ms),
        renew_by=rfc3339(now.wall_ms + ttl_ms // 2),
        ttl_ms=ttl_ms,
        boot_id=now.boot,
        boot_expires_ms=now.boot_ms + ttl_ms,
        previous=oid,
    )


def release_claims(
    store: Store, rec: Receipt, claim_refs: list[ClaimRef], checkpoint: str | None
) -> list[Claim]:
    """Write each claim's tombstone; idempotent for the caller's own released claims."""
    if checkpoint is not None:
        check_text(checkpoint, "the checkpoint")
    store.prepare_write()

    unwritten: set[str] = set()

    def attempt() -> list[Claim]:
        with guards(store, [c.ref for c in claim_refs]):
            now = Now.read()
            snaps = {c.ref: store.read(c.ref) for c in claim_refs}
            # a partial bundle: release what is held, and pass over what was never written
            unwritten.clear()
            unwritten.update(c.ref for c in ownership.unwritten_members(store, rec, snaps))
            if unwritten and store.recheck_refusal():  # never pass over one on a stale look
                snaps = {ref: store.read(ref) for ref in snaps}
                unwritten.clear()
                unwritten.update(c.ref for c in ownership.unwritten_members(store, rec, snaps))
            if unwritten >= {c.ref for c in claim_refs}:
                missing = [c for c in rec.claims if c.ref in unwritten]
                raise ownership.partial_error(store, rec, missing)
            plans: list[tuple[Snapshot, Record]] = []
            done: list[Claim] = []
            for claim_ref in claim_refs:
                snap = snaps[claim_ref.ref]
                claim = judge(snap, now, claim_ref.resource)
                if claim_ref.ref in unwritten:
                    done.append(claim)  # never this receipt's: nothing to release
                    continue
                record = ownership.owned_record(claim, rec, claim_ref)
                if record.state == RELEASED:
                    done.append(claim)
                    continue
                if is_expired(record, now):
                    raise LostError(
                        f"{claim.describe()}: released nothing. Your last writes may have come "
                        "after your ownership ended",
                        claim=claim.to_dict(),
                    )
                plans.append((snap, _tombstone(record, now, checkpoint, snap.oid)))
            written = _write(store, rec, plans, "release", now) if plans else []
            return done + written

    claims = with_cas_retry(attempt, refresh=store.refresh)  # as for heartbeat
    keepers.stop(store.git_dir, [(c.ref, c.claim_id) for c in claim_refs])  # its keepalive
    if rec.token is not None and {c.ref for c in claim_refs} | unwritten >= {
        c.ref for c in rec.claims
    }:
        # the token leaves the receipt once nothing it proves is held (a bundle member
        # released on its own leaves the token for the others)
        ownership.retire(store, rec)
    ownership.unbind_all(store, claim_refs)
    order = {c.ref: i for i, c in enumerate(claim_refs)}
    return sorted(claims, key=lambda c: order[c.ref])


def _tombstone(record: Record, now: Now, checkpoint: str | None, oid: str | None) -> Record:
    return record.evolve(
        state=RELEASED,
        released_at=rfc3339(now.wall_ms),
        expires_at=rfc3339(now.wall_ms),
        boot_id=now.boot,
        boot_expires_ms=now.boot_ms,
        checkpoint=checkpoint if checkpoint is not None else record.checkpoint,
        previous=oid,
    )


def check_claims(
    store: Store, rec: Receipt, claim_refs: list[ClaimRef], need_ms: int
) -> list[Claim]:
    """The caller still holds each claim, with at least ``need_ms`` left; LOST otherwise."""
    now = Now.read()
    wanted = rec.claims if rec.bundle_id is not None else claim_refs  # a bundle: every member
    if len(wanted) == 1:
        snaps = [store.read(wanted[0].ref)]
    else:
        by_ref = {s.ref: s for s in store.read_all()}
        snaps = [by_ref.get(c.ref, Snapshot(c.ref, None, None)) for c in wanted]
    read = _refuse_partial(store, rec, {s.ref: s for s in snaps})
    snaps = [read[c.ref] for c in claim_refs]
    # A record whose object id the binding holds is the holder's own last write, byte for
    # byte (the id is checked against the bytes): no signature to check, no key to derive.
    return [
        _held_now(judge(snap, now, c.resource, known=(c.oid,)), rec, c, now, need_ms)
        for c, snap in zip(claim_refs, snaps, strict=True)
    ]


def _refuse_partial(store: Store, rec: Receipt, snaps: dict[str, Snapshot]) -> dict[str, Snapshot]:
    """LOST if ``rec`` is a bundle some of whose members were never written (a crash in
    the middle of its commit): nobody may act on a partial bundle, through a bundle
    command or a single member's. (On a fresh look first, if the store's view can be
    behind.) ``snaps``, or the refs read again after such a look."""
    missing = ownership.unwritten_members(store, rec, snaps)
    if missing and store.recheck_refusal():
        snaps = {ref: store.read(ref) for ref in snaps}
        missing = ownership.unwritten_members(store, rec, snaps)
    if missing:
        raise ownership.partial_error(store, rec, missing)
    return snaps


def _held_now(claim: Claim, rec: Receipt, claim_ref: ClaimRef, now: Now, need_ms: int) -> Claim:
    record = ownership.owned_record(claim, rec, claim_ref)
    if record.state == RELEASED or not rec.token:
        raise LostError(
            f"claim {claim_ref.claim_id} on {claim.resource} was released",
            claim=claim.to_dict(),
        )
    if record.boot_id != now.boot:  # a claim counts only on its holder's own clock
        raise LostError(
            f"claim {claim_ref.claim_id} on {claim.resource} was written on another host "
            "or before this host last booted: it is not held here. Stop mutating, "
            "preserve progress, re-acquire",
            claim=claim.to_dict(),
        )
    if claim.state != "active":
        raise LostError(
            f"{claim.describe()}. Stop mutating, preserve progress, re-acquire",
            claim=claim.to_dict(),
        )
    left = claim.expires_in_ms or 0
    if left < need_ms:
        raise LostError(
            f"{claim.describe()}: only {format_duration(left)} left, "
            f"{format_duration(need_ms)} required. Heartbeat first",
            claim=claim.to_dict(),
        )
    return claim


def _write(
    store: Store, rec: Receipt, plans: list[tuple[Snapshot, Record]], verb: str, now: Now
) -> list[Claim]:
    """Sign and compare-and-swap every planned record in one transaction."""
    if rec.token is None:
        raise LostError(f"receipt {rec.path} has no token: it proves no claim")
    key = SigningKey(rec.token)
    signed = [(snap, record.signed(key)) for snap, record in plans]
    first = signed[0][1]
    message = f"gitlease {verb}: {first.claim_id} revision {first.revision}"
    oids = store.compare_and_swap_many(
        [(snap.ref, snap.oid, record.raw or b"") for snap, record in signed], message
    )
    return [
        judge(Snapshot(snap.ref, oid, record.raw), now, record.resource)
        for (snap, record), oid in zip(signed, oids, strict=True)
    ]
