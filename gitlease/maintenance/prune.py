"""The retention pass (``gitlease prune``, and the daily automatic pass): keeping a store
small without ever adopting.

It applies the policy of :mod:`gitlease.maintenance.retention`, one step a module: it
removes old tombstones, leaving revision floors (:mod:`.tombstones`), trims each
resource's reflog to the history the policy keeps (:mod:`.trimming`), removes the files
that serve nothing any more (:mod:`.tidying`), and runs ``git gc`` on the store so that
git drops what nothing names. This module runs the steps in order, one pass at a time,
and says what the pass did.

The pass decides, so each record it acts on is judged, its signature checked, once a pass
and only when a decision needs it (:mod:`.judging`); the records a reflog names are read
once, in one stream (:mod:`.history`). What a pass costs follows what it does, not the
size of the store (docs/performance.md, ``prune``).
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
from ..errors import StoreError, UsageError
from ..gitio import layout
from ..model.clock import Now, rfc3339
from ..model.durations import duration_ms
from ..model.sightings import Sightings
from ..state import keepers
from ..store.base import Store
from ..store.reflogs import GC_GRACE
from . import retention
from .history import reading
from .judging import Judged
from .tidying import tidy_floors, tidy_guards, tidy_receipts
from .tombstones import remove_orphan_reflogs, remove_tombstones
from .trimming import trim_histories


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
        judged = _retain(store, policy, tombstone_ms if own_refs else None, now, result)
        if own_refs and not auto:
            result.removed["receipts"] += tidy_receipts(store, judged)
        store.collect_garbage_trimmed(grace)
        result.gc = True
        _write_summary(store, result)
    return result


def _retain(
    store: Store,
    policy: retention.Policy,
    tombstone_ms: int | None,
    now: Now,
    result: Retention,
) -> Judged:
    """Everything but receipts and gc; the refs as they are after it, judged on demand."""
    judged = Judged(store.read_all(), now)
    with reading(store) as records:
        if tombstone_ms is not None:
            remove_tombstones(store, judged, tombstone_ms, records, result.pruned, result.busy)
            if result.pruned:
                judged.reread(store.read_all())  # a ref still at its record keeps its judgement
        trimmed = trim_histories(store, judged, policy, records)
        result.trimmed, result.expired = trimmed.resources, trimmed.records
        result.busy.extend(trimmed.busy)
        refs = judged.refs()
        result.removed["reflogs"] += remove_orphan_reflogs(store, refs, records, result.busy)
    dropped, result.floors = tidy_floors(store, judged)
    result.removed["floors"] += dropped
    result.removed["guards"] += tidy_guards(store, refs)
    present = {s.ref: s.oid for s in judged.snapshots if s.oid is not None}
    result.removed["sightings"] = Sightings(layout.sightings(store.git_dir)).forget(present)
    result.removed["keepalive"] = keepers.forget_dead(store.git_dir)
    return judged


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
