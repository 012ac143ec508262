"""The store's index of path scopes, and the checks made from it (docs/performance.md).

Every claim acquired with path scopes is noted in one small file of the store,
``<store>/worklease/scopes/index`` (a JSON document: one entry a claim, naming its ref,
claim id, resource and patterns), written under the store-wide scope guard
(``<store>/worklease/scopes/guard``, an ``flock``) *before* the claim's compare-and-swap.
So the index always holds every live scoped claim (a superset: entries of claims that
were released, expired, or never landed stay until the next compaction), and:

* an acquire with scopes holds the scope guard across reading the index, judging the
  claims whose scopes overlap its own, noting itself and its compare-and-swap: two
  acquires with overlapping scopes decide one after the other, and the second sees the
  first (exactly one wins a race);
* the commit check reads the index and the refs of only those entries whose patterns
  cover a changed path, never every record.

The index is a hint, never the truth: every entry that matters is judged from its ref's
current record (parsed, verified, active, the same claim id, and that record's own
patterns). An acquire rebuilds a missing or unreadable index from every record first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._util.text import printable
from .._util.value import Value
from ..errors import CorruptRecordError, HeldError, UsageError
from ..gitio import layout
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, is_expired, judge
from ..model.clock import Now, format_duration
from ..model.record import Record, parse
from ..state.guards import hold
from ..store.local import Store
from .wildmatch import MAX_PATTERN_CHARS, compile_pattern, overlaps

VERSION = 1
#: Seconds an acquire with scopes waits for another one's scope guard before HELD.
SCOPE_GUARD_WAIT_SECONDS = 30.0
#: Compact when the index holds this many entries more than twice the live ones last seen.
_SLACK = 32


class Entry(Value):
    """One scoped claim as the index notes it (a hint: judged from its ref when it matters)."""

    __slots__ = ("ref", "claim_id", "resource", "paths")
    ref: str
    claim_id: str
    resource: str
    paths: tuple[str, ...]


class Index(Value):
    """The index as read: its entries, and how many were live at the last compaction."""

    __slots__ = ("entries", "live")
    entries: list[Entry]
    live: int


def index_path(git_dir: Path) -> Path:
    """The index file of the store at ``git_dir``."""
    return layout.scopes_index(git_dir)


def guard_path(git_dir: Path) -> Path:
    """The store-wide scope guard of the store at ``git_dir``."""
    return layout.scopes_guard(git_dir)


def pointer_path(worktree_git_dir: Path) -> Path:
    """Where a repository notes its store's path for the commit hook's shell fast path."""
    from ..gitio.gitdirs import common_dir

    return layout.scopes_store_note(common_dir(worktree_git_dir))


def note_store(worktree_git_dir: Path | None, store_git_dir: Path) -> None:
    """Note, in the repository's git dir, which store its claims live in: the installed
    hook reads it to know, without starting Python, whether any claim there has path
    scopes (hooks/gitlease-hook). Written only when it changes; never fails the caller."""
    if worktree_git_dir is None:
        return
    path = pointer_path(worktree_git_dir)
    text = f"{store_git_dir}\n"
    try:
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".scopes-store.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, UnicodeError):
        pass


def read_index(git_dir: Path) -> Index | None:
    """The index, or None if there is none or it cannot be read as gitlease writes it."""
    try:
        data = index_path(git_dir).read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return None
    return _parse_index(data)


def _parse_index(data: bytes) -> Index | None:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return None
    live, raw = doc.get("live"), doc.get("entries")
    if not isinstance(live, int) or not isinstance(raw, list):
        return None
    entries = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 4):
            return None
        ref, claim_id, resource, paths = item
        if not (
            isinstance(ref, str)
            and isinstance(claim_id, str)
            and isinstance(resource, str)
            and isinstance(paths, list)
            and paths
            and all(isinstance(p, str) and 0 < len(p) <= MAX_PATTERN_CHARS for p in paths)
        ):
            return None
        entries.append(Entry(ref, claim_id, resource, tuple(paths)))
    return Index(entries, live)


def write_index(git_dir: Path, index: Index) -> None:
    """Replace the index at once (a reader sees the old one or the new one, never a part)."""
    path = index_path(git_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "version": VERSION,
        "live": index.live,
        "entries": [[e.ref, e.claim_id, e.resource, list(e.paths)] for e in index.entries],
    }
    tmp = path.with_name(f".index.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextmanager
def scope_guard(store: Store) -> Iterator[None]:
    """Hold the store-wide scope guard (HELD if another process keeps it too long)."""
    path = guard_path(store.git_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Held only from reading the index to a compare-and-swap (never across an exec), and
    # dropped by the kernel if its holder dies: a longer wait than a resource guard's, so
    # that scoped acquires queued behind each other on a busy machine are not told HELD.
    with hold(path, "the path scopes of this store", wait=SCOPE_GUARD_WAIT_SECONDS):
        yield


def refuse_remote(store: Store) -> None:
    """USAGE for scopes on a store coordinated through a git remote (docs/remote.md)."""
    if store.remote is not None:
        raise UsageError(
            "--paths is not supported on a store coordinated through a git remote: another "
            "host's acquire would not see this host's scope index, so two overlapping scopes "
            "could both be granted. Acquire without --paths, or use a local store "
            "(see docs/howto/path-scopes.md)"
        )


def rebuild(store: Store) -> Index:
    """The index made afresh from every record of the store (under the scope guard)."""
    now = Now.read()
    entries = []
    for snap in store.read_all():
        record = _parsed(snap)
        if record is not None and record.held and record.paths and not is_expired(record, now):
            entries.append(Entry(snap.ref, record.claim_id, record.resource, record.paths))
    return Index(entries, len(entries))


def _parsed(snap: Snapshot) -> Record | None:
    if snap.data is None:
        return None
    try:
        return parse(snap.data)
    except CorruptRecordError:
        return None


def current(store: Store) -> Index:
    """The index to decide from (under the scope guard): read, or rebuilt and written."""
    index = read_index(store.git_dir)
    if index is None:
        index = rebuild(store)
        write_index(store.git_dir, index)
    return index


class ScopesOverlap(HeldError):
    """HELD because of a live claim's overlapping scope, not the resource itself: the same
    answer for every candidate of a ``--first-free``."""


class Conflict(Value):
    """A live claim whose scopes overlap the new claim's: (mine, theirs, witness) pairs."""

    __slots__ = ("claim", "pairs")
    claim: Claim
    pairs: list[tuple[str, str, str]]


def conflicts(
    store: Store, index: Index, paths: Sequence[str], exclude: Sequence[str], now: Now
) -> list[Conflict]:
    """The live claims (on refs not in ``exclude``) whose scopes overlap ``paths``."""
    skip = set(exclude)
    wanted = [e for e in index.entries if e.ref not in skip and _any_overlap(paths, e.paths)]
    if not wanted:
        return []
    out = []
    snaps = store.read_many(sorted({e.ref for e in wanted}))
    by_ref = {s.ref: s for s in snaps}
    seen: set[str] = set()
    for entry in wanted:
        if entry.ref in seen:
            continue
        claim = judge(by_ref[entry.ref], now)
        if claim.state == "invalid":
            continue  # (an acquire of it is refused on its own; it holds no scope)
        record = claim.record
        if not claim.active or record is None or not record.paths:
            continue
        seen.add(entry.ref)
        pairs = overlaps(paths, _valid(record.paths))
        if pairs:
            out.append(Conflict(claim, pairs))
    return out


def _valid(patterns: Sequence[str]) -> list[str]:
    """The patterns of a record that compile: one that does not (a forged record) covers
    nothing, since gitlease never writes it."""
    out = []
    for p in patterns:
        try:
            compile_pattern(p)
        except UsageError:
            continue
        out.append(p)
    return out


def _any_overlap(mine: Sequence[str], theirs: Sequence[str]) -> bool:
    try:
        return bool(overlaps(mine, theirs))
    except UsageError:  # a forged entry: judged from its record instead
        return True


def held_error(found: list[Conflict], paths: Sequence[str]) -> ScopesOverlap:
    """HELD naming every conflicting claim, its overlapping patterns and a witness path."""
    parts = []
    for c in found:
        r = c.claim.record
        assert r is not None
        pairs = "; ".join(
            f"{printable(mine)!r} overlaps {printable(theirs)!r} (both cover {printable(w)!r})"
            for mine, theirs, w in c.pairs
        )
        left = format_duration(c.claim.expires_in_ms or 0)
        parts.append(
            f"claim {r.claim_id} on {printable(c.claim.resource)} held by {printable(r.owner)} "
            f"(expires in {left}): {pairs}"
        )
    message = (
        "the path scopes overlap a live claim on another resource: "
        + " | ".join(parts)
        + ". Choose other work or narrower --paths, or wait until it is released"
    )
    docs: list[dict[str, Any]] = []
    for c in found:
        doc = c.claim.to_dict()
        doc["overlaps"] = [{"paths": m, "scope": t, "witness": w} for m, t, w in c.pairs]
        docs.append(doc)
    error = ScopesOverlap(message, claim=docs[0])
    error.claims = docs
    return error


def note(store: Store, index: Index, records: Sequence[tuple[str, Record]], now: Now) -> None:
    """Add the new claims (ref, record) to the index, before their compare-and-swap; compact
    first when the index has grown well past its live entries."""
    entries = index.entries
    live = index.live
    if len(entries) >= 2 * live + _SLACK:
        entries = _compact(store, entries, now)
        live = len(entries)
    added = [Entry(ref, r.claim_id, r.resource, r.paths or ()) for ref, r in records]
    write_index(store.git_dir, Index([*entries, *added], live))


def _compact(store: Store, entries: list[Entry], now: Now) -> list[Entry]:
    """The entries whose ref still holds that claim, held and not expired (parsed only: an
    entry kept for a forged record is judged again when it matters)."""
    snaps = {s.ref: s for s in store.read_many(sorted({e.ref for e in entries}))}
    kept = []
    for entry in entries:
        record = _parsed(snaps[entry.ref])
        if (
            record is not None
            and record.claim_id == entry.claim_id
            and record.held
            and not is_expired(record, now)
        ):
            kept.append(entry)
    return kept
