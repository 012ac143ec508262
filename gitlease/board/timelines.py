"""The board's timelines: each resource's recent records, as the page draws them.

They follow each record's ``previous`` id, as ``gitlease log`` does, one level at a time
for all resources at once (:func:`gitlease.api.history.read_records`), and keep every
record read by object id: a record never changes, so after a write only the new head is
read. A build reads at most :data:`HISTORY_PER_BUILD` records of history (a later one at
least a level): a new board over a large store shows its table at once, its timelines over
the next polls. Kept apart from :mod:`gitlease.board.data` (what a build reads and caches)
because history is read and kept on its own terms: by object id, never invalidated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from ..api.history import read_records
from ..model.claim import Claim
from ..model.record import RELEASED, Record
from ..store.base import Store

#: How many records of each resource's history the timeline shows, newest last.
TIMELINE_RECORDS = 16
#: How many records of history one build reads beyond its first level: a board that starts
#: over a large store shows its table at once, and the timelines fill in over the next
#: polls, a level of history (one ``git cat-file --batch``) a build.
HISTORY_PER_BUILD = 250


def _encoder() -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=True, separators=(",", ":"))``, its encoder made once
    (``json.dumps`` makes one a call: most of the cost of a small value, and a board writes
    one a timeline)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the same text, slower
        return json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
    fallback = json.JSONEncoder().default
    chunks = make(
        None, fallback, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    return lambda value: "".join(chunks(value, 0))


#: A value as compact ASCII JSON (the page's document and each timeline's text).
compact_json = _encoder()


class Timelines:
    """The timelines of one store's claims, kept from one build to the next (not
    thread-safe: the board builds under its lock)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Every record read for a timeline, by object id (a record never changes); None for
        #: one that is missing (expired by retention) or does not verify: its chain ends.
        self._records: dict[str, Record | None] = {}
        #: How many times history was read (a new level shows as news to the page).
        self.levels = 0
        #: Whether some timeline still has records to read (a later build reads them).
        self.pending = False
        #: The timeline of each head record (object id, state) drawn last time, and its text.
        self._events: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}

    def lines(
        self, found: list[Claim], claims: list[dict[str, Any]], *, shown: bool
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """Each resource's recent records, oldest first, as events for the picture; and
        each one's JSON text (made once for its head record and state)."""
        if len(self._records) > 50 * TIMELINE_RECORDS * max(1, len(found)):
            self._records.clear()  # (records of refs long gone: a long-lived board stays small)
            self._events.clear()
        for claim in found:  # the heads: read and verified by the listing already
            if claim.oid is not None and claim.record is not None:
                self._records.setdefault(claim.oid, claim.record)
        if self._read_levels(found, shown):
            self.levels += 1
            self._events.clear()  # (drawn from fewer records than there are now)
        out: dict[str, Any] = {}
        texts: dict[str, str] = {}
        events: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        for claim, doc in zip(found, claims, strict=True):
            if claim.oid is None or claim.record is None:
                out[claim.ref] = {"events": [], "earlier": False}
                texts[claim.ref] = '{"events":[],"earlier":false}'
                continue
            key = (claim.oid, claim.state)
            made = self._events.get(key)
            if made is None:
                chain = list(self._chain(claim.oid))
                chain.reverse()
                first = chain[0] if chain else None
                line = {
                    "events": _events(chain, doc),
                    "earlier": first is not None and first.previous is not None,
                }
                made = (line, compact_json(line))
            events[key] = made
            out[claim.ref], texts[claim.ref] = made
        self._events = events
        return out, texts

    def _chain(self, oid: str) -> Iterator[Record]:
        seen = 0
        current: str | None = oid
        while current is not None and seen < TIMELINE_RECORDS:
            record = self._records.get(current)
            if record is None:
                return
            yield record
            seen += 1
            current = record.previous

    def _read_levels(self, found: list[Claim], shown: bool) -> bool:
        """Read records not seen before, one level of ``previous`` ids at a time for all
        resources at once (one ``git cat-file --batch`` a level, signatures checked once:
        the reads' verified cache): as many levels as :data:`HISTORY_PER_BUILD` allows, and
        at least one once the board has shown a document (``shown``). Whether it read anything; sets
        :attr:`pending`."""
        wanted: dict[str, tuple[str, str]] = {}
        for claim in found:
            tip = self._first_unread(claim.oid)
            if tip is not None:
                wanted[tip] = (claim.resource, claim.ref)
        read = 0
        depth = 0
        while wanted and depth < TIMELINE_RECORDS:
            first_level = read == 0 and shown
            if read + len(wanted) > HISTORY_PER_BUILD and not first_level:
                break
            records = read_records(self.store, wanted)
            read += len(wanted)
            following: dict[str, tuple[str, str]] = {}
            for oid, (resource, ref) in wanted.items():
                record = records.get(oid)
                self._records[oid] = record
                prev = record.previous if record is not None else None
                if prev is not None and prev not in self._records:
                    following[prev] = (resource, ref)
            wanted = following
            depth += 1
        self.pending = any(self._first_unread(c.oid) is not None for c in found)
        return read > 0

    def _first_unread(self, oid: str | None) -> str | None:
        """The first record of the chain from ``oid`` not read yet (within the window)."""
        depth = 0
        while oid is not None and depth < TIMELINE_RECORDS:
            if oid not in self._records:
                return oid
            record = self._records[oid]
            oid = record.previous if record is not None else None
            depth += 1
        return None


def _events(chain: list[Record], current: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of one resource (oldest first) as the picture's events: when each was
    written, what it did (acquired, renewed, released, taken over), until when it held.
    Times are the records' own RFC 3339 texts (the page reads them)."""
    events: list[dict[str, Any]] = []
    previous = None
    for r in chain:
        if r.state == RELEASED:
            kind, at = "released", r.released_at
        elif previous is not None and previous.claim_id == r.claim_id:
            kind, at = "renewed", r.renewed_at
        elif previous is not None and previous.state != RELEASED:
            kind, at = "taken over", r.acquired_at
        else:
            kind, at = "acquired", r.acquired_at
        events.append(
            {
                "kind": kind,
                "at": at,
                "expires_at": None if r.state == RELEASED else r.expires_at,
                "claim_id": r.claim_id,
                "owner": r.owner,
                "revision": r.revision,
                "checkpoint": r.checkpoint,
            }
        )
        previous = r
    if events and current["state"] == "expired":
        events[-1]["expired"] = True
    return events
