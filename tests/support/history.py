"""Checks over a resource's history as the store records it (used by the chaos tests)."""

from __future__ import annotations

import itertools

from gitlease.model.claim import Claim


def claim_intervals(
    chain: list[Claim], boot_offsets: dict[str, int] | None = None
) -> list[tuple[str, int, int, int]]:
    """(claim id, revision, start, end) per claim on the boot clock, oldest first.

    A claim starts when it was acquired and ends at its release, or at the
    expiry of its last renewal. ``boot_offsets`` (boot id -> ms) brings the
    records of hosts that play another machine back to this machine's clock.
    """
    out: list[tuple[str, int, int, int]] = []
    for claim in chain:
        r = claim.record
        assert r is not None, f"unreadable record in the chain: {claim.problem}"
        end = r.boot_expires_ms - (boot_offsets or {}).get(r.boot_id, 0)
        if out and out[-1][0] == r.claim_id:
            cid, rev, start, _ = out[-1]
            out[-1] = (cid, rev, start, end)
        else:
            out.append((r.claim_id, r.revision, end - r.ttl_ms, end))
    return out


def assert_no_two_holders(chain: list[Claim]) -> None:
    intervals = claim_intervals(chain)
    boots = {c.record.boot_id for c in chain if c.record}
    assert len(boots) <= 1, "history spans reboots; boot-clock intervals cannot be compared"
    for (cid_a, rev_a, _s, end_a), (cid_b, rev_b, start_b, _e) in itertools.pairwise(intervals):
        assert rev_b > rev_a, f"revision went from {rev_a} to {rev_b}"
        assert start_b >= end_a, (
            f"claim {cid_b} (rev {rev_b}) started {end_a - start_b} ms before claim "
            f"{cid_a} (rev {rev_a}) ended"
        )
