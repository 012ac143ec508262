"""What a remote store's push did: landed, refused, or not known yet.

A write to a remote store is one ``git push --atomic`` with a lease per ref
(:meth:`gitlease.store.remote.RemoteStore.compare_and_swap_many`). git's answer does not
always tell what happened: a connection cut after the pack went out, a server that
refuses a second copy of a push that landed (git's HTTP client may send one), a timeout.
Here the answer is read (:mod:`gitlease.store.pushreply`) and, where it does not tell, the
remote is fetched and each ref's chain of records followed back to find the push's own
records. A write is reported landed only when its records are seen there, refused only
when they provably never can land, and ambiguous (``WriteOutcomeUnknown``) otherwise.
"""

from __future__ import annotations

import subprocess
import time

from ..errors import CompareAndSwapFailed, StoreError, WriteOutcomeUnknown
from ..model.refname import LEAF_SUFFIX
from .link import Link
from .local import LocalStore
from .pushreply import (
    before_pack,
    checked_before_sending,
    classify,
    http_refusal,
    missing_capability,
    network_error,
    push_statuses,
    rejection,
    server_said,
)

#: A write that renews or releases this host's live claim waits for the push no longer
#: than the claim has left; settling a push that got no answer then takes at most this
#: much more (or what the claim still has, if more): the answer comes when the claim's
#: time is known to be up, not a minute later.
SETTLE_SECONDS = 2.0
#: At most this many records of a chain are fetched one by one to settle a push (each is a
#: round trip); a longer chain is left ambiguous.
_CHAIN_FETCHES = 64
#: What a push carried: (ref, expected object id or None, new object id).
Planned = list[tuple[str, str | None, str]]


class Push:
    """One push of ``planned`` through ``link``, settled against ``mirror`` (the local
    store that mirrors the remote's refs and holds the records written)."""

    def __init__(self, link: Link, mirror: LocalStore, planned: Planned) -> None:
        self.link = link
        self.mirror = mirror
        self.planned = planned
        self.shown = link.shown

    def run(self, args: list[str], claim_left: float | None = None) -> None:
        """Run the push and decide what it did: return if every record landed, else raise.

        A refusal is believed only once it cannot hide a landed write: a refusal
        by the server (not git's own check before sending) is settled by looking
        first, since on HTTP it may answer a second copy of a push that landed.
        ``claim_left``: the push waits no longer (see
        :meth:`~gitlease.store.remote.RemoteStore.claim_left`); settling it then gets
        :data:`SETTLE_SECONDS` more at most.
        """
        self.link.fetched_after_refusal = None
        ends = None if claim_left is None else time.monotonic() + max(claim_left, 0.1)
        with self.link.until(ends):
            result = self.link.network(*args)
        settle_by = None if ends is None else max(ends, time.monotonic() + SETTLE_SECONDS)
        with self.link.until(settle_by):
            self._decide(result, ends)

    def _decide(
        self, result: subprocess.CompletedProcess[bytes] | None, claim_ends: float | None
    ) -> None:
        """What the push did, from git's answer, and a fetch where that does not tell."""
        statuses = push_statuses(result.stdout if result is not None else b"")
        ours = [statuses.get(ref) for ref, _, _ in self.planned]
        if (
            result is not None
            and result.returncode == 0
            and all(s is not None and s[0] in "*+=" for s in ours)
        ):
            return  # "=": the ref already holds our new record (a retried push that had landed)
        reasons = [s[1] for s in ours if s is not None and s[0] == "!"]
        verdict = rejection(reasons)
        why = network_error(result)
        if result is None and claim_ends is not None and time.monotonic() >= claim_ends:
            why = (
                "no answer within the time the claim had left on this host's clock; unless "
                "this write landed, the claim has run out"
            )
        if verdict == "race":
            refused = "; ".join(sorted(set(reasons)))
            if all(checked_before_sending(r) for r in reasons):
                raise CompareAndSwapFailed(
                    f"the remote {self.shown} refused the update ({refused}): a claim changed "
                    "there meanwhile"
                )  # git's own check against the remote's refs: nothing was sent
            if self._settle_refusal(f"refused the update ({refused})"):
                return
            raise CompareAndSwapFailed(
                f"the remote {self.shown} refused the update ({refused}): a claim changed "
                "there meanwhile"
            )
        if verdict == "policy":
            policy = "; ".join(sorted({r for r in reasons if classify(r) == "policy"}))
            said = server_said(result)
            if self.link.may_replay() and self._settle_refusal(policy, policy=True):
                return
            raise StoreError(f"the remote {self.shown} refused the update: {policy}{said}")
        if not statuses:
            lacking = missing_capability(result)
            if lacking is not None:
                raise StoreError(
                    f"the remote {self.shown} does not support {lacking}: nothing was sent. "
                    "gitlease needs it to write every claim's refs in one compare-and-swap; "
                    "use a server that offers it (see docs/remote.md, which servers work)"
                )
            before = before_pack(result)
            if before == "transport":
                self._settle_unsent(why)
                return
            if before == "unreachable":
                raise StoreError(f"cannot reach the remote {self.shown}: {why}")
            if before == "refused":
                raise StoreError(
                    f"the remote {self.shown} refused the push before anything was sent: {why}"
                )
        self._settle(why, http_refusal(result))

    def _settle_refusal(self, what: str, *, policy: bool = False) -> bool:
        """A refusal by the server: True if our records are at the remote all the same
        (an earlier copy of this push landed), False if the refusal stands;
        WriteOutcomeUnknown if they may still land.

        git's HTTP client sends a POST again when its connection died before any byte
        of the answer came (libcurl, on a reused connection); the server then refuses
        the copy because the first one landed. Where pushes are sent once, a refusal
        is final. A refusal by the server's ``policy`` would have met the first copy
        too: only one that landed all the same overturns it.
        """
        replay = self.link.may_replay()
        waits = 4 if replay and not policy else 1
        for attempt in range(waits):
            if attempt:
                time.sleep(0.25 * attempt)  # a first copy still being applied, or a racer's
            try:
                self.link.fetch()
            except StoreError as exc:
                if not replay or policy:
                    return False  # nothing of it can land
                raise WriteOutcomeUnknown(
                    f"the remote {self.shown} {what}, but an earlier copy of this push may "
                    f"have landed and the remote cannot be read to tell ({exc}); compare "
                    "`gitlease show` with your receipt once it can"
                ) from None
            found = set(self._outcomes())
            if found == {"landed"}:
                return True
            if found == {"not landed"} or not replay or policy:
                self.link.fetched_after_refusal = time.monotonic()  # the retry decides from it
                return False
        raise WriteOutcomeUnknown(
            f"the remote {self.shown} {what}, and an earlier copy of this push (git's HTTP "
            "client sends one again when an answer is lost) may still land. Compare "
            "`gitlease show` with your receipt, then retry"
        )

    def _settle_unsent(self, why: str) -> None:
        """The transport failed before git read the server's first answer: no pack went out.
        Look all the same (a fetch), and say what happened: the connection failed, the
        server refused nothing."""
        what = (
            f"the push to {self.shown} did not reach the server: the transport failed before "
            f"git read the server's first answer, so nothing was sent ({why})"
        )
        try:
            self.link.fetch()
        except StoreError as exc:
            raise StoreError(
                f"{what}; nothing of this write is at the remote, and none can land (the "
                f"remote cannot be read now either: {exc})"
            ) from None
        found = set(self._outcomes())
        if found == {"landed"}:
            return
        if found <= {"pending", "not landed"}:
            raise StoreError(f"{what}; a fetch shows nothing of this write is at the remote")
        raise WriteOutcomeUnknown(
            f"{what}, yet a fetch cannot tell whether this write is at the remote. Compare "
            "`gitlease show` with your receipt, then retry"
        )

    def _settle(self, why: str, refused: str | None = None) -> None:
        """The push ended without a verdict: fetch and look for our own new records.

        ``refused``: the HTTP status by which the server refused the request that
        carried the pack (401, 403, 404...): if nothing of it is there, it is STORE.
        """
        for attempt in range(3):
            try:
                self.link.fetch()
                break
            except StoreError as exc:
                if attempt == 2 or self.link.seconds_left(1.0) < 1.0:
                    raise WriteOutcomeUnknown(
                        f"the push to {self.shown} was interrupted ({why}) and the remote "
                        f"cannot be read to settle it ({exc}); compare `gitlease show` with "
                        "your receipt once it can"
                    ) from None
                time.sleep(0.5)
        found = self._outcomes()
        if all(f == "landed" for f in found):
            return
        if all(f == "not landed" for f in found):
            raise CompareAndSwapFailed(
                f"the push to {self.shown} was interrupted ({why}) and the remote has moved "
                "on from the record it was based on: this write did not land and never can"
            )
        if refused is not None and all(f in ("pending", "not landed") for f in found):
            raise StoreError(f"the remote {self.shown} refused the push (HTTP {refused}): {why}")
        raise WriteOutcomeUnknown(
            f"the push to {self.shown} was interrupted ({why}); its records are not at the "
            "remote now, but a server that received them may still apply them. Compare "
            "`gitlease show` with your receipt, then retry"
        )

    def _outcomes(self) -> list[str]:
        """:meth:`_push_outcome` of each record the push carried. A ref that holds no record
        (the scope index riding on an acquire, :data:`SCOPES_INDEX_REF`) has no chain to
        follow, and needs none: the push was atomic, so the records tell for it. Once it
        holds neither what the push expected nor what it wrote, the push can never land
        (its lease cannot match again): records still "pending" are then "not landed"."""
        found = []
        closed = False
        for ref, expected, new in self.planned:
            if ref.endswith(LEAF_SUFFIX):
                found.append(self._push_outcome(ref, expected, new))
            else:
                closed |= self.mirror.read(ref).oid not in (expected, new)
        return ["not landed" if closed and f == "pending" else f for f in found]

    def _push_outcome(self, ref: str, expected: str | None, new: str) -> str:
        """Whether ``new`` is in the ref's history at the remote: "landed", "not landed"
        (the history passes from ``expected`` to another record), or "pending" (the ref
        is unchanged: the write may still be applied) or "unknown".

        Another host may have written after us before we looked (a release, then an
        acquire), so the current record's chain of ``previous`` ids is followed back.
        Records of that chain this host never fetched (they came and went at the remote
        meanwhile) are fetched by their ids: the server still has them until its ``git
        gc``, and protocol v2 serves any object asked for. Without them a write that
        provably did not land would read as ambiguous.
        """
        from ..model.record import parse

        oid = self.mirror.read(ref).oid
        if oid == expected:
            return "pending"
        fetched = 0
        for _ in range(1000):
            if oid == new:
                return "landed"
            if oid == expected or oid is None:
                return "not landed"
            data, _problem = self.mirror.read_blob(oid)
            if data is None and fetched < _CHAIN_FETCHES and self.link.fetch_object(oid):
                fetched += 1
                data, _problem = self.mirror.read_blob(oid)
            if data is None:
                return "unknown"  # a record this host never saw, and the remote would not give
            try:
                oid = parse(data).previous
            except StoreError:
                return "unknown"
        return "unknown"
