"""The lease rules: acquire, heartbeat, release, check, show, list, free, log (SPEC §3).

Every ownership decision follows one pattern: take the resource's guard, read
the current record, decide from exactly what was read, then
:meth:`Store.compare_and_swap` against the object id that was read. Nothing
here overwrites a record it could not verify.
"""

from __future__ import annotations

import os
import threading  # already loaded by subprocess: free
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from . import receipts as receipts_mod
from .clock import Now, format_duration, parse_duration_ms, parse_rfc3339, rfc3339
from .errors import (
    CorruptRecordError,
    GitleaseError,
    HeldError,
    LostError,
    ReceiptError,
    UsageError,
)
from .receipts import Binding, ClaimRef, Receipt
from .record import (
    COORDINATION_ONLY,
    GUARDED,
    RELEASED,
    Record,
    SigningKey,
    parse_and_verify,
)
from .refname import decode, encode, validate_resource
from .store import CompareAndSwapFailed, Snapshot, Store, state_home
from .value import Value

DEFAULT_TTL_MS = 15 * 60_000
MIN_TTL_MS = 1_000
CAS_ATTEMPTS = 5

GUARANTEES = {
    GUARDED: "guarded: gitlease refuses other callers while the claim is active; local writes "
    "through exec, replace-file and the commit hooks are checked against it",
    COORDINATION_ONLY: "coordination only: cooperating callers on this host see the claim and "
    "choose other work; the remote mutation itself is not fenced",
}


# ------------------------------------------------------------------ the public view


class Claim(Value):
    """What a resource's ref says now, for people and programs (never secret)."""

    __slots__ = ("resource", "ref", "state", "record", "oid", "problem", "expires_in_ms", "bound")
    _defaults: ClassVar[dict[str, Any]] = {
        "record": None, "oid": None, "problem": None, "expires_in_ms": None, "bound": False,
    }  # fmt: skip
    resource: str
    ref: str
    state: str  # active, expired, released, free, invalid
    record: Record | None
    oid: str | None
    problem: str | None
    expires_in_ms: int | None
    bound: bool

    @property
    def active(self) -> bool:
        return self.state == "active"

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        doc: dict[str, Any] = {
            "resource": self.resource,
            "ref": self.ref,
            "state": self.state,
            "claim_id": r.claim_id if r else None,
            "owner": r.owner if r else None,
            "revision": r.revision if r else None,
            "bundle_id": r.bundle_id if r else None,
            "mode": r.mode if r else None,
            "acquired_at": r.acquired_at if r else None,
            "renewed_at": r.renewed_at if r else None,
            "released_at": r.released_at if r else None,
            "expires_at": r.expires_at if r else None,
            "expires_in": None if self.expires_in_ms is None else self.expires_in_ms / 1000,
            "renew_by": r.renew_by if r and r.held else None,
            "note": r.note if r else None,
            "checkpoint": r.checkpoint if r else None,
            "oid": self.oid,
            "guarantee": GUARANTEES.get(r.mode) if r else None,
            "bound": self.bound,
        }
        if self.problem:
            doc["problem"] = self.problem
        return doc

    def describe(self) -> str:
        """One line naming resource, claim id, owner, revision and expiry (for diagnostics)."""
        r = self.record
        if self.state == "free" or r is None:
            extra = f": {self.problem}" if self.problem else ""
            return f"{self.resource} is {self.state}{extra}"
        left = self.expires_in_ms
        if self.state == "active" and left is not None:
            when = f"expires {r.expires_at} (in {format_duration(left)})"
        elif self.state == "released":
            when = f"released {r.released_at}"
        else:
            ago = f" ({format_duration(-left)} ago)" if left is not None else ""
            when = f"expired {r.expires_at}{ago}"
        bundle = f", bundle {r.bundle_id}" if r.bundle_id else ""
        return (
            f"{self.resource}: claim {r.claim_id} by {r.owner}, revision {r.revision}"
            f"{bundle}, {self.state}, {when}"
        )


def is_expired(record: Record, now: Now, first_seen_ms: int | None = None) -> bool:
    """Judged on this host's boot clock.

    A record written in this boot carries its expiry on that clock. Any other
    record is expired, unless ``first_seen_ms`` says when this host first saw it
    (a remote store, where other hosts write): then it expires once this host
    has seen it unchanged for a whole TTL (:func:`observed_lifetime_ms`).
    Holders pass no sighting: their own claim counts only on their own clock.
    """
    if record.boot_id != now.boot and first_seen_ms is None:
        return True
    return remaining_ms(record, now, first_seen_ms) <= 0


def remaining_ms(record: Record, now: Now, first_seen_ms: int | None = None) -> int:
    if record.boot_id == now.boot:
        return record.boot_expires_ms - now.boot_ms
    if first_seen_ms is not None:
        return first_seen_ms + observed_lifetime_ms(record.ttl_ms) - now.boot_ms
    return min(0, parse_rfc3339(record.expires_at) - now.wall_ms)


def observed_lifetime_ms(ttl_ms: int) -> int:
    """How long another host's record must be seen unchanged before it counts as expired.

    A whole TTL, counted from this host's first sighting, which comes after the
    write (so after the holder started its own TTL), plus 1% for the two boot
    clocks' rates differing (NTP slews at most 0.05%). Other hosts' clock
    readings never enter into it.
    """
    return ttl_ms + ttl_ms // 100


def describe(snap: Snapshot, now: Now, resource: str | None = None) -> Claim:
    """Judge one snapshot: parse, verify, check it names its own resource, and time it."""
    if resource is None:
        try:
            resource = decode(snap.ref)
        except UsageError:
            resource = snap.ref
    if snap.oid is None:
        return Claim(resource, snap.ref, "free")
    try:
        record = verified(snap, resource)
    except CorruptRecordError as exc:
        return Claim(resource, snap.ref, "invalid", oid=snap.oid, problem=str(exc))
    left = remaining_ms(record, now, snap.first_seen_ms)
    if record.state == RELEASED:
        state = "released"
        left = None
    elif is_expired(record, now, snap.first_seen_ms):
        state = "expired"
    else:
        state = "active"
    return Claim(resource, snap.ref, state, record, snap.oid, expires_in_ms=left)


def verified(snap: Snapshot, resource: str) -> Record:
    """The snapshot's record, or :class:`CorruptRecordError` if it cannot be trusted."""
    if snap.problem or snap.data is None:
        raise CorruptRecordError(f"the ref of {resource!r} cannot be read: {snap.problem}")
    record = parse_and_verify(snap.data)
    if record.resource != resource:
        raise CorruptRecordError(f"the ref of {resource!r} holds a record for {record.resource!r}")
    return record


def _store_error(claim: Claim) -> CorruptRecordError:
    return CorruptRecordError(
        f"{claim.resource}: the record is corrupt or tampered with ({claim.problem}); "
        "it is never granted over. Run `gitlease verify`, then `gitlease verify --repair` "
        "or fix it by hand",
        claim=claim.to_dict(),
    )


# ------------------------------------------------------------------ acquire


class Acquired(Value):
    """The outcome of an acquire: the public claim and the private receipt's path."""

    __slots__ = ("claim", "receipt")
    claim: Claim
    receipt: Receipt

    def to_dict(self) -> dict[str, Any]:
        return dict(self.claim.to_dict(), receipt=str(self.receipt.path))


def default_owner() -> str:
    """``user@host:pid`` (no socket or getpass import: ~5 ms on every acquire)."""
    try:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        user = os.environ.get("USER") or str(os.getuid())
    return f"{user}@{os.uname().nodename}:{os.getpid()}"


def resolve_owner(owner: str | None) -> str:
    owner = owner or os.environ.get("GITLEASE_OWNER") or default_owner()
    if any(ord(c) < 0x20 for c in owner) or len(owner) > 200:
        raise UsageError("an owner label must be at most 200 characters with no control characters")
    return owner


def resolve_ttl(ttl: str | int | None) -> int:
    if ttl is None:
        return DEFAULT_TTL_MS
    ms = parse_duration_ms(ttl, name="TTL")
    if ms < MIN_TTL_MS:
        raise UsageError(f"bad TTL {ttl!r}: at least 1s")
    return ms


def receipt_dir(store: Store) -> Path:
    return receipts_mod.default_dir(store.location.worktree_git_dir, state_home())


class Waiting(Value):
    """What ``--wait`` reports between attempts (for a live status line)."""

    __slots__ = ("attempt", "waited_ms", "holder")
    attempt: int
    waited_ms: int
    holder: Claim | None


def acquire(
    store: Store,
    resource: str,
    *,
    ttl: str | int | None = None,
    owner: str | None = None,
    note: str | None = None,
    coordination_only: bool = False,
    receipt: str | os.PathLike[str] | None = None,
    wait: str | int | None = None,
    bind: bool = True,
    on_wait: Callable[[Waiting], None] | None = None,
) -> Acquired:
    """Take a claim if the resource is free, released or expired; HELD otherwise."""
    from . import bundle  # one implementation for one resource and for many

    result = bundle.acquire_many(
        store,
        [resource],
        ttl=ttl,
        owner=owner,
        note=note,
        coordination_only=coordination_only,
        receipt=receipt,
        wait=wait,
        bind=bind,
        on_wait=on_wait,
        single=True,
    )
    return Acquired(result.claims[0], result.receipt)


def retry_until(
    deadline_ms: int | None,
    attempt: Callable[[], Any],
    on_wait: Callable[[Waiting], None] | None = None,
) -> Any:
    """Run ``attempt``; while it answers HELD, retry with backoff and jitter until the deadline."""
    import random

    started = time.monotonic()
    delay = 0.05
    tries = 0
    while True:
        tries += 1
        try:
            return attempt()
        except (HeldError, CompareAndSwapFailed) as exc:
            waited = int((time.monotonic() - started) * 1000)
            if deadline_ms is None or waited >= deadline_ms:
                raise
            if on_wait is not None:
                on_wait(Waiting(tries, waited, getattr(exc, "holder", None)))
            sleep = min(delay, (deadline_ms - waited) / 1000) * random.uniform(0.5, 1.0)
            time.sleep(max(sleep, 0.005))
            delay = min(delay * 1.6, 2.0)


def held_error(claim: Claim, own_receipt: Path | None = None) -> HeldError:
    if own_receipt is not None:
        message = (
            f"{claim.describe()}. The active claim is yours (receipt {own_receipt}): "
            "heartbeat or release it instead; acquire never takes over an active claim"
        )
    else:
        message = f"{claim.describe()}. Choose other ready work, or wait"
    error = HeldError(message, claim=claim.to_dict())
    error.holder = claim  # type: ignore[attr-defined]
    return error


def own_receipt_for(store: Store, claim: Claim, explicit: Path | None) -> Path | None:
    """A receipt of the caller's that proves the active claim is the caller's own."""
    record = claim.record
    if record is None:
        return None
    paths = [explicit] if explicit else receipts_mod.candidates(receipt_dir(store), claim.ref)
    for path in paths:
        try:
            rec = receipts_mod.read(path)
        except GitleaseError:
            continue
        ref = rec.claim_for(claim.resource)
        ours = ref is not None and ref.claim_id == record.claim_id and rec.token is not None
        if ours and SigningKey(rec.token or "").public_hex == record.public_key:
            return path
    return None


# ------------------------------------------------------------------ owned operations


def load_receipt(
    store: Store, resource: str | None, receipt: str | os.PathLike[str] | None
) -> tuple[Receipt, ClaimRef]:
    """Find the caller's receipt: ``--receipt``/``GITLEASE_RECEIPT``, else this worktree's."""
    if resource is not None:
        validate_resource(resource)
    explicit = receipts_mod.explicit_path(receipt)
    if explicit is not None:
        rec = receipts_mod.read(explicit)
        if rec.store != str(store.git_dir):
            raise UsageError(
                f"receipt {explicit} belongs to the store {rec.store}, not {store.git_dir}"
            )
        return rec, _pick_claim(rec, resource)
    directory = receipt_dir(store)
    if resource is None:
        return _only_receipt(store, directory)
    ref = encode(resource)
    paths = receipts_mod.candidates(directory, ref)
    current = describe(store.read(ref), Now.read(), resource)
    current_id = current.record.claim_id if current.record else None
    first_error: GitleaseError | None = None
    matches: list[tuple[Receipt, ClaimRef]] = []
    for path in paths:
        try:
            rec = receipts_mod.read(path)
        except ReceiptError as exc:
            first_error = first_error or exc
            continue
        claim_ref = rec.claim_for(resource)
        if claim_ref is None:
            continue
        if claim_ref.claim_id == current_id:
            return rec, claim_ref
        matches.append((rec, claim_ref))
    if matches:
        return max(matches, key=lambda m: m[1].revision)
    if first_error is not None:
        raise first_error
    raise ReceiptError(
        f"no receipt for {resource} in {directory}: you do not hold it here "
        "(pass --receipt if the claim was taken elsewhere)",
        claim=current.to_dict(),
    )


def _pick_claim(rec: Receipt, resource: str | None) -> ClaimRef:
    if resource is None:
        if len(rec.claims) == 1:
            return rec.claims[0]
        raise UsageError(
            f"receipt {rec.path} holds a bundle of {len(rec.claims)} claims: name the resource, "
            "or use `gitlease bundle ...`"
        )
    claim_ref = rec.claim_for(resource)
    if claim_ref is None:
        raise ReceiptError(f"receipt {rec.path} holds no claim on {resource}")
    return claim_ref


def _only_receipt(store: Store, directory: Path) -> tuple[Receipt, ClaimRef]:
    """The one single-claim receipt here with a live token (else the newest released one,
    so that a retried ``release`` without a resource answers success)."""
    live: list[Receipt] = []
    spent: list[Receipt] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        names = []
    for name in names:
        if name.endswith(".json") and not name.startswith(("bundle-", ".")):
            try:
                rec = receipts_mod.read(directory / name)
            except ReceiptError:
                continue
            if rec.store == str(store.git_dir):
                (live if rec.token else spent).append(rec)
    if len(live) == 1:
        return live[0], live[0].claims[0]
    if not live and spent:
        newest = max(spent, key=lambda r: r.path.stat().st_mtime)
        return newest, newest.claims[0]
    if not live:
        raise ReceiptError(f"no receipt with a live token in {directory}: name the resource")
    names = ", ".join(sorted(r.claims[0].resource for r in live))
    raise UsageError(f"this worktree holds receipts for several resources ({names}): name one")


def _owned_record(claim: Claim, receipt: Receipt, claim_ref: ClaimRef) -> Record:
    """The current record if it is still the receipt's claim; LOST with the reason otherwise."""
    if claim.state == "invalid":
        raise LostError(
            f"{claim.resource}: the record no longer verifies ({claim.problem}); your claim "
            f"{claim_ref.claim_id} cannot be shown to be held. Stop mutating; "
            "run `gitlease verify`",
            claim=claim.to_dict(),
        )
    record = claim.record
    if record is None:
        raise LostError(
            f"{claim.resource}: the ref is gone; claim {claim_ref.claim_id} is not held",
            claim=claim.to_dict(),
        )
    if record.claim_id != claim_ref.claim_id or record.revision != claim_ref.revision:
        raise LostError(
            f"claim {claim_ref.claim_id} (revision {claim_ref.revision}) was replaced: "
            f"{claim.describe()}. Stop mutating, preserve progress, re-acquire",
            claim=claim.to_dict(),
        )
    if not receipt.token:
        if record.state == RELEASED:
            return record
        raise ReceiptError(f"receipt {receipt.path} has no token", claim=claim.to_dict())
    if SigningKey(receipt.token).public_hex != record.public_key:
        raise LostError(
            f"{claim.resource}: the record's key does not match receipt {receipt.path}; "
            "the record was replaced or forged",
            claim=claim.to_dict(),
        )
    return record


def heartbeat(
    store: Store,
    resource: str | None = None,
    *,
    ttl: str | int | None = None,
    receipt: str | os.PathLike[str] | None = None,
) -> Claim:
    """Extend the caller's claim by its TTL (or a new one). LOST if it expired: never revived."""
    new_ttl = resolve_ttl(ttl) if ttl is not None else None
    store.repo  # noqa: B018 - a write follows: read with pygit2 from the start
    rec, claim_ref = load_receipt(store, resource, receipt)
    return heartbeat_many(store, rec, [claim_ref], new_ttl)[0]


def heartbeat_many(
    store: Store, rec: Receipt, claim_refs: list[ClaimRef], new_ttl: int | None
) -> list[Claim]:
    store.repo  # noqa: B018 - a write follows: read with pygit2 from here on

    def attempt() -> list[Claim]:
        with _guards(store, [c.ref for c in claim_refs]):
            now = Now.read()
            plans = []
            for claim_ref in claim_refs:
                snap = store.read(claim_ref.ref)
                claim = describe(snap, now, claim_ref.resource)
                record = _owned_record(claim, rec, claim_ref)
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
                ttl_ms = new_ttl or record.ttl_ms
                plans.append((snap, _renewed(record, now, ttl_ms, snap.oid)))
            return _write(store, rec, plans, "heartbeat", now)

    # From what this host last saw: its own writes are mirrored at once, and if the
    # coordinator moved on meanwhile the compare-and-swap refuses, and a fresh look follows.
    return _with_cas_retry(attempt, refresh=store.refresh)


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


def release(
    store: Store,
    resource: str | None = None,
    *,
    checkpoint: str | None = None,
    receipt: str | os.PathLike[str] | None = None,
) -> Claim:
    """Write the tombstone; idempotent for the caller's own released claim."""
    store.repo  # noqa: B018 - a write follows: read with pygit2 from the start
    rec, claim_ref = load_receipt(store, resource, receipt)
    return release_many(store, rec, [claim_ref], checkpoint)[0]


def release_many(
    store: Store, rec: Receipt, claim_refs: list[ClaimRef], checkpoint: str | None
) -> list[Claim]:
    if checkpoint is not None and "\0" in checkpoint:
        raise UsageError("a checkpoint must not contain NUL characters")

    store.repo  # noqa: B018 - a write follows: read with pygit2 from here on

    def attempt() -> list[Claim]:
        with _guards(store, [c.ref for c in claim_refs]):
            now = Now.read()
            plans: list[tuple[Snapshot, Record | None]] = []
            done: list[Claim] = []
            for claim_ref in claim_refs:
                snap = store.read(claim_ref.ref)
                claim = describe(snap, now, claim_ref.resource)
                record = _owned_record(claim, rec, claim_ref)
                if record.state == RELEASED:
                    done.append(claim)
                    continue
                if is_expired(record, now):
                    raise LostError(
                        f"{claim.describe()}: released nothing. Your last writes may have come "
                        "after your ownership ended",
                        claim=claim.to_dict(),
                    )
                tombstone = record.evolve(
                    state=RELEASED,
                    released_at=rfc3339(now.wall_ms),
                    expires_at=rfc3339(now.wall_ms),
                    boot_id=now.boot,
                    boot_expires_ms=now.boot_ms,
                    checkpoint=checkpoint if checkpoint is not None else record.checkpoint,
                    previous=snap.oid,
                )
                plans.append((snap, tombstone))
            written = _write(store, rec, plans, "release", now) if plans else []
            return done + written

    claims = _with_cas_retry(attempt, refresh=store.refresh)  # as for heartbeat
    if rec.token is not None and {c.ref for c in claim_refs} >= {c.ref for c in rec.claims}:
        # the token leaves the receipt once nothing it proves is held (a bundle member
        # released on its own leaves the token for the others)
        receipts_mod.write(receipts_mod.without_token(rec), exclusive=False)
    wt = store.location.worktree_git_dir
    if wt is not None:
        for claim_ref in claim_refs:
            receipts_mod.unbind(wt, claim_ref.ref, claim_ref.claim_id)
    order = {c.ref: i for i, c in enumerate(claim_refs)}
    return sorted(claims, key=lambda c: order[c.ref])


def check(
    store: Store,
    resource: str | None = None,
    *,
    min_remaining: str | int | None = None,
    receipt: str | os.PathLike[str] | None = None,
) -> Claim:
    """The re-check before a durable write: held, and with at least ``min_remaining`` left."""
    need = parse_duration_ms(min_remaining, name="--min-remaining") if min_remaining else 0
    store.refresh()
    rec, claim_ref = load_receipt(store, resource, receipt)
    return check_many(store, rec, [claim_ref], need)[0]


def check_many(store: Store, rec: Receipt, claim_refs: list[ClaimRef], need_ms: int) -> list[Claim]:
    now = Now.read()
    if len(claim_refs) == 1:
        snaps = [store.read(claim_refs[0].ref)]
    else:
        by_ref = {s.ref: s for s in store.read_all()}
        snaps = [by_ref.get(c.ref, Snapshot(c.ref, None, None)) for c in claim_refs]
    claims = []
    for claim_ref, snap in zip(claim_refs, snaps, strict=True):
        claim = describe(snap, now, claim_ref.resource)
        record = _owned_record(claim, rec, claim_ref)
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
        claims.append(claim)
    return claims


def _write(
    store: Store, rec: Receipt, plans: list[tuple[Snapshot, Record | None]], verb: str, now: Now
) -> list[Claim]:
    """Sign and compare-and-swap every planned record in one transaction."""
    assert rec.token is not None
    key = SigningKey(rec.token)
    signed = [(snap, record.signed(key)) for snap, record in plans if record is not None]
    first = signed[0][1]
    message = f"gitlease {verb}: {first.claim_id} revision {first.revision}"
    oids = store.compare_and_swap_many(
        [(snap.ref, snap.oid, record.raw or b"") for snap, record in signed], message
    )
    return [
        describe(Snapshot(snap.ref, oid, record.raw), now, record.resource)
        for (snap, record), oid in zip(signed, oids, strict=True)
    ]


def _with_cas_retry(attempt: Callable[[], Any], refresh: Callable[[], None] | None = None) -> Any:
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


class _guards:
    """Hold several guards at once, always taken in ref order (no deadlock between bundles)."""

    def __init__(self, store: Store, refs: Iterable[str]) -> None:
        self.store = store
        self.refs = sorted(set(refs))
        self._stack: list[Any] = []

    def __enter__(self) -> None:
        try:
            for ref in self.refs:
                cm = self.store.guard(ref)
                cm.__enter__()
                self._stack.append(cm)
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: object) -> None:
        while self._stack:
            self._stack.pop().__exit__(None, None, None)


# ------------------------------------------------------------------ reading


def show(store: Store, resource: str) -> Claim:
    """The record of one resource, non-secret; STORE if it does not verify."""
    ref = encode(resource)
    store.refresh()
    claim = describe(store.read(ref), Now.read(), resource)
    claim = _mark_bound(store, [claim])[0]
    if claim.state == "invalid":
        raise _store_error(claim)
    return claim


def list_claims(
    store: Store, *, state: str | None = None, prefix: str | None = None
) -> list[Claim]:
    """Every claim in the store (invalid ones included and marked), in one pass over the refs."""
    store.refresh()
    now = Now.read()
    claims = [describe(s, now) for s in store.read_all()]
    if prefix:
        claims = [c for c in claims if c.resource.startswith(prefix)]
    if state:
        claims = [c for c in claims if c.state == state]
    claims.sort(key=lambda c: c.resource)
    return _mark_bound(store, claims)


def free(store: Store, resources: Iterable[str]) -> list[Claim]:
    """Of the given resources, those that could be acquired now (never an invalid one)."""
    wanted = [validate_resource(r) for r in resources]
    if wanted:
        store.refresh()
    now = Now.read()
    by_ref = {s.ref: s for s in store.read_all()} if wanted else {}
    out, seen = [], set()
    for resource in wanted:
        ref = encode(resource)
        if ref in seen:
            continue
        seen.add(ref)
        claim = describe(by_ref.get(ref, Snapshot(ref, None, None)), now, resource)
        if claim.state in ("free", "released", "expired"):
            out.append(claim)
    return out


def log(store: Store, resource: str) -> list[Claim]:
    """Every transition, oldest first, following the records' own chain (not the reflog)."""
    ref = encode(resource)
    store.refresh()
    now = Now.read()
    snap = store.read(ref)
    chain: list[Claim] = []
    seen: set[str] = set()
    while snap.oid is not None and snap.oid not in seen:
        seen.add(snap.oid)
        claim = describe(snap, now, resource)
        chain.append(claim)
        if claim.record is None or claim.record.previous is None:
            break
        data, problem = store.read_blob(claim.record.previous)
        if data is None:
            break  # pruned or collected: the chain starts here
        snap = Snapshot(ref, claim.record.previous, data, problem)
    chain.reverse()
    return [_historic(c, chain[i + 1] if i + 1 < len(chain) else None) for i, c in enumerate(chain)]


def _historic(claim: Claim, successor: Claim | None) -> Claim:
    if successor is None or claim.record is None or claim.state in ("released", "invalid"):
        return claim
    same = successor.record is not None and successor.record.claim_id == claim.record.claim_id
    return claim.replace(state="active" if same else "expired", expires_in_ms=None)


def _mark_bound(store: Store, claims: list[Claim]) -> list[Claim]:
    wt = store.location.worktree_git_dir
    if wt is None:
        return claims
    bound = {(b.ref, b.claim_id) for b in receipts_mod.bindings(wt) if isinstance(b, Binding)}
    if not bound:
        return claims
    return [
        c.replace(bound=True) if c.record and (c.ref, c.record.claim_id) in bound else c
        for c in claims
    ]


# ------------------------------------------------------------------ binding


def bind(store: Store, resource: str, receipt: str | os.PathLike[str] | None = None) -> Claim:
    """Tie this worktree to the caller's active claim, for the commit hooks."""
    wt = store.location.worktree_git_dir
    if wt is None:
        raise UsageError("bind needs a git worktree: run it inside one")
    store.refresh()
    rec, claim_ref = load_receipt(store, resource, receipt)
    claim = check_many(store, rec, [claim_ref], 0)[0]
    receipts_mod.bind(wt, Binding(claim.resource, claim.ref, claim_ref.claim_id, str(rec.path)))
    return claim.replace(bound=True)


def unbind(store: Store, resource: str | None = None) -> list[str]:
    """Remove this worktree's binding to ``resource`` (all bindings if None)."""
    wt = store.location.worktree_git_dir
    if wt is None:
        raise UsageError("unbind needs a git worktree: run it inside one")
    removed = []
    for b in receipts_mod.bindings(wt):
        if isinstance(b, Path):
            if resource is None:
                receipts_mod.remove(b)
            continue
        if resource is None or b.resource == resource:
            receipts_mod.unbind(wt, b.ref)
            removed.append(b.resource)
    return removed


# ------------------------------------------------------------------ the Python API's handle


class Lease:
    """A held claim; as a context manager it heartbeats in the background and releases on exit.

    ``with gitlease.acquire_lease(store, "github/acme/api/42", ttl="5m") as lease:``
    work, calling ``lease.check()`` before each durable write.
    """

    def __init__(self, store: Store, acquired: Acquired) -> None:
        self.store = store
        self.claim = acquired.claim
        self.receipt_path = acquired.receipt.path
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: LostError | None = None
        self._lock = threading.Lock()

    @property
    def resource(self) -> str:
        return self.claim.resource

    def heartbeat(self, ttl: str | int | None = None) -> Claim:
        with self._lock:
            self.claim = heartbeat(self.store, self.resource, ttl=ttl, receipt=self.receipt_path)
            return self.claim

    def check(self, min_remaining: str | int | None = None) -> Claim:
        if self.lost is not None:
            raise self.lost
        with self._lock:  # one thread at a time on the store (the heartbeat thread too)
            return check(
                self.store, self.resource, min_remaining=min_remaining, receipt=self.receipt_path
            )

    def release(self, checkpoint: str | None = None) -> Claim:
        self._stop_heartbeats()
        with self._lock:
            self.claim = release(
                self.store, self.resource, checkpoint=checkpoint, receipt=self.receipt_path
            )
            return self.claim

    def _beat(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.heartbeat()
            except LostError as exc:
                self.lost = exc
                return
            except GitleaseError:
                continue  # transient (guard busy, store hiccup): try again next interval

    def start_heartbeats(self) -> None:
        assert self.claim.record is not None
        interval = self.claim.record.ttl_ms / 3000
        self._thread = threading.Thread(target=self._beat, args=(interval,), daemon=True)
        self._thread.start()

    def _stop_heartbeats(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> Lease:
        self.start_heartbeats()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.release()  # stops the heartbeat thread first
        except LostError:
            if exc_type is None:
                raise


def acquire_lease(store: Store, resource: str, **options: Any) -> Lease:
    """:func:`acquire` returning a :class:`Lease` handle (a context manager)."""
    options.setdefault("bind", False)
    return Lease(store, acquire(store, resource, **options))


def iter_resources(lines: Iterable[str]) -> Iterator[str]:
    """Resources from text lines (``-`` on the command line): blank lines skipped."""
    for line in lines:
        line = line.rstrip("\r\n")
        if line.strip():
            yield line
