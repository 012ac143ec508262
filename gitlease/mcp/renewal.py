"""The server's renewals: one thread renews every claim taken through the server.

The server is the agent's session, so it does for the session what a keepalive
process does for an agent (docs/concepts.md, keeping a claim alive), without a
process per claim: each claim is renewed at a third of its TTL (well before half
of it has passed, so one failed attempt still leaves time for another, retried
sooner). A claim the agent releases through the server is dropped. A renewal
that finds the claim lost (LOST: expired, released elsewhere, taken over) drops it
too and remembers why: the claim is never revived, and the next call on it answers
LOST from the store. Nothing is released here, ever: when the server ends, this
daemon thread ends with it and the claims expire after their TTL.

The thread renews through the library (:func:`gitlease.api.lease.heartbeat`) with the
receipt the acquire wrote; the token stays in that file.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..api.lease import heartbeat
from ..api.output import printable
from ..api.tokens import TOKEN_PREFIX
from ..errors import GitleaseError, LostError

if TYPE_CHECKING:
    from .. import Store

#: The shortest wait between two renewals of one claim, whatever its TTL.
MIN_INTERVAL = 0.1
#: After a failed renewal that is not LOST (a busy store), try again this much sooner.
RETRY_FRACTION = 4


@dataclass
class _Kept:
    resource: str
    claim_id: str
    receipt: str
    interval: float
    due: float
    generation: int


class Renewals:
    """The claims kept alive by the server, and the thread that renews them."""

    def __init__(self, open_store: Callable[[], Store], log: Callable[[str], None] | None = None):
        self._open_store = open_store
        self._log = log or _stderr
        self._kept: dict[str, _Kept] = {}
        self._generation = 0
        self._cond = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        #: resource -> (the claim id the renewal found lost, why)
        self._lost: dict[str, tuple[str, str]] = {}

    def keep(self, resource: str, claim_id: str, receipt: str, expires_in: float) -> None:
        """Renew the claim ``claim_id`` on ``resource`` (its receipt at ``receipt``) from now
        on; ``expires_in``: the seconds it has left, a third of which pass before the first
        renewal."""
        interval = max(MIN_INTERVAL, expires_in / 3)
        with self._cond:
            self._generation += 1
            self._kept[resource] = _Kept(
                resource, claim_id, receipt, interval, time.monotonic() + interval, self._generation
            )
            self._lost.pop(resource, None)
            self._cond.notify()
        self._start()

    def drop(self, resource: str) -> None:
        """Stop renewing ``resource`` (it was released, or lost)."""
        self.pause(resource)

    def pause(self, resource: str) -> _Kept | None:
        """Stop renewing ``resource`` while the agent releases it (no renewal races the
        release); what :meth:`resume` takes to renew it again if the release failed."""
        with self._cond:
            entry = self._kept.pop(resource, None)
            self._cond.notify()
            return entry

    def resume(self, paused: _Kept) -> None:
        """Renew again what :meth:`pause` took, unless the claim was kept anew meanwhile."""
        with self._cond:
            self._kept.setdefault(paused.resource, paused)
            self._cond.notify()

    def renewed(self, resource: str, expires_in: float) -> None:
        """The agent renewed ``resource`` itself (perhaps with a new TTL): next renewal at a
        third of what it has left now. Nothing if the server does not keep it."""
        with self._cond:
            current = self._kept.get(resource)
            if current is not None:
                current.interval = max(MIN_INTERVAL, expires_in / 3)
                current.due = time.monotonic() + current.interval
                self._cond.notify()

    def lost(self, resource: str, claim_id: object) -> str | None:
        """Why the renewal found the claim ``claim_id`` on ``resource`` lost (None if not)."""
        with self._cond:
            found = self._lost.get(resource)
            return found[1] if found is not None and found[0] == claim_id else None

    def forget(self, resource: str) -> None:
        """Forget ``resource`` altogether (released through the server)."""
        with self._cond:
            self._kept.pop(resource, None)
            self._lost.pop(resource, None)
            self._cond.notify()

    def kept(self) -> list[str]:
        with self._cond:
            return sorted(self._kept)

    def stop(self) -> None:
        """End the thread (nothing is released)."""
        with self._cond:
            self._stop = True
            self._cond.notify()

    def _start(self) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="gitlease-mcp-renewals", daemon=True
                )
                self._thread.start()

    def _next(self) -> _Kept | None:
        """Wait for the next claim due (None once stopped)."""
        with self._cond:
            while not self._stop:
                now = time.monotonic()
                due = min(self._kept.values(), key=lambda k: k.due, default=None)
                if due is not None and due.due <= now:
                    return _Kept(**vars(due))
                self._cond.wait(None if due is None else due.due - now)
            return None

    def _run(self) -> None:
        while (kept := self._next()) is not None:
            try:
                claim = heartbeat(self._open_store(), kept.resource, receipt=kept.receipt)
            except LostError as exc:
                self._settle(kept, None, exc.message)
                self._log(f"gitlease mcp: LOST: {kept.resource}: {exc.message}; no longer renewed")
                continue
            except Exception as exc:  # transient (a busy guard, a store hiccup): again, sooner
                message = exc.message if isinstance(exc, GitleaseError) else repr(exc)
                self._log(f"gitlease mcp: renewing {kept.resource} failed: {message}; retrying")
                self._settle(kept, max(MIN_INTERVAL, kept.interval / RETRY_FRACTION), None)
                continue
            ttl = claim.record.ttl_ms / 1000 if claim.record is not None else kept.interval * 3
            self._settle(kept, max(MIN_INTERVAL, ttl / 3), None, interval=ttl / 3)

    def _settle(
        self, kept: _Kept, after: float | None, lost: str | None, interval: float | None = None
    ) -> None:
        """Record a renewal's outcome, unless the claim was kept anew or dropped meanwhile."""
        with self._cond:
            current = self._kept.get(kept.resource)
            if current is None or current.generation != kept.generation:
                return
            if after is None:
                del self._kept[kept.resource]
                self._lost[kept.resource] = (kept.claim_id, lost or "lost")
                return
            if interval is not None:
                current.interval = max(MIN_INTERVAL, interval)
            current.due = time.monotonic() + after


def _stderr(line: str) -> None:
    """One line on stderr (the harness's log of the server), escaped, never a token."""
    text = printable(line)
    if TOKEN_PREFIX in text:
        text = "gitlease mcp: a message was withheld: it looked like it held a token"
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
