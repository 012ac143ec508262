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
:data:`REMOTE_REFRESH_SECONDS`. The timelines are :mod:`gitlease.board.timelines`'s, kept
between builds too.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from ..api.reads import Listing, claims_document
from ..errors import GitleaseError
from ..gitio import layout
from ..model.clock import Now
from ..model.refname import PREFIX
from ..state import keepers
from ..state.waitqueue import queue_dir, waiting_for
from ..store.base import Store
from .timelines import Timelines, compact_json

#: The longest a cached document is served before it is built again.
MAX_AGE_SECONDS = 2.0
#: A remote store's mirror is fetched at most this often.
REMOTE_REFRESH_SECONDS = 3.0


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
            lines = ",".join(f"{compact_json(ref)}:{text}" for ref, text in self._timelines.items())
            text = f'{compact_json(head)[:-1]},"timelines":{{{lines}}},{compact_json(tail)[1:]}'
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
        #: Each resource's recent records, read a level a build and kept by object id.
        self._history = Timelines(store)

    # ------------------------------------------------------------------ public

    @property
    def history_pending(self) -> bool:
        """Whether some timeline still has records to read (a later build reads them)."""
        return self._history.pending

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
        timelines: dict[str, Any] = {}
        texts: dict[str, str] = {}
        if self.timelines:  # (a level of history at least, once a document was shown)
            timelines, texts = self._history.lines(found, claims, shown=self._built is not None)
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
        return _Built(key, doc, started + soonest, self._history.levels, texts)

    def _dead_keepers(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for k in keepers.registered(self.store.git_dir):
            if not k.alive:
                for _, ref, cid in k.claims:
                    out[(ref, cid)] = k.pid
        return out


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
