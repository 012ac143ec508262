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

The claims are the ``list --json`` document, built by
:func:`gitlease.api.reads.list_document`, the function ``gitlease list`` uses. A
remote store is read from its local mirror, fetched at most every
:data:`REMOTE_REFRESH_SECONDS`. The timelines follow each record's ``previous``
id, as ``gitlease log`` does, one level at a time for all resources at once (one
``git cat-file --batch`` a level), and keep every record read by object id: a
record never changes, so after a write only the new head is read.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..api.reads import claims_document, list_claims
from ..errors import GitleaseError
from ..gitio import layout
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, judge
from ..model.clock import Now
from ..model.record import RELEASED
from ..model.refname import PREFIX
from ..state import keepers
from ..state import verified_records as verified
from ..state.waitqueue import queue_dir, waiting_for
from ..store.local import Store

#: The longest a cached document is served before it is built again.
MAX_AGE_SECONDS = 2.0
#: A remote store's mirror is fetched at most this often.
REMOTE_REFRESH_SECONDS = 3.0
#: How many records of each resource's history the timeline shows, newest last.
TIMELINE_RECORDS = 16


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


class _Built:
    """One built document and when it stops being valid."""

    def __init__(self, key: tuple[Any, ...], doc: dict[str, Any], until: float) -> None:
        self.key = key
        self.doc = doc
        self.until = until
        self.built = time.monotonic()
        self.body = json.dumps(doc, ensure_ascii=True, separators=(",", ":")).encode("ascii")
        self.etag = f'"{hash((key, self.built)) & 0xFFFFFFFFFFFF:x}"'
        #: What a later build must differ in to be news (not the times, which move anyway).
        self.same = (
            tuple(
                (c["ref"], c["oid"], c["state"], c["bound"], repr(c["keepalive"]))
                for c in doc["claims"]
            ),
            repr(doc["extra"]),
            doc["fetch_error"],
        )


class Board:
    """The board's data over one store: :meth:`page` for the page, :meth:`claims` for
    ``/api/claims``. Thread-safe (the server answers requests on threads)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._built: _Built | None = None
        self._fetched = 0.0
        self._fetch_error: str | None = None
        #: Every record read for a timeline, by object id (a record never changes).
        self._records: dict[str, Claim] = {}
        #: The events of each head record (object id, state) drawn last time.
        self._events: dict[tuple[str, str], list[Any]] = {}

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
        found = list_claims(self.store, refresh=False)
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
        doc = {
            "claims": claims,
            "extra": extra,
            "timelines": self._timelines(found, claims, now),
            "now_ms": now.wall_ms,
            "store": str(self.store.git_dir),
            "remote": getattr(self.store, "shown", None),
            "fetch_error": self._fetch_error,
            "summary": summary(claims),
        }
        return _Built(key, doc, started + soonest)

    def _dead_keepers(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for k in keepers.registered(self.store.git_dir):
            if not k.alive:
                for _, ref, cid in k.claims:
                    out[(ref, cid)] = k.pid
        return out

    # ------------------------------------------------------------------ timelines

    def _timelines(
        self, found: list[Claim], claims: list[dict[str, Any]], now: Now
    ) -> dict[str, Any]:
        """Each resource's recent records, oldest first, as events for the picture."""
        if len(self._records) > 50 * TIMELINE_RECORDS * max(1, len(found)):
            self._records.clear()  # (records of refs long gone: a long-lived board stays small)
            self._events.clear()
        for claim in found:  # the heads: read and judged by the listing already
            if claim.oid is not None and claim.record is not None:
                self._records.setdefault(claim.oid, claim)
        self._read_levels(found, now)
        out: dict[str, Any] = {}
        events: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for claim, doc in zip(found, claims, strict=True):
            if claim.oid is None or claim.record is None:
                out[claim.ref] = {"events": [], "earlier": False}
                continue
            key = (claim.oid, claim.state)
            made = self._events.get(key)
            if made is None:
                chain = list(self._chain(claim.oid))
                chain.reverse()
                first = chain[0].record if chain else None
                made = [_events(chain, doc), first is not None and first.previous is not None]
            events[key] = made
            out[claim.ref] = {"events": made[0], "earlier": made[1]}
        self._events = events
        return out

    def _chain(self, oid: str) -> Iterator[Claim]:
        seen = 0
        current: str | None = oid
        while current is not None and seen < TIMELINE_RECORDS:
            claim = self._records.get(current)
            if claim is None:
                return
            yield claim
            seen += 1
            current = claim.record.previous if claim.record is not None else None

    def _read_levels(self, found: list[Claim], now: Now) -> None:
        """Read the records not seen before, one level of ``previous`` ids at a time, for
        all resources at once; signatures are checked once (the reads' verified cache)."""
        wanted: dict[str, tuple[str, str]] = {}
        for claim in found:
            tip = self._first_unread(claim.oid)
            if tip is not None:
                wanted[tip] = (claim.resource, claim.ref)
        known = verified.load(self.store.git_dir) if wanted else frozenset()
        checked: list[str] = []
        depth = 0
        while wanted and depth < TIMELINE_RECORDS:
            blobs = self.store._cat_objects(list(wanted))
            following: dict[str, tuple[str, str]] = {}
            for oid, (resource, ref) in wanted.items():
                data, problem = blobs.get(oid, (None, "missing"))
                if data is None:
                    continue  # expired by retention: the kept part ends here
                claim = judge(Snapshot(ref, oid, data, problem), now, resource, known=known)
                self._records[oid] = claim
                if claim.record is None:
                    continue  # a record that does not verify names no trustworthy predecessor
                if oid not in known:
                    checked.append(oid)
                prev = claim.record.previous
                if prev is not None and prev not in self._records:
                    following[prev] = (resource, ref)
            wanted = following
            depth += 1
        if checked:
            verified.save(self.store.git_dir, checked, known)

    def _first_unread(self, oid: str | None) -> str | None:
        """The first record of the chain from ``oid`` not read yet (within the window)."""
        depth = 0
        while oid is not None and depth < TIMELINE_RECORDS:
            claim = self._records.get(oid)
            if claim is None:
                return oid
            oid = claim.record.previous if claim.record is not None else None
            depth += 1
        return None


def _events(chain: list[Claim], current: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of one resource (oldest first) as the picture's events: when each was
    written, what it did (acquired, renewed, released, taken over), until when it held.
    Times are the records' own RFC 3339 texts (the page reads them)."""
    events: list[dict[str, Any]] = []
    previous = None
    for claim in chain:
        r = claim.record
        if r is None:
            continue
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
