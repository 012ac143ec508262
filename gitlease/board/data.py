"""What the board shows, read from the store and cached by the store's state.

The page polls twice a second; an idle board must cost next to nothing. So every
document is cached under a *fingerprint* of what it is made of: the ``stat`` of
every ref file under ``refs/worklease/`` and of ``packed-refs`` (a write renames
a new ref file into place: a new inode and time), of the keepalive registry and
of the waiters' directory. A poll whose fingerprint matches gets the cached
bytes (an HTTP 304 when the page already has them). Time changes a claim's state
too: the cache also ends when the first active claim would expire, and after
:data:`MAX_AGE_SECONDS` whatever happens (a keepalive process that died changes
no file).

The claims are the ``list --json`` document, from :class:`gitlease.api.reads.Listing`:
``gitlease list``'s claims, kept between builds, so that a build reads, parses and
verifies only the records whose object id changed, and times every claim afresh. A
remote store is read from its local mirror, fetched at most every
:data:`REMOTE_REFRESH_SECONDS`. The timelines follow each record's ``previous``
id, as ``gitlease log`` does, one level at a time for all resources at once
(:func:`gitlease.api.reads.read_records`), and keep every record read by object id: a
record never changes, so after a write only the new head is read. A build reads at
most :data:`HISTORY_PER_BUILD` records of history (a later one at least a level): a
new board over a large store shows its table at once, its timelines over the next polls.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..api.reads import Listing, claims_document, read_records
from ..errors import GitleaseError
from ..gitio import layout
from ..model.claim import Claim
from ..model.clock import Now
from ..model.record import RELEASED, Record
from ..model.refname import PREFIX
from ..state import keepers
from ..state.waitqueue import queue_dir, waiting_for
from ..store.base import Store

#: The longest a cached document is served before it is built again.
MAX_AGE_SECONDS = 2.0
#: A remote store's mirror is fetched at most this often.
REMOTE_REFRESH_SECONDS = 3.0
#: How many records of each resource's history the timeline shows, newest last.
TIMELINE_RECORDS = 16
#: How many records of history one build reads beyond its first level: a board that starts
#: over a large store shows its table at once, and the timelines fill in over the next
#: polls, a level of history (one ``git cat-file --batch``) a build.
HISTORY_PER_BUILD = 250


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _scan(directory: str, out: list[tuple[str, int, int, int]]) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _scan(entry.path, out)
            else:
                st = entry.stat(follow_symlinks=False)
                out.append((entry.path, st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:
            continue


def fingerprint(git_dir: Path) -> tuple[Any, ...]:
    """What the claims, keepers and waiters of the store at ``git_dir`` are made of, as a
    value that changes whenever one of them is written."""
    refs: list[tuple[str, int, int, int]] = []
    _scan(str(git_dir / PREFIX.rstrip("/")), refs)
    refs.sort()
    waiters: list[tuple[str, int, int, int]] = []
    _scan(str(queue_dir(git_dir)), waiters)
    waiters.sort()
    return (
        tuple(refs),
        _stat_key(git_dir / "packed-refs"),
        _stat_key(layout.keepalive_registry(git_dir)),
        tuple(waiters),
    )


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


_json = _encoder()


class _Built:
    """One built document and when it stops being valid."""

    def __init__(
        self,
        key: tuple[Any, ...],
        doc: dict[str, Any],
        until: float,
        history: int,
        timelines: dict[str, str],
    ) -> None:
        self.key = key
        self.doc = doc
        self.until = until
        self.built = time.monotonic()
        self._timelines = timelines
        self._body: bytes | None = None
        self.etag = f'"{hash((key, self.built)) & 0xFFFFFFFFFFFF:x}"'
        #: What a later build must differ in to be news (not the times, which move anyway).
        self.same = (
            tuple(
                (c["ref"], c["oid"], c["state"], c["bound"], repr(c["keepalive"]))
                for c in doc["claims"]
            ),
            repr(doc["extra"]),
            doc["fetch_error"],
            history,
        )

    @property
    def body(self) -> bytes:
        """The document as JSON, made when first asked for (a build that is no news is
        never written out), each timeline's text as it was made for its head record."""
        if self._body is None:
            doc = self.doc
            head = {k: doc[k] for k in ("claims", "extra")}
            tail = {k: v for k, v in doc.items() if k not in ("claims", "extra", "timelines")}
            lines = ",".join(f"{_json(ref)}:{text}" for ref, text in self._timelines.items())
            text = f'{_json(head)[:-1]},"timelines":{{{lines}}},{_json(tail)[1:]}'
            self._body = text.encode("ascii")
        return self._body


class Board:
    """The board's data over one store: :meth:`page` for the page, :meth:`claims` for
    ``/api/claims``. Thread-safe (the server answers requests on threads)."""

    def __init__(self, store: Store, *, timelines: bool = True) -> None:
        self.store = store
        #: ``timelines=False``: no history is read (``list --watch`` draws none).
        self.timelines = timelines
        self._lock = threading.Lock()
        self._built: _Built | None = None
        self._fetched = 0.0
        self._fetch_error: str | None = None
        #: The claims, kept between builds: only the records that changed are read again.
        self.listing = Listing(store)
        #: Every record read for a timeline, by object id (a record never changes); None for
        #: one that is missing (expired by retention) or does not verify: its chain ends.
        self._records: dict[str, Record | None] = {}
        #: How many times history was read (a new level shows as news to the page).
        self._history = 0
        #: Whether some timeline still has records to read (a later build reads them).
        self.history_pending = False
        #: The timeline of each head record (object id, state) drawn last time, and its text.
        self._events: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}

    # ------------------------------------------------------------------ public

    def claims(self) -> dict[str, Any]:
        """The ``list --json`` document as of now (the cached one, its times moved on)."""
        built = self._current()
        elapsed = time.monotonic() - built.built
        out = []
        for claim in built.doc["claims"]:
            left = claim.get("expires_in")
            if left is not None and elapsed:
                claim = dict(claim)
                claim["expires_in"] = round(left - elapsed, 3)
            out.append(claim)
        return {"claims": out}

    def page(self) -> tuple[bytes, str]:
        """The page's document as JSON bytes and its entity tag."""
        built = self._current()
        return built.body, built.etag

    def page_doc(self) -> tuple[dict[str, Any], float]:
        """The page's document, and how many seconds ago it was built (its ``expires_in``
        are as of then)."""
        built = self._current()
        return built.doc, time.monotonic() - built.built

    # ------------------------------------------------------------------ building

    def _refresh_remote(self) -> None:
        if self.store.remote is None:
            return
        now = time.monotonic()
        if now - self._fetched < REMOTE_REFRESH_SECONDS:
            return
        self._fetched = now
        try:
            self.store.refresh()
            self._fetch_error = None
        except GitleaseError as exc:  # shown on the page; the mirror is still worth showing
            self._fetch_error = exc.message

    def _current(self) -> _Built:
        with self._lock:
            self._refresh_remote()
            key = (fingerprint(self.store.git_dir), self._fetch_error)
            built = self._built
            now = time.monotonic()
            if built is None or built.key != key or now >= built.until:
                fresh = self._build(key)
                if built is not None and fresh.same == built.same:
                    # the same claims in the same states: the page keeps what it has (304)
                    built.key, built.until = fresh.key, fresh.until
                else:
                    built = self._built = fresh
            return built

    def _build(self, key: tuple[Any, ...]) -> _Built:
        started = time.monotonic()
        found = self.listing.claims()
        claims: list[dict[str, Any]] = claims_document(found)["claims"]
        now = Now.read()
        refs = [c["ref"] for c in claims]
        waiters = waiting_for(self.store.git_dir, refs) if refs else {}
        dead = self._dead_keepers()
        worktree = self.store.location.worktree
        extra: dict[str, dict[str, Any]] = {}
        soonest = MAX_AGE_SECONDS
        for c in claims:
            info: dict[str, Any] = {"waiters": waiters.get(c["ref"], 0)}
            if c.get("bound") and worktree is not None:
                info["worktree"] = str(worktree)
            keeper = c.get("keepalive")
            if keeper is not None:
                info["keeper"] = {"pid": keeper["pid"], "alive": True}
            elif (c["ref"], c["claim_id"]) in dead:
                info["keeper"] = {"pid": dead[(c["ref"], c["claim_id"])], "alive": False}
            extra[c["ref"]] = info
            if c["state"] == "active" and c["expires_in"] is not None:
                soonest = min(soonest, max(0.05, c["expires_in"]))
        timelines, texts = self._timelines(found, claims) if self.timelines else ({}, {})
        if self.history_pending:
            soonest = 0.0  # the next poll reads the next level of history
        doc = {
            "claims": claims,
            "extra": extra,
            "timelines": timelines,
            "now_ms": now.wall_ms,
            "store": str(self.store.git_dir),
            "remote": getattr(self.store, "shown", None),
            "fetch_error": self._fetch_error,
            "summary": summary(claims),
        }
        return _Built(key, doc, started + soonest, self._history, texts)

    def _dead_keepers(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for k in keepers.registered(self.store.git_dir):
            if not k.alive:
                for _, ref, cid in k.claims:
                    out[(ref, cid)] = k.pid
        return out

    # ------------------------------------------------------------------ timelines

    def _timelines(
        self, found: list[Claim], claims: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """Each resource's recent records, oldest first, as events for the picture; and
        each one's JSON text (made once for its head record and state)."""
        if len(self._records) > 50 * TIMELINE_RECORDS * max(1, len(found)):
            self._records.clear()  # (records of refs long gone: a long-lived board stays small)
            self._events.clear()
        for claim in found:  # the heads: read and verified by the listing already
            if claim.oid is not None and claim.record is not None:
                self._records.setdefault(claim.oid, claim.record)
        if self._read_levels(found):
            self._history += 1
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
                made = (line, _json(line))
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

    def _read_levels(self, found: list[Claim]) -> bool:
        """Read records not seen before, one level of ``previous`` ids at a time for all
        resources at once (one ``git cat-file --batch`` a level, signatures checked once:
        the reads' verified cache): as many levels as :data:`HISTORY_PER_BUILD` allows, and
        at least one once the board has shown a document. Whether it read anything; sets
        :attr:`history_pending`."""
        wanted: dict[str, tuple[str, str]] = {}
        for claim in found:
            tip = self._first_unread(claim.oid)
            if tip is not None:
                wanted[tip] = (claim.resource, claim.ref)
        read = 0
        depth = 0
        while wanted and depth < TIMELINE_RECORDS:
            first_level = read == 0 and self._built is not None
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
        self.history_pending = any(self._first_unread(c.oid) is not None for c in found)
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


def summary(claims: list[dict[str, Any]], soon_seconds: float = 60.0) -> dict[str, int]:
    """How many claims are active, active and expiring within a minute, expired but not
    taken or pruned, released, invalid."""
    out = {"active": 0, "expiring_soon": 0, "expired": 0, "released": 0, "invalid": 0}
    for c in claims:
        state = c["state"]
        if state in out:
            out[state] += 1
        left = c.get("expires_in")
        if state == "active" and left is not None and left <= soon_seconds:
            out["expiring_soon"] += 1
    return out
