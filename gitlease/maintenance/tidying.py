"""The retention pass's tidying: files beside the refs that serve nothing any more.

Floors that a ref carries again, guards of resources without a ref that nobody holds,
and this worktree's spent and orphaned receipts. Each kind is removed by the rule that
makes it safe: a floor only while its ref shows a higher revision (revisions never
decrease), a guard only while nobody holds it (whoever opened it just before locks a new
one, :func:`gitlease.state.guards.remove_unheld`), a receipt only when it can prove
nothing, judged again under its resources' guards (:mod:`.leftovers`).
"""

from __future__ import annotations

import os

from ..claims.ownership import receipt_dir
from ..errors import StoreError
from ..gitio import layout
from ..receipts import directory as receiptdir
from ..state import floors, guards
from ..store.base import Store
from .judging import Judged
from .leftovers import orphan_receipts


def tidy_floors(store: Store, judged: Judged) -> tuple[int, int]:
    """Drop the floors whose ref exists again with a higher revision (its record carries
    the revision now), and fold the others into ``floors/packed`` (:mod:`gitlease.state.floors`).
    (floors dropped, floors kept). A ref's record is judged only if its text shows a
    revision above its floor: only a verified record may carry a revision."""
    loose = floors.loose(store.git_dir)
    packed = floors.read_packed(store.git_dir)
    if not loose and not packed:
        return 0, 0
    by_name = {floors.digest(ref): ref for ref in judged.refs()}

    def carried(name: str, revision: int) -> bool:
        ref = by_name.get(name)
        if ref is None:
            return False
        seen = judged.unverified(ref)
        if seen is None or seen.revision <= revision:
            return False
        record = judged.claim(ref).record
        return record is not None and record.revision > revision

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
    return dropped, len(keep)


def tidy_guards(store: Store, refs: set[str]) -> int:
    """Remove the guard files of resources without a ref that nobody holds (a running
    ``exec``, an acquire in flight): a guard is only a file to lock, made again on use.
    How many went."""
    directory = guards.directory(store.git_dir)
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    if not names:
        return 0
    wanted = {layout.ref_digest(ref) for ref in refs}  # (a guard is named by its ref's digest)
    removed = 0
    for name in names:
        if name in wanted or len(name) != 40 or name.startswith("."):
            continue
        if guards.remove_unheld(directory / name):
            removed += 1
    return removed


def tidy_receipts(store: Store, judged: Judged) -> int:
    """This worktree's receipts that can prove nothing: released more than a day ago, or
    naming no current claim (the rules of acquire and of ``verify --repair``). How many."""
    removed = receiptdir.sweep(receipt_dir(store), limit=1 << 30, every_hour=True)
    orphans = orphan_receipts(store, judged.claim_id, repair=True, spent=True)
    return removed + sum(p.repaired for p in orphans)
