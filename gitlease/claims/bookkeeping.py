"""Keeping the holder's files in step with the store: receipts and this worktree's bindings.

A receipt is written before its claims are (and read back: one that cannot prove them is no
receipt), discarded when the acquire wrote nothing, retired (its token taken out) once
nothing it proves is held, and tidied away when it can never prove anything again. This
worktree's bindings (which claims its commits are checked against) are made after an
acquire, moved to each record that lands, and removed on release. Which receipt proves
which claim is :mod:`gitlease.claims.ownership`'s to judge.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import GitleaseError, StoreError
from ..model.claim import Claim
from ..receipts import bindings as bindings_mod
from ..receipts import directory as receiptdir
from ..receipts import receipt as receipts_mod
from ..receipts import reservation
from ..receipts.bindings import Binding
from ..receipts.receipt import ClaimRef, Receipt
from ..store.base import Store
from .ownership import receipt_dir


def default_receipt_path(store: Store, ref: str, claim_id: str, bundle_id: str | None) -> Path:
    """A fresh receipt's place in this worktree: one file per claim attempt (or bundle)."""
    directory = receipt_dir(store)
    if bundle_id is not None:
        return receiptdir.bundle_path(directory, bundle_id)
    return receiptdir.receipt_path(directory, ref, claim_id)


def write_new(store: Store, rec: Receipt, reserved: reservation.Reserved | None) -> None:
    """Write a fresh receipt before its claims are (an explicit path in place, under its lock;
    this worktree's receipt through :func:`gitlease.receipts.directory.store_new`)."""
    if reserved is not None:
        reserved.write(rec)
    else:
        receiptdir.store_new(receipt_dir(store), rec)
    try:  # read back what was written: a receipt that cannot prove its claims is no receipt
        back: Receipt | None = receipts_mod.read(rec.path)
    except GitleaseError:
        back = None
    if back != rec:
        discard(store, rec)
        raise StoreError(
            f"the receipt {rec.path} does not read back as written; nothing was claimed"
        )


def note_landed(store: Store, claims: Sequence[Claim], rec: Receipt) -> None:
    """After a heartbeat landed: this worktree's bindings of these claims name the new records.

    Called under the guards, after the compare-and-swap: the id is then the
    holder's own last record, which lets the commit check and ``check`` skip the
    signature (:func:`gitlease.model.claim.is_ours`), for ``rec``, whose token signed them.
    """

    wt = store.location.worktree_git_dir
    if wt is None:
        return
    digest = bindings_mod.token_digest(rec.token)
    for claim in claims:
        if claim.record is not None and claim.oid is not None:
            bindings_mod.note_written(wt, claim.ref, claim.record.claim_id, claim.oid, digest)


def discard(store: Store, rec: Receipt) -> None:
    """Remove the receipt of an acquire that wrote nothing."""
    directory = receipt_dir(store)
    if rec.path.parent.parent == directory:
        receiptdir.discard(directory, rec)
    else:
        receipts_mod.remove(rec.path)


def retire(store: Store, rec: Receipt) -> None:
    """Take the token out of a receipt once nothing it proves is held; a day later it goes."""
    spent = receipts_mod.without_token(rec)
    receipts_mod.write(spent, exclusive=False)
    receiptdir.retire(receipt_dir(store), spent)


def bind_all(store: Store, rec: Receipt, claims: Sequence[Claim] = ()) -> None:
    """Bind this worktree to every claim of ``rec`` (the commit hooks check them); ``claims``:
    the records just written, whose object ids the bindings then name."""
    wt = store.location.worktree_git_dir
    if wt is None:
        return
    oids = {c.ref: c.oid for c in claims}
    digest = bindings_mod.token_digest(rec.token)
    for c in rec.claims:
        binding = Binding(c.resource, c.ref, c.claim_id, str(rec.path), oids.get(c.ref), digest)
        bindings_mod.bind(wt, binding)


def unbind_all(store: Store, claim_refs: Sequence[ClaimRef]) -> None:
    """Remove this worktree's bindings to these claims (not a newer claim's)."""
    wt = store.location.worktree_git_dir
    if wt is not None:
        for claim_ref in claim_refs:
            bindings_mod.unbind(wt, claim_ref.ref, claim_ref.claim_id)


def tidy(rec: Receipt) -> None:
    """Drop this worktree's receipts that can never prove anything again.

    A few of those that lost their token a day ago (any resource, oldest
    first: :func:`gitlease.receipts.directory.sweep`), and the older ones of the same
    resource: a receipt of a lower or equal revision belongs to a claim that
    was replaced (or to a racing acquire whose compare-and-swap must fail); a
    token-less one to a released claim. Both cost the same however many
    receipts the worktree has.
    """
    directory = rec.path.parent.parent
    receiptdir.sweep(directory)
    if rec.bundle_id is not None:
        return
    claim = rec.claims[0]
    for path in receiptdir.candidates(directory, claim.ref):
        if path == rec.path or path.parent.name == "bundles":
            continue
        try:
            old = receipts_mod.read(path)
        except GitleaseError:
            continue
        mine = old.claim_for(claim.resource)
        if old.store != rec.store:
            continue  # a claim in another store (--store): not ours to judge
        if mine and (old.token is None or mine.revision < claim.revision):
            receiptdir.remove_replaced(directory, old, rec)
