"""The engine of every owned write, over one ref or many: renew, release, check, and the
guards and retries every write (an acquire too) goes through.

Every ownership decision follows one pattern: take the guards of every ref
involved (in ref order, so two bundles never deadlock), read the current
records, decide from exactly what was read, then compare-and-swap every ref
against the object id that was read, in one reference transaction (one atomic
push for a remote store). Nothing here overwrites a record it could not verify.
When a ref moved between the read and the write, the decision is made again
from a fresh read (:func:`with_cas_retry`).

Acquiring builds on it (:mod:`gitlease.claims.acquire`, :mod:`gitlease.claims.firstfree`); the
single-resource commands (:mod:`gitlease.api.lease`) and bundles (:mod:`gitlease.api.bundle`) are
thin wrappers over these modules.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext

from .._util import TYPE_CHECKING
from .._util import testing as _testing
from ..errors import CompareAndSwapFailed, GitleaseError, LostError
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, holder_remaining_ms, judge
from ..model.clock import Now, format_duration, rfc3339
from ..model.fields import check_text
from ..model.record import RELEASED, Record, SigningKey, blob_oid
from ..receipts import directory as receiptdir
from ..receipts.receipt import ClaimRef, Receipt
from ..state.guards import GUARD_WAIT_SECONDS
from ..store.base import Store
from . import ownership

if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")


#: How often a decision is made again when the ref keeps moving under it.
CAS_ATTEMPTS = 5
#: How long a write of one's own claim waits for the guard (an acquire: 2 seconds).
OWNED_GUARD_WAIT_SECONDS = 10.0


# ------------------------------------------------------------------ guards and retries


@contextmanager
def guards(store: Store, refs: Iterable[str], *, owned: bool = False) -> Iterator[None]:
    """Hold the guards of several refs at once, always taken in ref order (no deadlock).
    ``owned``: writes of the caller's own claims (heartbeat, release), which wait longer
    and go before acquirers: contention must never fail them (:func:`gitlease.guards.hold`)."""
    wait = OWNED_GUARD_WAIT_SECONDS if owned else GUARD_WAIT_SECONDS
    with ExitStack() as stack:
        for ref in sorted(set(refs)):
            stack.enter_context(store.guard(ref, wait=wait, owned=owned))
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


# ------------------------------------------------------------------ owned claims


def renew_claims(
    store: Store, rec: Receipt, claim_refs: list[ClaimRef], new_ttl: int | None
) -> list[Claim]:
    """Extend each claim by its TTL (or ``new_ttl``). LOST if any expired: never revived."""
    store.prepare_write()

    def attempt() -> list[Claim]:
        with guards(store, [c.ref for c in claim_refs], owned=True):
            now = Now.read()
            snaps = _refuse_partial(store, rec, {c.ref: store.read(c.ref) for c in claim_refs})
            plans = []
            for claim_ref in claim_refs:
                snap = snaps[claim_ref.ref]
                claim = judge(snap, now, claim_ref.resource)
                # (oid=None: a write signs with the receipt's token, so its key is checked)
                record = ownership.owned_record(claim, rec, claim_ref.replace(oid=None))
                if record.state == RELEASED:
                    raise LostError(
                        f"claim {claim_ref.claim_id} on {claim.resource} was released",
                        claim=claim.to_dict(),
                    )
                if (holder_remaining_ms(record, now) or 0) <= 0:
                    raise LostError(
                        f"{claim.describe()}: an expired claim is never renewed. Stop mutating, "
                        "preserve progress, re-acquire",
                        claim=claim.to_dict(),
                    )
                plans.append((snap, _renewed(record, now, new_ttl or record.ttl_ms, snap.oid)))
            written = _write(store, rec, plans, "heartbeat", now)
            from . import bookkeeping  # (writes only: the commit check reads)

            bookkeeping.note_landed(store, written, rec)  # (under the guards: no release between)
            return written

    # From what this host last saw: its own writes are mirrored at once, and if the
    # coordinator moved on meanwhile the compare-and-swap refuses, and a fresh look follows.
    from . import interrupts  # (writes only: the commit check imports this module)

    try:
        claims = with_cas_retry(attempt, refresh=store.refresh)
        if new_ttl is not None:  # a keepalive of these claims renews at its old cadence
            _wake_keepers(store, rec, claim_refs)
    finally:
        interrupts.unhold()  # (a signal that met the write acts now, or is answered)
    return claims


def _wake_keepers(store: Store, rec: Receipt, claim_refs: list[ClaimRef]) -> None:
    """Tell the keepalive processes of ``claim_refs`` to look again (their TTL changed)."""
    from ..state import keepers  # (not on the commit check's path)

    try:
        kept = keepers.by_claim(store.git_dir)
    except (OSError, GitleaseError):
        return
    pids = {k.pid for c in claim_refs if (k := kept.get((c.ref, c.claim_id))) is not None}
    for pid in pids:
        receiptdir.poke(receiptdir.wake_path(rec.path, pid))


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
        with guards(store, [c.ref for c in claim_refs], owned=True):
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
                record = ownership.owned_record(claim, rec, claim_ref.replace(oid=None))
                if record.state == RELEASED:
                    done.append(claim)
                    continue
                if (holder_remaining_ms(record, now) or 0) <= 0:
                    import shlex  # (only here: reads and the commit check import this module)

                    raise LostError(
                        f"{claim.describe()}: released nothing. Your last writes may have come "
                        "after your ownership ended; a worktree bound to it stays bound (its "
                        "commits are refused) until it re-acquires or runs `gitlease unbind "
                        f"{shlex.quote(claim.resource)}`",
                        claim=claim.to_dict(),
                    )
                plans.append((snap, _tombstone(record, now, checkpoint, snap.oid)))
            written = _write(store, rec, plans, "release", now) if plans else []
            return done + written

    from . import interrupts  # (writes only: the commit check imports this module)

    try:
        claims = with_cas_retry(attempt, refresh=store.refresh)  # as for heartbeat
        _stop_keepers(store, rec, claim_refs)
        from . import bookkeeping  # (writes only: the commit check reads)

        if rec.token is not None and {c.ref for c in claim_refs} | unwritten >= {
            c.ref for c in rec.claims
        }:
            # the token leaves the receipt once nothing it proves is held (a bundle member
            # released on its own leaves the token for the others)
            bookkeeping.retire(store, rec)
        bookkeeping.unbind_all(store, claim_refs)
    finally:
        interrupts.unhold()  # (never half way through the bookkeeping: as for heartbeat)
    order = {c.ref: i for i, c in enumerate(claim_refs)}
    return sorted(claims, key=lambda c: order[c.ref])


def _stop_keepers(store: Store, rec: Receipt, claim_refs: list[ClaimRef]) -> None:
    """Stop the keepalive processes that keep nothing but ``claim_refs`` (just released).

    One that keeps other claims too (a bundle's other members, one released on its own)
    goes on keeping them: it is woken to look now, finds this member released, drops it
    from what it keeps (and from the registry), and renews the others.
    """
    from ..state import keepers  # (not on the commit check's path)

    released = {(c.ref, c.claim_id) for c in claim_refs}
    try:
        kept = keepers.live(store.git_dir)
    except (OSError, GitleaseError):
        kept = []
    whole = [k for k in kept if {(r, c) for _, r, c in k.claims} <= released]
    for k in kept:
        if k not in whole and any((r, c) in released for _, r, c in k.claims):
            receiptdir.poke(receiptdir.wake_path(rec.path, k.pid))
    stop = {(r, c) for k in whole for _, r, c in k.claims}
    if stop:
        keepers.stop(store.git_dir, sorted(stop))


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
    left = holder_remaining_ms(record, now)
    if left is None:  # a claim counts only on its holder's own clock
        raise LostError(
            f"claim {claim_ref.claim_id} on {claim.resource} was written on another host "
            "or before this host last booted: it is not held here. Stop mutating, "
            "preserve progress, re-acquire",
            claim=claim.to_dict(),
        )
    if claim.state != "active" or left <= 0:
        raise LostError(
            f"{claim.describe()}. Stop mutating, preserve progress, re-acquire",
            claim=claim.to_dict(),
        )
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
    """Sign every planned record with the receipt's key and write them (:func:`write_signed`)."""
    if rec.token is None:
        raise LostError(f"receipt {rec.path} has no token: it proves no claim")
    key = SigningKey(rec.token)
    signed = [(snap, record.signed(key)) for snap, record in plans]
    first = signed[0][1]
    message = f"gitlease {verb}: {first.claim_id} revision {first.revision}"
    from . import interrupts  # (writes only: the commit check imports this module)

    interrupts.hold()  # (until the caller's bookkeeping is done: interrupts.unhold)
    try:
        written = write_signed(store, signed, message, now)
    except CompareAndSwapFailed:
        interrupts.unhold(written=False)  # nothing written: a signal acts now, as ever
        raise
    _testing.pause("after-owned-write")  # (tests: a signal delivered right after the write)
    return written


def write_signed(
    store: Store,
    signed: list[tuple[Snapshot, Record]],
    message: str,
    now: Now,
    *,
    durable: bool = False,
    settle: Callable[[BaseException], list[str]] | None = None,
    riders: Sequence[tuple[str, str | None, bytes]] = (),
) -> list[Claim]:
    """The one compare-and-swap of owned records, for every write (an acquire's, a
    heartbeat's, a release's): each record, signed, against the snapshot it was judged on,
    all in one transaction, under the caller's guards.

    ``durable``: on disk before this returns (an acquire hands out a revision, which must
    never repeat after a power cut). ``settle``: when the write failed and its outcome can
    be read back (:meth:`Store.outcome_readable`), decides from the store what happened and
    returns the object ids of the records written, or raises; without it the error stands.
    ``riders``: updates of refs that hold no record, (ref, expected object id, bytes), in
    the same transaction and compared like the records (a remote store's scope index, in
    the same atomic push: :func:`gitlease.scopes.acquiring.note`); all land with the
    records or none.
    """
    updates = [(snap.ref, snap.oid, record.raw or b"") for snap, record in signed]
    try:
        with store.durable() if durable else nullcontext():
            oids = store.compare_and_swap_many([*updates, *riders], message)
    except BaseException as exc:
        if settle is None or not store.outcome_readable(exc):
            raise
        oids = settle(exc)
    oids = oids[: len(signed)]  # (the riders' ids: nobody's claim)
    # (the records this process signed: a read of them here checks no signature again; not
    # imported at the top: the commit check imports this module, and writes nothing)
    from ..state import verified_records as verified

    length = len(oids[0]) if oids else 40
    verified.note_written(
        store.git_dir,
        [o for (_, r), o in zip(signed, oids, strict=True) if o == blob_oid(r.raw or b"", length)],
    )
    return [
        judge(Snapshot(snap.ref, oid, record.raw), now, record.resource)
        for (snap, record), oid in zip(signed, oids, strict=True)
    ]
