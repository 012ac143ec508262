"""Acquiring claims, one or many at once: judge every member under its guard, write new
records in one compare-and-swap, write the receipt, bind the worktree; and undoing an
acquire whose receipt or binding could not be written.

The members are taken all or nothing; ``--wait`` retries HELD answers with backoff and
jitter, in turn with the other waiters (:func:`~gitlease.claims.waiting.retry_until`). The writes
go through the engine (:mod:`gitlease.claims.engine`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext, suppress

from .._util import testing as _testing
from .._util.value import Value
from ..errors import AmbiguousError, CorruptRecordError, GitleaseError, HeldError, StoreError
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, corrupt_error, held_error, judge, rolled_back_error
from ..model.clock import Now, rfc3339
from ..model.record import HELD, MAX_INT, Record, SigningKey, new_bundle_id, new_claim_id, new_token
from ..model.refname import encode
from ..receipts import bindings as bindings_mod
from ..receipts import reservation
from ..receipts.receipt import ClaimRef, Receipt
from ..scopes import acquiring as scope_index
from ..scopes.index import note_store
from ..state import guards as guards_mod
from ..state import highwater
from ..state.waitqueue import Line
from ..store.base import Store
from . import bookkeeping, ownership
from . import interrupts as window
from .engine import guards, release_claims, with_cas_retry, write_signed
from .request import AcquireRequest
from .waiting import Waiting, retry_until


def acquire_claims(
    store: Store, request: AcquireRequest, on_wait: Callable[[Waiting], None] | None = None
) -> tuple[list[Claim], Receipt]:
    """Take every resource of ``request`` or none: (the new claims in order, the receipt)."""
    store.prepare_write()
    if request.receipt is not None:  # a path that must not be written: refused at once
        reservation.check_explicit_location(request.receipt, str(store.git_dir))
    line = Line(store.git_dir, request.refs)
    check_bindings(store, request)  # likewise, before anything is written

    def attempt() -> tuple[list[Claim], Receipt]:
        try:
            if _contended(store, request):
                _refuse_early(store, request)
            reserve = reservation.reserve(request.receipt, str(store.git_dir))
            with guards(store, request.refs), reserve as held:
                written, rec = take(store, request, held, line)
        except HeldError as exc:
            line.stand_for(_blocking(request, exc))  # (a bundle: never hold a free member)
            raise
        bound = finish_acquire(store, request, rec, written)
        return [c.replace(bound=bound) for c in written], rec

    return retry_until(
        request.wait_ms,
        lambda: with_cas_retry(attempt, refresh=store.refresh),
        on_wait,
        line=line,
        longest_pause=store.wait_poll_seconds,
    )


def _blocking(request: AcquireRequest, error: HeldError) -> tuple[str, ...]:
    """The refs of ``request`` that refused it: the member ``error`` names (all, if none)."""
    ref = (error.claim or {}).get("ref")
    return (ref,) if ref in request.refs else request.refs


def _binds(store: Store, request: AcquireRequest) -> bool:
    return request.bind and store.location.worktree_git_dir is not None


def check_bindings(store: Store, request: AcquireRequest) -> None:
    """Refuse a bindings directory that cannot be used before any claim is written (a
    directory others can write is USAGE): a failure after the write must be undone."""
    wt = store.location.worktree_git_dir
    if _binds(store, request) and wt is not None:
        bindings_mod.check_bindings_dir(wt)


def finish_acquire(
    store: Store, request: AcquireRequest, rec: Receipt, written: list[Claim]
) -> bool:
    """After the write: bind this worktree (True if it did), tidy old receipts.

    The claims are written by now, so no failure may leave them behind with an exit
    code that says otherwise: if binding fails, they are released again and the
    failure raised (AMBIGUOUS, naming them, if even that fails: :func:`undo_acquire`).
    Tidying is housekeeping, and never fails an acquire.
    """
    bound = _binds(store, request)
    if bound:
        try:
            bookkeeping.bind_all(store, rec, written)
        except BaseException as exc:
            undo_acquire(store, rec, exc)
            undone = _undone(exc)
            if undone is exc:
                raise
            raise undone from exc
    if request.receipt is None:
        with suppress(Exception):  # (after the write: no bug in tidying may fail the acquire)
            bookkeeping.tidy(rec)
    return bound


def undo_acquire(store: Store, rec: Receipt, cause: BaseException) -> None:
    """Release the claims of ``rec``, just written, after ``cause`` failed what followed
    the write (binding, a keepalive, the output): the caller then reports ``cause`` with
    no claim left behind. If the release fails too, AMBIGUOUS naming every claim: they
    stay active until they expire, and only the receipt can release them."""
    try:
        release_claims(store, rec, list(rec.claims), None)
    except BaseException as exc:
        if window.raised_after_write(exc):
            raise  # (a signal that met the release once it landed: it acts, nothing is left)
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
    # (a prune floor counts as a mark: prune folds the mark into it, then drops the mark)
    marks = [max(highwater.read(store.git_dir, ref), store.revision_floor(ref)) for ref in refs]
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
            own = ownership.own_receipt_for(store, claim, request.receipt)
            error = held_error(claim, own)
            # this worktree's own claim, the one it works on (bound): no wait ends it
            error.retryable = own is None or not ownership.mark_bound(store, [claim])[0].bound
            raise error
    return claims


def _refuse_rolled_back(store: Store, claim: Claim, mark: int) -> None:
    """STORE if the ref shows a record below ``mark``, the revision this host last wrote or
    saw for it (:mod:`gitlease.state.highwater`); a higher one seen here raises the mark."""
    if claim.record is None:
        return
    if claim.record.revision < mark:
        raise rolled_back_error(claim, mark)
    if claim.record.revision > mark:  # seen here (another host's write, an older version's)
        highwater.raise_to(store.git_dir, claim.ref, claim.record.revision)


def _contended(store: Store, request: AcquireRequest) -> bool:
    """Whether to look before taking the guards: a guard is taken now (or an owner's write
    waits for it, and goes first), so the answer may well be HELD, which a look without the
    guard gives at once; or the store's view can be behind (a remote's mirror), and a refusal
    needs a fresh look, which is not made under the guards; or the acquire waits for
    something else once it holds the resources' guards, before it judges (the store-wide
    scope guard, up to half a minute; an explicit receipt's lock): a held resource is then
    refused at once instead of its guard being kept from its holder's heartbeat and release
    meanwhile. Otherwise the look under the guards is the only one: an uncontended acquire
    reads each member once."""
    if not store.reads_are_current or request.paths is not None or request.receipt is not None:
        return True
    return any(guards_mod.contended(store.guard_path(ref)) for ref in request.refs)


def _refuse_early(store: Store, request: AcquireRequest) -> None:
    """Refuse without the guard when what the store shows cannot be taken (on a fresh look
    if the store's view can be behind)."""
    try:
        _judge_members(store, request, _read_members(store, request.refs), Now.read())
    except (HeldError, CorruptRecordError):
        if not store.recheck_refusal():
            raise
        _judge_members(store, request, _read_members(store, request.refs), Now.read())


def _refuse_queued(claims: list[Claim], line: Line) -> None:
    """HELD when callers on this host wait for a member first (they get it first)."""
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


def take(
    store: Store,
    request: AcquireRequest,
    held: reservation.Reserved | None,
    line: Line | None = None,
) -> tuple[list[Claim], Receipt]:
    """Under the guards (and ``held``, the explicit receipt path reserved): read, judge,
    refuse when callers in ``line`` wait for a member first, write the receipt, then
    compare-and-swap every ref. With path scopes, all of it under
    the store-wide scope guard too (taken after the resource guards, always in that order),
    refused (HELD) when a live claim on another resource has an overlapping scope; through
    a git remote, the scope index's new value rides on the claims' own atomic push
    (:mod:`gitlease.scopes.acquiring`)."""
    if request.paths is not None:
        note_store(store.location.worktree_git_dir, store.git_dir)
    with scope_index.scope_guard(store) if request.paths is not None else nullcontext():
        return _take(store, request, held, line)


def _take(
    store: Store,
    request: AcquireRequest,
    held: reservation.Reserved | None,
    line: Line | None,
    *,
    fresh: bool = False,
) -> tuple[list[Claim], Receipt]:
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
    if line is not None:
        _refuse_queued(claims, line)
    snaps = members.snaps
    scopes = None
    if request.paths is not None:
        scopes = scope_index.current(store)
        found, behind = scope_index.conflicts(store, scopes, request.paths, request.refs, now)
        if (found or behind) and not fresh and store.recheck_refusal():
            # (a remote store's mirror may be behind: refuse, or grant, on a fresh look only)
            return _take(store, request, held, line, fresh=True)
        if found:
            raise scope_index.held_error(found, request.paths)
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
    path = request.receipt or bookkeeping.default_receipt_path(
        store, request.refs[0], records[0].claim_id, bundle_id
    )
    rec = Receipt(path, str(store.git_dir), token, claim_refs, bundle_id)
    bookkeeping.write_new(store, rec, held)
    riders: list[tuple[str, str | None, bytes]] = []
    if scopes is not None:  # noted before or with the write: the index never misses a scope
        riders = scope_index.note(store, scopes, list(zip(request.refs, records, strict=True)), now)
        _testing.pause("scopes-noted")  # (tests: two hosts that read one scope index)
    return _commit_acquire(store, rec, snaps, records, now, riders), rec


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
    if revision > MAX_INT:  # a forged record at the last revision: the next would not parse
        raise CorruptRecordError(
            f"{claim.resource}: revision {revision - 1} is the last a record can carry, so no "
            "claim can follow it (a forged record); fix the ref and its high-water mark by hand"
        )
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
        paths=request.paths,
    ).signed(key)


def _commit_acquire(
    store: Store,
    rec: Receipt,
    snaps: list[Snapshot],
    records: list[Record],
    now: Now,
    riders: list[tuple[str, str | None, bytes]],
) -> list[Claim]:
    """Write every member through the engine's one compare-and-swap, durably (with the
    ``riders``: a remote store's scope index); settle an error by looking at what actually
    landed; then raise the high-water marks."""
    first = records[0]
    what = f"bundle {first.bundle_id}" if first.bundle_id else first.claim_id
    message = f"gitlease acquire: {what} revision {first.revision} owner {first.owner}"

    def settle(exc: BaseException) -> list[str]:
        landed = _landed(store, records)
        if landed == len(records):
            return [store.read(r.ref).oid or "" for r in rec.claims]
        if landed == 0:  # nothing written: the receipt proves nothing, and goes
            bookkeeping.discard(store, rec)
            window.cancel()
            raise exc
        raise AmbiguousError(
            f"the acquire was interrupted after {landed} of {len(records)} members were "
            f"written ({exc}); compare receipt {rec.path} with `gitlease bundle show`. "
            "The written members expire by their TTL"
        ) from exc

    window.begin()  # a signal from now on is answered by undoing the write (or AMBIGUOUS)
    # (a failure whose outcome cannot be read keeps the receipt, to settle it with `show`)
    written = write_signed(
        store,
        list(zip(snaps, records, strict=True)),
        message,
        now,
        durable=True,
        settle=settle,
        riders=riders,
    )
    for record, snap in zip(records, snaps, strict=True):  # after the write, never before
        highwater.raise_to(store.git_dir, snap.ref, record.revision)
    _testing.pause("after-write")  # (tests: a signal delivered right after the write)
    return written


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
