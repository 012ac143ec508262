"""Several resources at once, all or nothing: acquire, heartbeat, release, check, show.

A bundle is one acquire over many refs (one receipt, one bundle id in every
record), written in one reference transaction; every later operation acts on
all its members (docs/concepts.md). Thin wrappers over
:mod:`gitlease.claims.acquire` and :mod:`gitlease.claims.engine`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._util.value import Value
from ..claims import acquire as acquisition
from ..claims import engine as core
from ..claims import ownership, request
from ..claims.request import AcquireOptions
from ..claims.waiting import Waiting
from ..errors import GitleaseError, UsageError
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, judge
from ..model.clock import Now
from ..receipts.receipt import Receipt, Receipted
from ..store.base import Store
from .lease import Operation
from .reads import list_claims, mark_kept

if TYPE_CHECKING:
    from typing_extensions import Unpack

_T = TypeVar("_T")


class BundleResult(Value):
    """Claims in the order they were asked for, and the receipt that proves them."""

    __slots__ = ("bundle_id", "claims", "receipt")
    bundle_id: str | None
    claims: list[Claim]
    receipt: Receipt

    def to_dict(self) -> dict[str, Any]:
        """``{"bundle_id", "claims", "receipt"}`` (docs/reference/json.md)."""
        return {
            "bundle_id": self.bundle_id,
            "claims": [c.to_dict() for c in self.claims],
            "receipt": str(self.receipt.path),
        }


def acquire_many(
    store: Store,
    resources: list[str],
    *,
    on_wait: Callable[[Waiting], None] | None = None,
    **options: Unpack[AcquireOptions],
) -> BundleResult:
    """Take every resource or none, as one bundle (``options`` as for an acquire)."""
    where = store.location
    asked = request.acquire_request(
        resources, bundle=True, worktree=where.worktree, git_dir=where.worktree_git_dir, **options
    )
    claims, rec = acquisition.acquire_claims(store, asked, on_wait=on_wait)
    return BundleResult(rec.bundle_id, claims, rec)


def heartbeat(
    store: Store,
    bundle_id: str | None = None,
    *,
    ttl: str | int | None = None,
    receipt: Receipted = None,
) -> BundleResult:
    """Renew every member (LOST naming the member if one was lost)."""
    rec = ownership.load_bundle_receipt(store, bundle_id, receipt)
    new_ttl = request.renewal_ttl(
        ttl, store.location.worktree, git_dir=store.location.worktree_git_dir
    )
    return _members(store, rec, core.renew_claims, new_ttl)


def release(
    store: Store,
    bundle_id: str | None = None,
    *,
    checkpoint: str | None = None,
    receipt: Receipted = None,
) -> BundleResult:
    """Release every member, optionally with a checkpoint."""
    rec = ownership.load_bundle_receipt(store, bundle_id, receipt)
    return _members(store, rec, core.release_claims, checkpoint)


def check(
    store: Store,
    bundle_id: str | None = None,
    *,
    min_remaining: str | int | None = None,
    receipt: Receipted = None,
) -> BundleResult:
    """The caller still holds every member (with at least ``min_remaining`` left)."""
    rec = ownership.load_bundle_receipt(store, bundle_id, receipt)
    need = request.min_remaining_ms(min_remaining)
    store.refresh()
    return _members(store, rec, core.check_claims, need)


def _members(store: Store, rec: Receipt, act: Operation[_T], arg: _T) -> BundleResult:
    """``act`` on every member of the bundle ``rec`` proves, marked bound or not."""
    claims = act(store, rec, list(rec.claims), arg)
    return BundleResult(rec.bundle_id, ownership.mark_bound(store, claims), rec)


def show(
    store: Store, bundle_id: str | None = None, *, receipt: Receipted = None
) -> tuple[str | None, list[Claim]]:
    """The members' current records: from the receipt if there is one, else by bundle id."""
    rec: Receipt | None = None
    if receipt is not None or bundle_id is None:
        rec = ownership.load_bundle_receipt(store, bundle_id, receipt)
    else:
        try:
            rec = ownership.load_bundle_receipt(store, bundle_id, None)
        except GitleaseError:
            rec = None
    if rec is not None:
        store.refresh()  # (list_claims below fetches by itself)
        now = Now.read()
        by_ref = {s.ref: s for s in store.read_all()}
        claims = [
            judge(by_ref.get(c.ref, Snapshot(c.ref, None, None)), now, c.resource)
            for c in rec.claims
        ]
        return rec.bundle_id, mark_kept(store, ownership.mark_bound(store, claims))
    members = [c for c in list_claims(store) if c.record and c.record.bundle_id == bundle_id]
    if not members:
        raise UsageError(f"no claim in the store carries bundle id {bundle_id}")
    return bundle_id, members
