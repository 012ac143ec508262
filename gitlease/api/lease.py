"""One resource: acquire, heartbeat, release, check, bind and unbind (docs/concepts.md).

Thin wrappers over the claims engine (:mod:`gitlease.claims.acquire`,
:mod:`gitlease.claims.firstfree`, :mod:`gitlease.claims.engine`): a single claim is the engine's
write over one ref, without a bundle id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from .._util.value import Value
from ..claims import engine as core
from ..claims import ownership, request
from ..errors import UsageError
from ..model.claim import Claim
from ..receipts import bindings as bindings_mod
from ..receipts import receipt as receipts_mod
from ..receipts.bindings import Binding
from ..receipts.receipt import ClaimRef, Receipt, Receipted
from ..store.base import Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..claims.request import AcquireOptions
    from ..claims.waiting import Waiting

_T = TypeVar("_T")


class Acquired(Value):
    """The outcome of an acquire: the public claim and the private receipt's path.

    ``skipped``: for :func:`acquire_first_free`, the candidates passed over because
    their records are invalid (None for a plain acquire).
    """

    __slots__ = ("claim", "receipt", "skipped")
    _defaults: ClassVar[dict[str, Any]] = {"skipped": None}
    claim: Claim
    receipt: Receipt
    skipped: tuple[Claim, ...] | None

    def to_dict(self) -> dict[str, Any]:
        """The claim document plus ``receipt``, the receipt's path (and ``skipped``)."""
        doc = dict(self.claim.to_dict(), receipt=str(self.receipt.path))
        if self.skipped is not None:
            doc["skipped"] = [c.to_dict() for c in self.skipped]
        return doc


def acquire(
    store: Store,
    resource: str,
    *,
    on_wait: Callable[[Waiting], None] | None = None,
    **options: Unpack[AcquireOptions],
) -> Acquired:
    """Take a claim if the resource is free, released or expired; HELD otherwise.

    ``options``: :class:`~gitlease.claims.request.AcquireOptions` (ttl, owner, note,
    coordination_only, wait, receipt, bind, paths: the path scopes the claim reserves, HELD
    when one overlaps a live claim's scope on another resource). ``on_wait`` is called with a
    :class:`~gitlease.claims.waiting.Waiting` between ``wait`` retries.
    """
    from ..claims import acquire as acquisition  # (check, heartbeat, release never load it)

    where = store.location
    asked = request.acquire_request(
        [resource], worktree=where.worktree, git_dir=where.worktree_git_dir, **options
    )
    claims, rec = acquisition.acquire_claims(store, asked, on_wait=on_wait)
    return Acquired(claims[0], rec)


def acquire_first_free(
    store: Store,
    candidates: Iterable[str],
    *,
    on_wait: Callable[[Waiting], None] | None = None,
    **options: Unpack[AcquireOptions],
) -> Acquired:
    """Take one claim: the first of ``candidates``, in order, that can be acquired.

    Every candidate is checked before anything is touched (USAGE). A held
    candidate, one that callers waiting on this host get first, and one whose
    record is invalid are passed over (the invalid ones are listed in
    ``skipped``). HELD when none can be taken, with ``exc.claims`` naming each
    candidate; with ``wait``, waits until one can. ``options`` as for :func:`acquire`.
    """
    from ..claims import firstfree

    where = store.location
    asked = request.first_free_request(
        candidates, worktree=where.worktree, git_dir=where.worktree_git_dir, **options
    )
    claim, rec, skipped = firstfree.acquire_first_free(store, asked, on_wait=on_wait)
    return Acquired(claim, rec, tuple(skipped))


def heartbeat(
    store: Store,
    resource: str | None = None,
    *,
    ttl: str | int | None = None,
    receipt: Receipted = None,
) -> Claim:
    """Extend the caller's claim by its TTL (or a new one). LOST if it expired: never revived."""
    new_ttl = request.renewal_ttl(
        ttl, store.location.worktree, git_dir=store.location.worktree_git_dir
    )
    store.prepare_write()
    return _owned(store, resource, receipt, core.renew_claims, new_ttl)


def release(
    store: Store,
    resource: str | None = None,
    *,
    checkpoint: str | None = None,
    receipt: Receipted = None,
) -> Claim:
    """Write the tombstone; idempotent for the caller's own released claim."""
    store.prepare_write()
    return _owned(store, resource, receipt, core.release_claims, checkpoint)


def check(
    store: Store,
    resource: str | None = None,
    *,
    min_remaining: str | int | None = None,
    receipt: Receipted = None,
) -> Claim:
    """The re-check before a durable write: held, and with at least ``min_remaining`` left."""
    need = request.min_remaining_ms(min_remaining)
    store.refresh()
    return _owned(store, resource, receipt, core.check_claims, need)


#: An operation of the engine on claims a receipt proves, with its own argument (the new TTL,
#: the checkpoint, the time that must be left): :func:`gitlease.claims.engine.renew_claims`,
#: ``release_claims``, ``check_claims``.
Operation = Callable[[Store, Receipt, list[ClaimRef], _T], list[Claim]]


def _owned(
    store: Store, resource: str | None, receipt: Receipted, act: Operation[_T], arg: _T
) -> Claim:
    """``act`` on the caller's claim on ``resource`` (its receipt found as every command
    finds it), the claim marked bound or not."""
    rec, claim_ref = ownership.load_receipt(store, resource, receipt)
    return ownership.mark_bound(store, act(store, rec, [claim_ref], arg))[0]


def bind(store: Store, resource: str, receipt: Receipted = None) -> Claim:
    """Tie this worktree to the caller's active claim, for the commit hooks."""
    wt = store.location.worktree_git_dir
    if wt is None:
        raise UsageError("bind needs a git worktree: run it inside one")
    store.refresh()
    rec, claim_ref = ownership.load_receipt(store, resource, receipt)
    claim = core.check_claims(store, rec, [claim_ref], 0)[0]
    digest = bindings_mod.token_digest(rec.token)
    binding = Binding(claim.resource, claim.ref, claim_ref.claim_id, str(rec.path), None, digest)
    bindings_mod.bind(wt, binding)
    return claim.replace(bound=True)


def unbind(store: Store, resource: str | None = None) -> list[str]:
    """Remove this worktree's binding to ``resource`` (all bindings if None)."""
    wt = store.location.worktree_git_dir
    if wt is None:
        raise UsageError("unbind needs a git worktree: run it inside one")
    removed = []
    for b in bindings_mod.bindings(wt):
        if isinstance(b, Path):
            if resource is None:
                receipts_mod.remove(b)
            continue
        if resource is None or b.resource == resource:
            bindings_mod.unbind(wt, b.ref)
            removed.append(b.resource)
    return removed
