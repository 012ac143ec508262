"""The retention pass (``gitlease prune``, and the daily automatic pass): keeping a store
small without ever adopting.

It applies the policy of :mod:`gitlease.maintenance.retention`: it removes old tombstones (leaving
revision floors), trims each resource's reflog to the history the policy keeps, removes the
files that serve nothing any more, and runs ``git gc`` on the store so that git drops what
nothing names. Record chains are read through one ``git cat-file --batch`` process per
command (:meth:`Store.blob_reader`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from .._util.files import atomic_write, flock_polling, open_lock_file
from ..api.reads import newest_written
from ..claims.ownership import receipt_dir
from ..errors import CompareAndSwapFailed, GitleaseError, StoreError, UsageError
from ..gitio import layout
from ..gitio.gitread import Snapshot, parse_reflog
from ..model.claim import Claim, judge
from ..model.clock import Now, parse_rfc3339, rfc3339
from ..model.durations import duration_ms
from ..model.record import parse
from ..model.sightings import Sightings
from ..receipts import directory as receiptdir
from ..state import floors, guards, highwater, keepers
from ..store.local import GC_GRACE, Store
from . import retention
from .verify import BlobRead, max_revision_in_reflog, orphan_receipts

#: How long the pass waits for a resource's guard before it leaves that resource for the
#: next pass: a write holds it for milliseconds, an ``exec`` for as long as its command runs.
_GUARD_WAIT_SECONDS = 0.5


@dataclass
class Retention:
    """What one retention pass did (``prune --json``, docs/reference/json.md)."""

    policy: retention.Policy
    #: Resources whose tombstone was removed (a revision floor carries their last revision).
    pruned: list[str] = field(default_factory=list)
    #: Resources whose history was trimmed, and the records that expired from it.
    trimmed: int = 0
    expired: int = 0
    #: Files (or entries) removed because they served nothing any more.
    removed: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("reflogs", "floors", "guards", "sightings", "keepalive", "receipts"), 0
        )
    )
    #: Floors kept (in ``floors/packed``), for resources whose ref is gone.
    floors: int = 0
    #: Resources left for the next pass: their guard was held (a write, an ``exec``).
    busy: list[str] = field(default_factory=list)
    gc: bool = False
    #: Why nothing was done (``--auto`` only), else None.
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The pass as ``prune --json`` prints it."""
        return {
            "pruned": self.pruned,
            "trimmed": self.trimmed,
            "expired_records": self.expired,
            "removed": dict(self.removed),
            "floors": self.floors,
            "busy": self.busy,
            "gc": self.gc,
            "skipped": self.skipped,
            "policy": self.policy.to_dict(),
        }

    def describe(self) -> str:
        """The pass for people, one line per kind of work."""
        if self.skipped:
            return f"nothing done: {self.skipped}"
        removed = ", ".join(f"{n} {kind}" for kind, n in self.removed.items() if n)
        lines = [
            f"pruned {len(self.pruned)} tombstone(s)",
            f"expired {self.expired} record(s) from the history of {self.trimmed} resource(s)",
            f"removed {removed} (they served nothing)" if removed else "removed no file",
            f"kept {self.floors} revision floor(s)",
        ]
        if self.busy:
            lines.append(f"left for the next pass (busy): {', '.join(sorted(set(self.busy)))}")
        lines.append("git gc: done" if self.gc else "git gc: not run")
        return "\n".join(lines)


def prune(store: Store, *, older_than: str | int | None = None) -> list[str]:
    """Run the retention pass (:func:`retain`); the resources whose tombstone it removed.

    ``older_than``: remove tombstones released longer ago than this (default: the
    store's ``gitlease.tombstoneAge``, 7 days).
    """
    return retain(store, older_than=older_than).pruned


def retain(
    store: Store,
    *,
    older_than: str | int | None = None,
    auto: bool = False,
    grace: str = GC_GRACE,
) -> Retention:
    """Apply the store's retention policy (:mod:`gitlease.maintenance.retention`) once.

    In order, each resource under its guard (a busy one is left for the next pass):
    tombstones older than ``older_than`` are removed after their revision floor is
    written; each reflog is trimmed to what the policy keeps (never the current record,
    nor an active claim's records back to its acquire; a record that does not verify
    keeps its whole history for ``verify --repair``); reflogs of refs that are gone are
    removed once a floor holds their highest revision. Then what serves nothing goes:
    floors that a ref carries again (the rest are packed into one file), guards of refs
    that do not exist and that nobody holds, sightings of records no longer current,
    registry entries of keepalive processes that ended, and this worktree's spent and
    orphaned receipts. Last, ``git gc`` drops the objects nothing names (objects younger
    than ``grace`` stay: a write in flight stores its blob first).

    Revisions never decrease: a ref is removed only after its floor is durable, and a
    floor goes only while its ref shows a higher revision. ``auto``: the daily pass that
    writes start (:meth:`Store.start_retention_if_due`): nothing when ``gitlease.autoPrune``
    is false or a pass is running; through a remote, only this host's mirror is trimmed
    (tombstones are the remote's) and no receipt is looked at. Without ``auto``, a remote
    store refuses (:meth:`Store.ensure_prunable`).
    """
    policy = retention.read_policy(store.git_dir)
    if older_than is None:
        tombstone_ms = policy.tombstone_ms
    elif older_than == retention.NEVER:
        tombstone_ms = None
    else:
        tombstone_ms = duration_ms(older_than, name="--older-than")
    result = Retention(policy)
    if auto and not policy.auto:
        result.skipped = "gitlease.autoPrune is false"
        _write_summary(store, result)
        return result
    try:
        store.ensure_prunable()
        own_refs = True
    except UsageError:
        if not auto:
            raise
        own_refs = False  # a remote's mirror: its refs and tombstones are the remote's
    with _one_pass(store, wait=0.0 if auto else 60.0) as running:
        if not running:
            result.skipped = "another retention pass is running"
            return result
        now = Now.read()
        claims = _retain(store, policy, tombstone_ms if own_refs else None, now, result)
        if own_refs and not auto:
            _tidy_receipts(store, claims, now, result)
        store.collect_garbage(grace)
        result.gc = True
        _write_summary(store, result)
    return result


def _retain(
    store: Store,
    policy: retention.Policy,
    tombstone_ms: int | None,
    now: Now,
    result: Retention,
) -> dict[str, Claim]:
    """Everything but receipts and gc; the claims as they are after it (ref -> claim)."""
    snaps = store.read_all()
    # Each record judged once (its signature checked: this pass decides, so it never trusts
    # the reads' cache); after tombstones went, a ref still at the same record keeps its
    # judgement. (Judging twice checked every signature twice: docs/performance.md, figure 10.)
    judged = {s.ref: judge(s, now) for s in snaps}
    with store.blob_reader() as read_blob:
        if tombstone_ms is not None:
            _remove_tombstones(store, snaps, judged, now, tombstone_ms, read_blob, result)
            if result.pruned:
                snaps = store.read_all()
        claims = {
            s.ref: c if (c := judged.get(s.ref)) is not None and c.oid == s.oid else judge(s, now)
            for s in snaps
        }
        for snap in snaps:
            _trim_history(store, snap, claims[snap.ref], policy, now, read_blob, result)
        _remove_orphan_reflogs(store, set(claims), read_blob, result)
    _tidy_floors(store, claims, result)
    _tidy_guards(store, set(claims), result)
    present = {s.ref: s.oid for s in snaps if s.oid is not None}
    result.removed["sightings"] = Sightings(layout.sightings(store.git_dir)).forget(present)
    result.removed["keepalive"] = keepers.forget_dead(store.git_dir)
    return claims


@contextmanager
def _one_pass(store: Store, *, wait: float) -> Iterator[bool]:
    """Hold the store's pass lock, one retention pass at a time; yields False if another
    pass keeps it (after ``wait`` seconds: 0 for the automatic pass, which just ends)."""
    path = layout.prune_lock(store.git_dir)
    fd = open_lock_file(path)
    try:
        if not flock_polling(fd, time.monotonic() + wait):
            if wait:
                raise StoreError(f"another retention pass kept {path} for {wait:.0f}s")
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _remove_tombstones(
    store: Store,
    snaps: list[Snapshot],
    judged: dict[str, Claim],
    now: Now,
    limit_ms: int,
    read_blob: BlobRead,
    result: Retention,
) -> None:
    """Remove tombstones released longer ago than ``limit_ms``, each after its floor is
    durable, then its reflog (its history goes with it; the floor keeps the revision)."""
    for snap in snaps:
        claim = judged[snap.ref]
        record = claim.record
        if claim.state != "released" or record is None or record.released_at is None:
            continue
        if now.wall_ms - parse_rfc3339(record.released_at) < limit_ms:
            continue
        try:
            with store.guard(snap.ref, wait=_GUARD_WAIT_SECONDS):
                if store.read(snap.ref).oid != snap.oid:
                    continue  # written meanwhile: no longer this tombstone
                if newest_written(store, snap.ref, snap.oid, read_blob)[0] > record.revision:
                    continue  # moved back (it may hide a live claim): verify --repair's to fix
                top = max(record.revision, max_revision_in_reflog(store, snap.ref, read_blob))
                top = max(top, highwater.read(store.git_dir, snap.ref))
                store.write_revision_floor(snap.ref, top)
                store.remove_compare_and_swap(snap.ref, snap.oid or "")
                store.delete_reflog(snap.ref)
                highwater.forget(store.git_dir, snap.ref)  # the floor holds it now
        except CompareAndSwapFailed:
            continue
        except GitleaseError:
            result.busy.append(claim.resource)
            continue
        result.pruned.append(claim.resource)


def _trim_history(
    store: Store,
    snap: Snapshot,
    claim: Claim,
    policy: retention.Policy,
    now: Now,
    read_blob: BlobRead,
    result: Retention,
) -> None:
    """Cut one resource's reflog to what the policy keeps (:func:`retention.first_kept`)."""
    if claim.state == "invalid" or snap.oid is None:
        return  # verify --repair takes its revision from this history: all of it stays
    now_s = now.wall_ms / 1000
    lines = parse_reflog(store.read_reflog(snap.ref))
    protected = frozenset({snap.oid})
    if retention.first_kept(lines, policy, now_s, protected) == 0:
        return  # the cheap look, without the guard: most resources have nothing to drop
    if claim.state == "active":
        protected = _claim_records(claim, snap.oid, read_blob)
    dropped = 0

    def change(data: bytes) -> bytes | None:
        nonlocal dropped
        current = parse_reflog(data)
        dropped = retention.first_kept(current, policy, now_s, protected)
        return retention.rewritten(current, dropped) if dropped else None

    try:
        with store.guard(snap.ref, wait=_GUARD_WAIT_SECONDS):
            if store.read(snap.ref).oid != snap.oid:
                result.busy.append(claim.resource)  # written meanwhile: judged next time
                return
            changed = store.rewrite_reflog(snap.ref, change)
    except GitleaseError:
        result.busy.append(claim.resource)
        return
    if changed:
        result.trimmed += 1
        result.expired += dropped


def _claim_records(claim: Claim, oid: str, read_blob: BlobRead) -> frozenset[str]:
    """The object ids of an active claim's records, from the current one back to its
    acquire: none of them may expire while the claim lives."""
    found = {oid}
    record = claim.record
    while record is not None and record.previous is not None and record.previous not in found:
        data, _problem = read_blob(record.previous)
        if data is None:
            break
        try:
            prev = parse(data)
        except GitleaseError:
            break
        if prev.claim_id != record.claim_id:
            break  # the record before the acquire: another claim's
        found.add(record.previous)
        record = prev
    return frozenset(found)


def _remove_orphan_reflogs(
    store: Store, refs: set[str], read_blob: BlobRead, result: Retention
) -> None:
    """Reflogs of refs that no longer exist (libgit2 leaves them when it deletes a ref, and
    an acquire that lost its race leaves an empty one): removed once a floor holds the
    highest revision they name, so that the next acquire still continues above it."""
    for ref in store.reflog_refs():
        if ref in refs:
            continue
        try:
            with store.guard(ref, wait=_GUARD_WAIT_SECONDS):
                if store.read(ref).oid is not None:
                    continue  # it exists (again), or cannot be read: not an orphan
                top = max_revision_in_reflog(store, ref, read_blob)
                top = max(top, highwater.read(store.git_dir, ref))
                if top > store.revision_floor(ref):
                    store.write_revision_floor(ref, top)
                store.delete_reflog(ref)
                highwater.forget(store.git_dir, ref)  # the floor holds it now
        except GitleaseError:
            result.busy.append(ref)
            continue
        result.removed["reflogs"] += 1


def _tidy_floors(store: Store, claims: dict[str, Claim], result: Retention) -> None:
    """Drop the floors whose ref exists again with a higher revision (its record carries
    the revision now), and fold the others into ``floors/packed`` (:mod:`gitlease.state.floors`)."""
    by_name = {floors.digest(ref): claim for ref, claim in claims.items()}

    def carried(name: str, revision: int) -> bool:
        claim = by_name.get(name)
        return claim is not None and claim.record is not None and claim.record.revision > revision

    loose = floors.loose(store.git_dir)
    packed = floors.read_packed(store.git_dir)
    keep = {name: rev for name, rev in packed.items() if not carried(name, rev)}
    dropped = len(packed) - len(keep)
    for name, revision in loose.items():
        if carried(name, revision):
            dropped += 1
        else:
            keep[name] = max(revision, keep.get(name, 0))
    try:
        if keep != packed:
            floors.write_packed(store.git_dir, keep)  # durable before any loose file goes
        for name in loose:
            floors.remove_loose(store.git_dir, name)
    except OSError as exc:
        raise StoreError(f"cannot pack the revision floors: {exc.strerror or exc}") from None
    result.removed["floors"] += dropped
    result.floors = len(keep)


def _tidy_guards(store: Store, refs: set[str], result: Retention) -> None:
    """Remove the guard files of resources without a ref that nobody holds (a running
    ``exec``, an acquire in flight): a guard is only a file to lock, made again on use."""
    wanted = {store.guard_path(ref).name for ref in refs}
    directory = guards.directory(store.git_dir)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name in wanted or len(name) != 40 or name.startswith("."):
            continue
        if guards.remove_unheld(directory / name):
            result.removed["guards"] += 1


def _tidy_receipts(store: Store, claims: dict[str, Claim], now: Now, result: Retention) -> None:
    """This worktree's receipts that can prove nothing: released more than a day ago, or
    naming no current claim (the rules of acquire and of ``verify --repair``)."""
    removed = receiptdir.sweep(receipt_dir(store), limit=1 << 30, every_hour=True)
    removed += sum(p.repaired for p in orphan_receipts(store, claims, now, repair=True, spent=True))
    result.removed["receipts"] += removed


def _write_summary(store: Store, result: Retention) -> None:
    """``<store>/worklease/last-prune``: what the last pass did; its time restarts the day
    after which writes start the next one. Best effort."""
    doc = {"finished_at": rfc3339(Now.read().wall_ms), **result.to_dict()}
    with suppress(OSError):
        atomic_write(
            layout.last_prune(store.git_dir),
            (json.dumps(doc, indent=2) + "\n").encode("utf-8"),
            durable=False,
            mode=0o644,
        )
