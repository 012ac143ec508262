"""Acquiring one resource or several at once, all or nothing (SPEC §3 Bundles).

A single acquire is a bundle of one without a bundle id: one code path takes
the guards in ref order, reads every ref, decides from what it read, writes the
receipt, and compare-and-swaps every ref in one reference transaction.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import lease as L
from . import receipts as receipts_mod
from .clock import Now, parse_duration_ms, rfc3339
from .errors import (
    AmbiguousError,
    CorruptRecordError,
    GitleaseError,
    HeldError,
    StoreError,
    UsageError,
)
from .receipts import Binding, ClaimRef, Receipt
from .record import (
    COORDINATION_ONLY,
    GUARDED,
    HELD,
    Record,
    SigningKey,
    new_bundle_id,
    new_claim_id,
    new_token,
)
from .refname import encode, validate_resource
from .store import CompareAndSwapFailed, Snapshot, Store
from .value import Value


class BundleResult(Value):
    """Claims in the order they were asked for, and the receipt that proves them."""

    __slots__ = ("bundle_id", "claims", "receipt")
    bundle_id: str | None
    claims: list[L.Claim]
    receipt: Receipt

    def to_dict(self) -> dict[str, Any]:
        return {
            "bundle_id": self.bundle_id,
            "claims": [c.to_dict() for c in self.claims],
            "receipt": str(self.receipt.path),
        }


def acquire_many(
    store: Store,
    resources: list[str],
    *,
    ttl: str | int | None = None,
    owner: str | None = None,
    note: str | None = None,
    coordination_only: bool = False,
    receipt: str | os.PathLike[str] | None = None,
    wait: str | int | None = None,
    bind: bool = True,
    on_wait: Any = None,
    single: bool = False,
) -> BundleResult:
    """Take every resource or none."""
    if not resources:
        raise UsageError("name at least one resource")
    for resource in resources:
        validate_resource(resource)
    refs = [encode(r) for r in resources]
    if len(set(refs)) != len(refs):
        dupes = sorted({r for r, ref in zip(resources, refs, strict=True) if refs.count(ref) > 1})
        raise UsageError(f"duplicate resources in one request: {', '.join(dupes)}")
    if note is not None and "\0" in note:
        raise UsageError("a note must not contain NUL characters")
    ttl_ms = L.resolve_ttl(ttl)
    owner = L.resolve_owner(owner)
    deadline = parse_duration_ms(wait, name="--wait") if wait is not None else None
    explicit = receipts_mod.explicit_path(receipt)
    if explicit is not None:
        receipts_mod.check_explicit_location(explicit)
    mode = COORDINATION_ONLY if coordination_only else GUARDED
    store.repo  # noqa: B018 - open the repository so reads under the guard use pygit2

    def judge(snaps: list[Snapshot], now: Now) -> list[L.Claim]:
        """The members' claims, or HELD / STORE if any cannot be taken."""
        claims = [L.describe(s, now, r) for s, r in zip(snaps, resources, strict=True)]
        for claim in claims:
            if claim.state == "invalid":
                raise L._store_error(claim)
            if claim.state == "active":
                raise L.held_error(claim, L.own_receipt_for(store, claim, explicit))
        return claims

    def attempt() -> BundleResult:
        try:  # refusing needs no guard
            judge([store.read(ref) for ref in refs], Now.read())
        except (HeldError, CorruptRecordError):
            if store.remote is None:
                raise
            # A remote store's mirror may be behind: refuse only on a fresh look. (A write
            # from a stale look is safe: the compare-and-swap refuses it, see below.)
            store.refresh()
            judge([store.read(ref) for ref in refs], Now.read())
        with L._guards(store, refs):
            now = Now.read()
            snaps = [store.read(ref) for ref in refs]
            claims = judge(snaps, now)
            if explicit is not None:
                _refuse_live_explicit(store, explicit, now)
            token = new_token()
            key = SigningKey(token)
            bundle_id = None if single else new_bundle_id()
            records = [
                _new_record(claim, snap, key, now, ttl_ms, owner, note, mode, bundle_id, store)
                for claim, snap in zip(claims, snaps, strict=True)
            ]
            claim_refs = tuple(
                ClaimRef(r.resource, ref, r.claim_id, r.revision)
                for r, ref in zip(records, refs, strict=True)
            )
            path = explicit or _default_receipt_path(store, refs[0], records[0], bundle_id)
            rec = Receipt(path, str(store.git_dir), token, claim_refs, bundle_id)
            receipts_mod.write(rec, exclusive=explicit is None)
            written = _commit(store, rec, snaps, records, now)
        if bind and store.location.worktree_git_dir is not None:
            _bind_all(store, rec)
            written = [c.replace(bound=True) for c in written]
        if explicit is None:
            _tidy(store, rec)
        return BundleResult(bundle_id, written, rec)

    result: BundleResult = L.retry_until(
        deadline, lambda: L._with_cas_retry(attempt, refresh=store.refresh), on_wait
    )
    return result


def _new_record(
    claim: L.Claim,
    snap: Snapshot,
    key: SigningKey,
    now: Now,
    ttl_ms: int,
    owner: str,
    note: str | None,
    mode: str,
    bundle_id: str | None,
    store: Store,
) -> Record:
    previous = claim.record
    revision = previous.revision + 1 if previous else store.revision_floor(snap.ref) + 1
    stamp = rfc3339(now.wall_ms)
    return Record(
        resource=claim.resource,
        state=HELD,
        claim_id=new_claim_id(),
        owner=owner,
        revision=revision,
        bundle_id=bundle_id,
        mode=mode,
        acquired_at=stamp,
        renewed_at=stamp,
        released_at=None,
        expires_at=rfc3339(now.wall_ms + ttl_ms),
        renew_by=rfc3339(now.wall_ms + ttl_ms // 2),
        ttl_ms=ttl_ms,
        boot_id=now.boot,
        boot_expires_ms=now.boot_ms + ttl_ms,
        note=note,
        checkpoint=None,
        public_key=key.public_hex,
        previous=snap.oid,
    ).signed(key)


def _commit(
    store: Store, rec: Receipt, snaps: list[Snapshot], records: list[Record], now: Now
) -> list[L.Claim]:
    """Compare-and-swap every member; settle an error by looking at what actually landed."""
    first = records[0]
    what = f"bundle {first.bundle_id}" if first.bundle_id else first.claim_id
    message = f"gitlease acquire: {what} revision {first.revision} owner {first.owner}"
    updates = [(s.ref, s.oid, r.raw or b"") for s, r in zip(snaps, records, strict=True)]
    try:
        oids = store.compare_and_swap_many(updates, message)
    except BaseException as exc:
        if store.remote is not None and not isinstance(exc, (CompareAndSwapFailed, StoreError)):
            # Interrupted mid-push (or its outcome unknown): the mirror cannot say what the
            # remote holds, so the receipt stays, to settle it with `show`.
            raise
        landed = _landed(store, records)
        if landed == len(records):
            oids = [store.read(r.ref).oid or "" for r in rec.claims]
        else:
            if landed == 0:
                receipts_mod.remove(rec.path)
                raise
            raise AmbiguousError(
                f"the acquire was interrupted after {landed} of {len(records)} members were "
                f"written ({exc}); compare receipt {rec.path} with `gitlease bundle show`. "
                "The written members expire by their TTL"
            ) from exc
    return [
        L.describe(Snapshot(s.ref, oid, r.raw), now, r.resource)
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


def _refuse_live_explicit(store: Store, path: Path, now: Now) -> None:
    """An explicit receipt path that still proves an active claim is never overwritten."""
    if not path.exists():
        return
    try:
        old = receipts_mod.read(path)
    except GitleaseError:
        return
    if not old.token:
        return
    for claim_ref in old.claims:
        claim = L.describe(store.read(claim_ref.ref), now, claim_ref.resource)
        if claim.state == "active" and claim.record and claim.record.claim_id == claim_ref.claim_id:
            raise HeldError(
                f"receipt {path} still proves your active claim on {claim_ref.resource}: "
                "release it first or choose another --receipt",
                claim=claim.to_dict(),
            )


def _default_receipt_path(store: Store, ref: str, record: Record, bundle_id: str | None) -> Path:
    directory = L.receipt_dir(store)
    if bundle_id is not None:
        return receipts_mod.bundle_path(directory, bundle_id)
    return receipts_mod.default_path(directory, ref, record.claim_id)


def _bind_all(store: Store, rec: Receipt) -> None:
    wt = store.location.worktree_git_dir
    if wt is None:
        return
    for c in rec.claims:
        receipts_mod.bind(wt, Binding(c.resource, c.ref, c.claim_id, str(rec.path)))


def _tidy(store: Store, rec: Receipt) -> None:
    """Drop this worktree's receipts that can never prove anything again.

    Those of released claims, once a day old (any resource), and the older ones
    of the same resource: a receipt of a lower or equal revision belongs to a
    claim that was replaced (or to a racing acquire whose compare-and-swap must
    fail); a token-less one to a released claim.
    """
    receipts_mod.remove_spent(rec.path.parent)
    if rec.bundle_id is not None:
        return
    claim = rec.claims[0]
    for path in receipts_mod.candidates(rec.path.parent, claim.ref):
        if path == rec.path or path.name.startswith("bundle-"):
            continue
        try:
            old = receipts_mod.read(path)
        except GitleaseError:
            continue
        mine = old.claim_for(claim.resource)
        if old.store != rec.store:
            continue  # a claim in another store (--store): not ours to judge
        if mine and (old.token is None or mine.revision < claim.revision):
            receipts_mod.remove(path)


# ------------------------------------------------------------------ bundle operations


def load_bundle_receipt(
    store: Store, bundle_id: str | None, receipt: str | os.PathLike[str] | None
) -> Receipt:
    explicit = receipts_mod.explicit_path(receipt)
    if explicit is not None:
        return receipts_mod.read(explicit)
    if bundle_id is None:
        directory = L.receipt_dir(store)
        found = sorted(directory.glob("bundle-*.json")) if directory.exists() else []
        live, spent = [], []
        for path in found:
            try:
                rec = receipts_mod.read(path)
            except GitleaseError:
                continue
            if rec.store == str(store.git_dir):
                (live if rec.token else spent).append(rec)
        if len(live) == 1:
            return live[0]
        if not live and spent:  # a retried `bundle release`: the newest released bundle
            return max(spent, key=lambda r: r.path.stat().st_mtime)
        raise UsageError(
            "name the bundle id (or --receipt): "
            + (f"{len(live)} bundles are held here" if live else "no bundle receipt here")
        )
    return receipts_mod.read(receipts_mod.bundle_path(L.receipt_dir(store), bundle_id))


def heartbeat(
    store: Store,
    bundle_id: str | None = None,
    *,
    ttl: str | int | None = None,
    receipt: str | os.PathLike[str] | None = None,
) -> BundleResult:
    rec = load_bundle_receipt(store, bundle_id, receipt)
    new_ttl = L.resolve_ttl(ttl) if ttl is not None else None
    return BundleResult(rec.bundle_id, L.heartbeat_many(store, rec, list(rec.claims), new_ttl), rec)


def release(
    store: Store,
    bundle_id: str | None = None,
    *,
    checkpoint: str | None = None,
    receipt: str | os.PathLike[str] | None = None,
) -> BundleResult:
    rec = load_bundle_receipt(store, bundle_id, receipt)
    return BundleResult(
        rec.bundle_id, L.release_many(store, rec, list(rec.claims), checkpoint), rec
    )


def check(
    store: Store,
    bundle_id: str | None = None,
    *,
    min_remaining: str | int | None = None,
    receipt: str | os.PathLike[str] | None = None,
) -> BundleResult:
    rec = load_bundle_receipt(store, bundle_id, receipt)
    need = parse_duration_ms(min_remaining, name="--min-remaining") if min_remaining else 0
    store.refresh()
    return BundleResult(rec.bundle_id, L.check_many(store, rec, list(rec.claims), need), rec)


def show(
    store: Store, bundle_id: str | None = None, *, receipt: str | os.PathLike[str] | None = None
) -> tuple[str | None, list[L.Claim]]:
    """The members' current records: from the receipt if there is one, else by bundle id."""
    rec: Receipt | None = None
    if receipt is not None or bundle_id is None:
        rec = load_bundle_receipt(store, bundle_id, receipt)
    else:
        try:
            rec = load_bundle_receipt(store, bundle_id, None)
        except GitleaseError:
            rec = None
    if rec is not None:
        store.refresh()  # (list_claims below fetches by itself)
        now = Now.read()
        by_ref = {s.ref: s for s in store.read_all()}
        claims = [
            L.describe(by_ref.get(c.ref, Snapshot(c.ref, None, None)), now, c.resource)
            for c in rec.claims
        ]
        return rec.bundle_id, claims
    members = [c for c in L.list_claims(store) if c.record and c.record.bundle_id == bundle_id]
    if not members:
        raise UsageError(f"no claim in the store carries bundle id {bundle_id}")
    return bundle_id, members
