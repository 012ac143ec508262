"""Stale bindings: this worktree is bound to a claim that is no longer active.

An agent restarted in its worktree acquires ``unit/2`` while a binding to its lapsed claim
on ``unit/1`` is left: the commit hooks refuse every commit for ``unit/1``, which someone
else may hold by now, and nothing said so at the acquire. ``acquire`` and ``bind`` now say
so (stderr, and ``warnings`` in JSON), and drop a binding whose claim lapsed *and* was
replaced by someone else's claim: that claim can never be this worktree's again, and its
work belongs to the new holder. A binding whose claim lapsed with nobody after it is kept
(the hooks go on refusing: re-acquire it, or ``gitlease unbind`` it); so is one whose
record cannot be read (verify says why).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._util.value import Value
from ..errors import GitleaseError
from ..model.claim import Claim, judge
from ..model.clock import Now
from ..receipts.bindings import Binding, bindings, unbind
from ..store.base import Store


class Stale(Value):
    """One binding of this worktree whose claim is not active (or cannot be read)."""

    __slots__ = ("resource", "ref", "claim_id", "receipt", "why", "dropped")
    resource: str
    ref: str
    claim_id: str
    receipt: str
    why: str  # what the commit hooks would say of it
    dropped: bool  # unbound here: a newer claim on the resource replaced it

    def to_dict(self) -> dict[str, Any]:
        """As ``warnings`` and ``bindings`` list it (docs/reference/json.md): neither the ref
        nor the receipt's path, which are this worktree's business."""
        return {name: getattr(self, name) for name in ("resource", "claim_id", "why", "dropped")}

    def message(self) -> str:
        """The line a command prints on stderr."""
        import shlex

        from .._util.text import printable

        what = f"this worktree's binding to {printable(self.resource)} (claim {self.claim_id})"
        unbind = shlex.quote(printable(self.resource))
        if self.dropped:
            return f"gitlease: warning: dropped {what}: {self.why}"
        return (
            f"gitlease: warning: {what} is stale: {self.why}; commits from this worktree are "
            f"refused until you re-acquire it or run `gitlease unbind {unbind}`"
        )


def _judge(binding: Binding, claim: Claim) -> tuple[str, bool] | None:
    """Why the binding is stale and whether to drop it; None when its claim is active."""
    record = claim.record
    if claim.state == "invalid":
        return "its record is invalid (run `gitlease verify`)", False
    if record is None:
        return "its resource has no claim now", False
    if record.claim_id == binding.claim_id:
        if claim.state == "active":
            return None
        return f"the claim is {claim.state}", False
    owner = record.owner
    if claim.state == "active":
        return f"the claim lapsed and {owner} holds {binding.resource} now", True
    return f"the claim lapsed and was replaced by claim {record.claim_id} ({owner})", True


def bound(store: Store) -> bool:
    """Whether this worktree holds any binding (``list`` then reads the claims whole, to
    judge the bindings by them; an unbound worktree's ``list`` streams)."""
    wt = store.location.worktree_git_dir
    return wt is not None and any(True for _ in bindings(wt))


def review(
    store: Store,
    *,
    keep: set[str] | None = None,
    drop: bool = True,
    claims: Iterable[Claim] = (),
) -> list[Stale]:
    """This worktree's stale bindings (not those of ``keep``, refs just bound); with
    ``drop``, those lapsed and replaced by someone else's claim are removed. ``claims``:
    the store's claims as the caller just read them (``list``'s), which the bindings are
    judged by; a binding's ref not among them is read. Best effort: a store that cannot be
    read reports nothing."""
    wt = store.location.worktree_git_dir
    if wt is None:
        return []
    found: list[Stale] = []
    now = Now.read()
    read = {c.ref: c for c in claims}
    for binding in bindings(wt):
        if isinstance(binding, Path):
            found.append(Stale("?", "", "?", "", f"the binding {binding} is unreadable", False))
            continue
        if keep and binding.ref in keep:
            continue
        claim = read.get(binding.ref)
        if claim is None or claim.resource != binding.resource:
            try:
                claim = judge(store.read(binding.ref), now, binding.resource)
            except GitleaseError:
                continue
        verdict = _judge(binding, claim)
        if verdict is None:
            continue
        why, replaced = verdict
        dropped = drop and replaced and unbind(wt, binding.ref, binding.claim_id)
        found.append(
            Stale(binding.resource, binding.ref, binding.claim_id, binding.receipt, why, dropped)
        )
    return found


def current_and_stale(store: Store) -> tuple[list[Binding], list[Stale]]:
    """Every binding of this worktree: those whose claim is active, and the stale ones
    (nothing dropped: for ``list`` and ``hooks status``)."""
    wt = store.location.worktree_git_dir
    if wt is None:
        return [], []
    stale = review(store, drop=False)
    stale_ids = {(s.ref, s.claim_id) for s in stale}
    live = [
        b for b in bindings(wt) if isinstance(b, Binding) and (b.ref, b.claim_id) not in stale_ids
    ]
    return live, stale
