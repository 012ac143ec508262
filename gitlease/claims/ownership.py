"""Which receipt proves which claim: finding the caller's receipt and judging it.

A caller holds a claim when it has the receipt whose token derives the key in
the current record (docs/concepts.md). This module finds receipts (an explicit
``--receipt``/``GITLEASE_RECEIPT``, else the current worktree's, through
:mod:`gitlease.receipts.directory`), tells a receipt's claim from the record now at the
ref, and says which members of a bundle were never written and which claims this worktree
is bound to. Keeping the receipts and bindings up to date with what was written is
:mod:`gitlease.claims.bookkeeping`'s.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from .._util import TYPE_CHECKING
from .._util.files import mtime
from ..errors import (
    CorruptRecordError,
    GitleaseError,
    HeldError,
    LostError,
    PartialBundleError,
    ReceiptError,
    UsageError,
)
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, is_ours, judge
from ..model.clock import Now
from ..model.record import RELEASED, Record, SigningKey, known, parse
from ..model.refname import encode, validate_resource
from ..receipts import bindings as bindings_mod
from ..receipts import directory as receiptdir
from ..receipts import receipt as receipts_mod
from ..receipts.bindings import Binding
from ..receipts.receipt import ClaimRef, Receipt
from ..store.base import Store
from ..store.location import state_home

if TYPE_CHECKING:
    from ..receipts import reservation


def receipt_dir(store: Store) -> Path:
    """Where this worktree's receipts live (per-user state outside a worktree)."""
    wt = store.location.worktree_git_dir
    return _worktree_receipts(wt) if wt is not None else receiptdir.default_dir(None, state_home())


@functools.lru_cache(maxsize=16)
def _worktree_receipts(worktree_git_dir: Path) -> Path:
    return receiptdir.default_dir(worktree_git_dir, Path())


def _checked_dir(store: Store) -> Path:
    """The receipt directory, refused (USAGE) if others could change it; it may not exist."""
    directory = receipt_dir(store)
    if os.path.lexists(directory):
        receipts_mod.check_directory(directory)
    return directory


def load_receipt(
    store: Store, resource: str | None, receipt: str | os.PathLike[str] | None
) -> tuple[Receipt, ClaimRef]:
    """Find the caller's receipt: ``--receipt``/``GITLEASE_RECEIPT``, else this worktree's."""
    if resource is not None:
        validate_resource(resource)
    from ..receipts import reservation  # (the commit check names no receipt: not on its path)

    explicit = reservation.explicit_path(receipt)
    if explicit is not None:
        rec = receipts_mod.read(explicit)
        _same_store(store, rec)
        return rec, with_written_oid(store, _pick_claim(rec, resource), rec)
    directory = _checked_dir(store)
    if resource is None:
        return _only_receipt(store, directory)
    ref = encode(resource)
    snap = store.read(ref)
    # The record's claim and bundle ids, unverified, only say which files to look at: the
    # receipt chosen is judged against the verified record by the caller.
    hint = _unverified(snap.data)
    paths = receiptdir.candidates(
        directory, ref, hint.claim_id if hint else None, hint.bundle_id if hint else None
    )
    first_error: GitleaseError | None = None
    found: list[tuple[Receipt, ClaimRef]] = []
    for path in paths:
        try:
            rec = receipts_mod.read(path)
        except ReceiptError as exc:
            first_error = first_error or exc
            continue
        claim_ref = rec.claim_for(resource)
        if claim_ref is not None:
            found.append((rec, claim_ref))
    # The record this worktree last wrote, by its binding, needs no signature check (the id
    # is checked against the bytes: see claim.verified); the caller gets the id along.
    wt = store.location.worktree_git_dir
    written = bindings_mod.written_oid(wt, ref) if wt is not None else None
    current = judge(snap, Now.read(), resource, known=(written,))
    current_id = current.record.claim_id if current.record else None
    matches: list[tuple[Receipt, ClaimRef]] = []
    for rec, claim_ref in found:
        if claim_ref.claim_id == current_id:
            return rec, with_written_oid(store, claim_ref, rec)
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


def _unverified(data: bytes | None) -> Record | None:
    """The record in ``data`` as it reads, signature unchecked (None if it does not parse)."""
    if data is None:
        return None
    try:
        return known(data) or parse(data)
    except CorruptRecordError:
        return None


def _same_store(store: Store, rec: Receipt) -> Receipt:
    """``rec``, if it is a receipt of ``store`` (USAGE otherwise: bundle commands too)."""
    if rec.store != str(store.git_dir):
        raise UsageError(
            f"receipt {rec.path} belongs to the store {rec.store}, not {store.git_dir}"
        )
    return rec


def _pick_claim(rec: Receipt, resource: str | None) -> ClaimRef:
    """The claim of ``rec`` on ``resource`` (its only claim when None; USAGE for a bundle)."""
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
    live, spent = _receipts_here(store, directory, bundles=False)
    if len(live) == 1:  # (the binding's id spares the signature check, as for a resource)
        return live[0], with_written_oid(store, live[0].claims[0], live[0])
    if not live and spent:
        newest = max(spent, key=lambda r: mtime(r.path))
        return newest, newest.claims[0]
    if not live:
        raise ReceiptError(f"no receipt with a live token in {directory}: name the resource")
    names = ", ".join(sorted(r.claims[0].resource for r in live))
    raise UsageError(f"this worktree holds receipts for several resources ({names}): name one")


def _receipts_here(
    store: Store, directory: Path, *, bundles: bool
) -> tuple[list[Receipt], list[Receipt]]:
    """(with a token, without) among this store's single-claim or bundle receipts here: those
    the index holds as held, and (only if none is) those spent in the last hour that has any."""
    live, spent = _read_all(store, receiptdir.held(directory, bundles=bundles))
    if not live:
        more_live, more_spent = _read_all(
            store, receiptdir.recently_spent(directory, bundles=bundles)
        )
        live, spent = more_live, spent + more_spent
    return live, spent


def _read_all(store: Store, paths: Sequence[Path]) -> tuple[list[Receipt], list[Receipt]]:
    live: list[Receipt] = []
    spent: list[Receipt] = []
    for path in paths:
        try:
            rec = receipts_mod.read(path)
        except GitleaseError:
            continue
        if rec.store == str(store.git_dir):
            (live if rec.token else spent).append(rec)
    return live, spent


def load_bundle_receipt(
    store: Store, bundle_id: str | None, receipt: str | os.PathLike[str] | None
) -> Receipt:
    """A bundle's receipt: ``--receipt``, by bundle id, or the one bundle held here."""
    from ..receipts import reservation  # (the commit check names no receipt: not on its path)

    explicit = reservation.explicit_path(receipt)
    if explicit is not None:
        return _same_store(store, receipts_mod.read(explicit))
    directory = _checked_dir(store)
    if bundle_id is not None:
        path = receiptdir.bundle_path(directory, bundle_id)
        flat = directory / f"bundle-{bundle_id}.json"  # the layout before this one
        if not os.path.lexists(path) and os.path.lexists(flat):
            path = flat
        return _same_store(store, receipts_mod.read(path))
    live, spent = _receipts_here(store, directory, bundles=True)
    if len(live) == 1:
        return live[0]
    if not live and spent:  # a retried `bundle release`: the newest released bundle
        return max(spent, key=lambda r: mtime(r.path))
    raise UsageError(
        "name the bundle id (or --receipt): "
        + (f"{len(live)} bundles are held here" if live else "no bundle receipt here")
    )


def owned_record(claim: Claim, receipt: Receipt, claim_ref: ClaimRef) -> Record:
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
    if not is_ours(claim_ref, record.raw) and SigningKey(receipt.token).public_hex != (
        record.public_key
    ):  # (the record this holder last wrote, byte for byte, is signed with its key)
        raise LostError(
            f"{claim.resource}: the record's key does not match receipt {receipt.path}; "
            "the record was replaced or forged",
            claim=claim.to_dict(),
        )
    return record


def own_receipt_for(store: Store, claim: Claim, explicit: Path | None) -> Path | None:
    """A receipt of the caller's that proves the active claim is the caller's own."""
    record = claim.record
    if record is None:
        return None
    if explicit:
        paths = [explicit]
    else:
        paths = receiptdir.candidates(receipt_dir(store), claim.ref, record.claim_id)
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


def refuse_live_explicit(store: Store, held: reservation.Reserved, now: Now) -> None:
    """An explicit receipt path that still proves an active claim is never overwritten
    (``held``: the path, reserved; anything but a receipt of this store was refused there)."""
    old, path = held.previous, held.path
    if old is None or not old.token:
        return
    for claim_ref in old.claims:
        claim = judge(store.read(claim_ref.ref), now, claim_ref.resource)
        if claim.state == "active" and claim.record and claim.record.claim_id == claim_ref.claim_id:
            raise HeldError(
                f"receipt {path} still proves your active claim on {claim_ref.resource}: "
                "release it first or choose another --receipt",
                claim=claim.to_dict(),
            )


#: How far back a member's chain is followed to find the bundle's record in it.
_CHAIN_STEPS = 1000


def unwritten_members(
    store: Store, rec: Receipt, snaps: dict[str, Snapshot] | None = None
) -> list[ClaimRef]:
    """The members of bundle receipt ``rec`` whose record never reached their ref: what a
    bundle acquire killed in the middle of its commit leaves (libgit2 commits ref by ref),
    so that nobody believes they hold a partial bundle (docs/concepts.md, bundles).

    ``snaps``: the members' refs as already read (read here otherwise). A member counts as
    written when its ref shows its claim, or shows a later claim whose chain of records
    passes through it (the member was released and taken since), or was pruned at or
    after its revision. Revisions only grow, so a ref still below the member's revision,
    or another claim at that revision, means the member never landed. When the chain
    cannot be followed, the member is not called unwritten: the owned checks decide.
    """
    if rec.bundle_id is None:
        return []
    missing = []
    with store.blob_reader() as read_blob:  # (one git process for every chain, if any)
        for claim_ref in rec.claims:
            snap = (snaps or {}).get(claim_ref.ref) or store.read(claim_ref.ref)
            if _never_written(store, claim_ref, snap, read_blob):
                missing.append(claim_ref)
    return missing


def _never_written(
    store: Store,
    claim_ref: ClaimRef,
    snap: Snapshot,
    read_blob: Callable[[str], tuple[bytes | None, str | None]],
) -> bool:
    if snap.oid is None:
        return store.revision_floor(claim_ref.ref) < claim_ref.revision
    data, oid = snap.data, snap.oid
    for _ in range(_CHAIN_STEPS):
        if data is None:
            return False  # unreadable, pruned or collected: unknown
        try:
            record = parse(data)
        except GitleaseError:
            return False
        if record.revision < claim_ref.revision:
            return True
        if record.claim_id == claim_ref.claim_id:
            return False
        if record.revision == claim_ref.revision:
            return True  # another claim took the member's revision: ours never landed
        if record.previous is None:  # a chain that starts after a prune (or by hand)
            return store.revision_floor(claim_ref.ref) < claim_ref.revision
        oid = record.previous
        data, _problem = read_blob(oid)
    return False


def partial_error(store: Store, rec: Receipt, missing: list[ClaimRef]) -> PartialBundleError:
    """LOST for an action on a partial bundle, naming the members that were never written."""
    names = ", ".join(c.resource for c in missing)
    verb = "was" if len(missing) == 1 else "were"
    return PartialBundleError(
        f"bundle {rec.bundle_id} is partial: {names} {verb} never written (its acquire was "
        "interrupted), so nobody holds the whole bundle. Stop mutating; release what is held "
        f"with `gitlease bundle release {rec.bundle_id}` (it expires by its TTL otherwise)",
        claim=judge(store.read(missing[0].ref), Now.read(), missing[0].resource).to_dict(),
    )


def mark_bound(store: Store, claims: list[Claim]) -> list[Claim]:
    """The claims, with ``bound`` set: True on those this worktree is bound to, False on
    the others (a command that did not look leaves it None: unknown, never a wrong value)."""
    wt = store.location.worktree_git_dir
    bound = set()
    if wt is not None:
        bound = {(b.ref, b.claim_id) for b in bindings_mod.bindings(wt) if isinstance(b, Binding)}
    return [c.replace(bound=bool(c.record and (c.ref, c.record.claim_id) in bound)) for c in claims]


def with_written_oid(store: Store, claim_ref: ClaimRef, rec: Receipt) -> ClaimRef:
    """``claim_ref`` of ``rec`` with the object id of this worktree's last record of it, if
    the binding knows it and was written for ``rec``'s token
    (:func:`gitlease.receipts.bindings.written_oid`): else the record is checked in full."""
    wt = store.location.worktree_git_dir
    if wt is None or rec.token is None:
        return claim_ref
    oid = bindings_mod.written_oid(wt, claim_ref.ref, claim_ref.claim_id, rec.token)
    return claim_ref if oid is None else claim_ref.replace(oid=oid)
