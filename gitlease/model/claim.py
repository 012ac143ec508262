"""The claim model: what a record means now, judged without touching the store.

A snapshot of a ref becomes a :class:`Claim` with a state (``active``,
``expired``, ``released``, ``free``, ``invalid``) through :func:`judge`: the
record is parsed and verified, checked to name its own resource, and timed on
this host's boot clock. Nothing here reads or writes the store, so every
decision elsewhere can be made from exactly what was read.

A claim also shows the keeper renewing it, where a command looked: a
:class:`~gitlease.model.keeper.Keeper`, read from the host's registry
(:mod:`gitlease.state.keepers`, which writes and reads it).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from pathlib import Path

from .._util import TYPE_CHECKING
from .._util.text import printable
from .._util.value import Value
from ..errors import CorruptRecordError, HeldError, UsageError
from ..gitio.gitread import Snapshot
from ..receipts.receipt import ClaimRef
from .bootclock import kernel_boot, on_this_clock_ms
from .clock import Now, format_duration, parse_rfc3339
from .record import COORDINATION_ONLY, GUARDED, RELEASED, Record, blob_oid, parse, parse_and_verify
from .refname import decode

if TYPE_CHECKING:  # (the hook reads claims and never a keeper: one module fewer)
    from typing import Any, ClassVar

    from .keeper import Keeper

GUARANTEES = {
    GUARDED: "guarded: gitlease refuses other callers while the claim is active; local writes "
    "through exec, replace-file and the commit hooks are checked against it",
    COORDINATION_ONLY: "coordination only: cooperating callers on this host see the claim and "
    "choose other work; the remote mutation itself is not fenced",
}


class Claim(Value):
    """What a resource's ref says now, for people and programs (never secret)."""

    __slots__ = (
        "resource", "ref", "state", "record", "oid", "problem", "expires_in_ms", "bound",
        "keepalive",
    )  # fmt: skip
    _defaults: ClassVar[dict[str, Any]] = {
        "record": None, "oid": None, "problem": None, "expires_in_ms": None, "bound": None,
        "keepalive": None,
    }  # fmt: skip
    resource: str
    ref: str
    state: str  # active, expired, released, free, invalid
    record: Record | None
    oid: str | None
    problem: str | None
    expires_in_ms: int | None
    bound: bool | None  # whether this worktree is bound to it; None where a command did not look
    keepalive: Keeper | None  # the keepalive process renewing it, where a command looked

    @property
    def active(self) -> bool:
        """Whether the record is a held claim that has not expired."""
        return self.state == "active"

    @property
    def coordination_only(self) -> bool:
        """Whether the record says the durable mutation happens elsewhere (a remote API):
        every output about such a claim says what that guarantees (:attr:`guarantee`)."""
        return self.record is not None and self.record.mode == COORDINATION_ONLY

    @property
    def guarantee(self) -> str | None:
        """What the claim's mode guarantees, in words (None without a record)."""
        return GUARANTEES.get(self.record.mode) if self.record else None

    def to_dict(self) -> dict[str, Any]:
        """The claim as the JSON document every command prints (docs/reference/json.md)."""
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
            "paths": list(r.paths) if r and r.paths is not None else None,
            "oid": self.oid,
            "guarantee": self.guarantee,
            "bound": self.bound,
            "keepalive": self.keepalive.to_dict() if self.keepalive is not None else None,
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
            f"{self.resource}: claim {r.claim_id} by {printable(r.owner)}, revision {r.revision}"
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
    if first_seen_ms is None and not on_this_clock(record, now) and not _this_boot(record, now):
        return True
    return remaining_ms(record, now, first_seen_ms) <= 0


def on_this_clock(record: Record, now: Now) -> bool:
    """Whether ``record`` was written on this process's boot clock: this boot id and no
    boot clock moved beyond translation (:mod:`gitlease.model.bootclock`)."""
    return _translated(record, now) is not None


def holder_remaining_ms(record: Record, now: Now) -> int | None:
    """For the holder of ``record`` (its receipt is here): the time its claim has left on
    this clock, or None when it was written on another boot clock (then it is not held
    here). The wall clock plays no part: a holder never waits on a sighting."""
    translated = on_this_clock_ms(
        record.boot_id, record.expires_at, record.boot_expires_ms, now, check_start=False
    )
    return None if translated is None else translated - now.boot_ms


def _translated(record: Record, now: Now) -> int | None:
    return on_this_clock_ms(record.boot_id, record.expires_at, record.boot_expires_ms, now)


def _this_boot(record: Record, now: Now) -> bool:
    return kernel_boot(record.boot_id) == kernel_boot(now.boot)


def remaining_ms(record: Record, now: Now, first_seen_ms: int | None = None) -> int:
    """Milliseconds the claim has left on this host's clock (negative: expired that long ago).

    A record of this kernel boot on a foreign boot clock (a time namespace, a VM clone)
    cannot date from before a reboot: it is timed from its first sighting, and seen
    without one (a read that stamped none) it counts as first seen now, never expired."""
    translated = _translated(record, now)
    if translated is not None:
        return translated - now.boot_ms
    if first_seen_ms is not None:
        return first_seen_ms + observed_lifetime_ms(record.ttl_ms) - now.boot_ms
    if _this_boot(record, now):
        return observed_lifetime_ms(record.ttl_ms)
    return min(0, parse_rfc3339(record.expires_at) - now.wall_ms)


def observed_lifetime_ms(ttl_ms: int) -> int:
    """How long another host's record must be seen unchanged before it counts as expired.

    A whole TTL, counted from this host's first sighting, which comes after the
    write (so after the holder started its own TTL), plus 1% for the two boot
    clocks' rates differing (NTP slews at most 0.05%). Other hosts' clock
    readings never enter into it.
    """
    return ttl_ms + ttl_ms // 100


def judge(
    snap: Snapshot, now: Now, resource: str | None = None, known: Container[str | None] = ()
) -> Claim:
    """The claim a snapshot shows: parsed, verified, checked to name its own resource, timed.

    ``resource``: what the caller asked for (None: decoded from the ref name).
    ``known``: object ids of records known to be good (see :func:`verified`).
    """
    found = verdict(snap, resource, known)
    if isinstance(found, Claim):
        return found
    return timed(snap, found, found.resource, now)


def verdict(
    snap: Snapshot, resource: str | None = None, known: Container[str | None] = ()
) -> Record | Claim:
    """What :func:`judge` finds before it reads the clock: the verified record (whose
    ``resource`` is the one asked for), or the claim whatever the time (free, invalid)."""
    if resource is None:
        try:
            resource = decode(snap.ref)
        except UsageError:  # a hand-made ref (verify reports it as bad-ref-name)
            problem = "the ref name is not one gitlease writes"
            return Claim(snap.ref, snap.ref, "invalid", oid=snap.oid, problem=problem)
    if snap.oid is None:
        return Claim(resource, snap.ref, "free")
    try:
        return verified(snap, resource, known)
    except CorruptRecordError as exc:
        return Claim(resource, snap.ref, "invalid", oid=snap.oid, problem=str(exc))


def timed(snap: Snapshot, record: Record, resource: str, now: Now) -> Claim:
    """The claim of a record already verified (:func:`verified`) for ``snap``, timed at
    ``now``: what :func:`judge` gives."""
    if record.state == RELEASED:
        return Claim._of((resource, snap.ref, "released", record, snap.oid, None, None, None, None))
    return _timed(snap, record, resource, now, _translated(record, now))


#: Stamps snapshots with their first sightings (:func:`~gitlease.model.bootclock.stamp_foreign`
#: over the store's own file), the snapshots given and in their order.
Sighting = Callable[[list[Snapshot]], list[Snapshot]]


def timed_many(
    found: Sequence[tuple[Snapshot, Record | Claim]], now: Now, sighting: Sighting | None = None
) -> list[Claim]:
    """What :func:`judge` gives for each snapshot, from what :func:`verdict` found in it (a
    reader that keeps verified records, the board's listing, times them afresh at every
    look; ``list`` verifies a batch, then times it). Each record's clock is read once;
    ``sighting``, when given, stamps the snapshots that want a first sighting (a record of
    this kernel boot on a clock that cannot be translated: those
    :func:`~gitlease.model.bootclock.stamp_foreign` stamps), all in one call."""
    clocks: list[int | None] = []
    wanted: list[int] = []
    for i, (snap, record) in enumerate(found):
        translated = None
        if isinstance(record, Record) and record.state != RELEASED:
            translated = _translated(record, now)
            if (
                translated is None
                and snap.first_seen_ms is None
                and sighting is not None
                and _this_boot(record, now)
            ):
                wanted.append(i)
        clocks.append(translated)
    stamped = (
        dict(zip(wanted, sighting([found[i][0] for i in wanted]), strict=True))
        if wanted and sighting
        else {}
    )
    out: list[Claim] = []
    for i, (snap, record) in enumerate(found):
        if not isinstance(record, Record):
            out.append(record)
        elif record.state == RELEASED:
            out.append(timed(snap, record, record.resource, now))
        else:
            out.append(_timed(stamped.get(i, snap), record, record.resource, now, clocks[i]))
    return out


def _timed(
    snap: Snapshot, record: Record, resource: str, now: Now, translated: int | None
) -> Claim:
    """A held record's claim at ``now``, ``translated`` its expiry on this clock
    (:func:`_translated`): ``remaining_ms`` and ``is_expired`` at once."""
    first_seen_ms = snap.first_seen_ms
    if translated is not None:
        left = translated - now.boot_ms
    elif first_seen_ms is not None:
        left = first_seen_ms + observed_lifetime_ms(record.ttl_ms) - now.boot_ms
    elif _this_boot(record, now):
        left = observed_lifetime_ms(record.ttl_ms)
    else:  # another boot, no sighting: expired, however far its wall time lies ahead
        left = min(0, parse_rfc3339(record.expires_at) - now.wall_ms)
        return Claim._of((resource, snap.ref, "expired", record, snap.oid, None, left, None, None))
    state = "expired" if left <= 0 else "active"
    # (every field given, in order: this runs once per claim of a `list`)
    return Claim._of((resource, snap.ref, state, record, snap.oid, None, left, None, None))


def seems_held(snap: Snapshot, now: Now, resource: str) -> bool:
    """Whether the snapshot shows a held, unexpired claim on ``resource``, judged without
    checking its signature.

    For passing over candidates cheaply (``acquire --first-free``: Ed25519 costs
    most of a judgement): passing over is what a held claim gets, and what an
    invalid record gets too, so the answer is safe either way. Never a reason to
    grant: a False answer is followed by a full :func:`judge`.
    """
    if snap.oid is None or snap.data is None or snap.problem:
        return False
    try:
        record = parse(snap.data)
    except CorruptRecordError:
        return False
    if record.resource != resource or record.state == RELEASED:
        return False
    return not is_expired(record, now, snap.first_seen_ms)


def verified(snap: Snapshot, resource: str, known: Container[str | None] = ()) -> Record:
    """The snapshot's record, or :class:`CorruptRecordError` if it cannot be trusted.

    The signature is not checked again when the snapshot's object id is in
    ``known`` (the holder's own last record, or one verified before) and the
    bytes hash to that id: the id is then a name for exactly those bytes.
    """
    if snap.problem or snap.data is None:
        raise CorruptRecordError(f"the ref cannot be read: {snap.problem}")
    oid = snap.oid
    if oid is not None and oid in known and blob_oid(snap.data, len(oid)) == oid:
        record = parse(snap.data)
    else:
        record = parse_and_verify(snap.data)
    if record.resource != resource:
        raise CorruptRecordError(f"the ref holds the record of {record.resource!r}")
    return record


def is_ours(claim: ClaimRef, data: bytes | None) -> bool:
    """Whether ``data`` is byte for byte the record this holder last wrote for ``claim``.

    True only when the receipt knows that record's object id and ``data``
    hashes to it: then the record's signature and key are the holder's own,
    and checking them again would prove nothing more.
    """
    oid = claim.oid
    return oid is not None and data is not None and blob_oid(data, len(oid)) == oid


def corrupt_error(claim: Claim) -> CorruptRecordError:
    """STORE for an invalid record: it is never granted over, only repaired or fixed by hand."""
    return CorruptRecordError(
        f"{claim.resource}: the record is corrupt or tampered with ({claim.problem}); "
        "it is never granted over. Run `gitlease verify`, then `gitlease verify --repair` "
        "or fix it by hand",
        claim=claim.to_dict(),
    )


def rolled_back_error(claim: Claim, mark: int) -> CorruptRecordError:
    """STORE for a ref moved back below a revision this host wrote or saw (its high-water
    mark, :mod:`gitlease.state.highwater`): granting it over would repeat a revision."""
    shown = claim.record.revision if claim.record else 0
    return CorruptRecordError(
        f"{claim.resource}: the ref was moved back to an older record (revision {shown}; "
        f"revision {mark} was written here before), as a restored backup or a hand-run "
        "`git update-ref` does; it is never granted over, since a revision would repeat. "
        "Run `gitlease verify`, then `gitlease verify --repair`",
        claim=claim.to_dict(),
    )


def held_error(claim: Claim, own_receipt: Path | None = None) -> HeldError:
    """HELD naming the holder; with ``own_receipt``, says the active claim is the caller's."""
    if own_receipt is not None:
        message = (
            f"{claim.describe()}. The active claim is yours (receipt {own_receipt}): "
            "heartbeat or release it instead; acquire never takes over an active claim"
        )
    else:
        message = f"{claim.describe()}. Choose other ready work, or wait"
    return HeldError(message, claim=claim.to_dict(), holder=claim)
