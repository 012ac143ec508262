"""The retention pass's judgements: each current record judged at most once a pass, and only
when a decision needs it.

The pass decides, so it never trusts a read's cache of verified records: a judgement
checks the record's signature (docs/performance.md, ``prune``). Most resources need none.
A record can only be an old tombstone if its text says ``state released``; a history can
only be trimmed if its reflog holds more lines than the policy keeps; a floor can only be
dropped if the record's revision is above it; a receipt can only be current if its ref's
record names its claim. Each of those is looked at first without a signature check, and
only a record that passes the cheap look is judged, so a pass checks the signatures of the
records it may act on, not of the whole store. The cheap look can only say "no" where a
judgement would also say no (a record that fails its signature is ``invalid``, which none
of these decisions acts on), so the pass decides exactly as if it had judged everything.

A judgement is kept for as long as the ref shows the same record: after the tombstones go
(the refs are read again), a ref still at the same record keeps its judgement.
"""

from __future__ import annotations

from ..errors import GitleaseError
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, judge
from ..model.clock import Now
from ..model.record import Record, parse

#: Every record whose state is ``released`` holds this line (the format is strict).
RELEASED_LINE = b"\nstate released\n"


class Judged:
    """The refs of one pass, and each one's claim, judged on first use."""

    def __init__(self, snapshots: list[Snapshot], now: Now) -> None:
        self.now = now
        self.snapshots = snapshots
        self._by_ref = {s.ref: s for s in snapshots}
        self._claims: dict[str, Claim] = {}
        self.judgements = 0  # (how many signatures the pass checked: the tests count them)

    def reread(self, snapshots: list[Snapshot]) -> None:
        """The refs as read again; a ref at the same record keeps its judgement."""
        self.snapshots = snapshots
        self._by_ref = {s.ref: s for s in snapshots}
        self._claims = {
            ref: claim
            for ref, claim in self._claims.items()
            if ref in self._by_ref and claim.oid == self._by_ref[ref].oid
        }

    def refs(self) -> set[str]:
        """Every ref the pass read."""
        return set(self._by_ref)

    def claim(self, ref: str) -> Claim:
        """The claim ``ref`` shows: judged now if it was not yet (its signature checked)."""
        claim = self._claims.get(ref)
        if claim is None:
            claim = judge(self._by_ref[ref], self.now)
            self._claims[ref] = claim
            self.judgements += 1
        return claim

    def claim_id(self, ref: str) -> str | None:
        """The claim id of ``ref``'s record if it verifies (None: no such ref, or invalid)."""
        if ref not in self._by_ref:
            return None
        record = self.claim(ref).record
        return record.claim_id if record is not None else None

    def unverified(self, ref: str) -> Record | None:
        """``ref``'s record parsed without its signature checked, for a cheap look only
        (None: no such ref, or its bytes are not a record)."""
        snap = self._by_ref.get(ref)
        if snap is None or snap.data is None:
            return None
        try:
            return parse(snap.data)
        except GitleaseError:
            return None
