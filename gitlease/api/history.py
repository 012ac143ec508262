"""A resource's kept history: ``log``, and the records the board's timelines follow.

History is read otherwise than the current claims (:mod:`gitlease.api.reads`): backwards
along each record's ``previous`` id through one ``git cat-file --batch`` (the cost follows
what is shown, however long the store has lived), with the high-water marks and the reflog
consulted for a ref moved back. Like every read it takes no
guard and writes nothing but the verified-records cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._util.value import Value
from ..errors import CorruptRecordError, GitleaseError
from ..gitio.gitread import Snapshot
from ..model.claim import Claim, judge
from ..model.claim import verified as verified_record
from ..model.clock import Now
from ..model.record import Record, parse
from ..model.refname import encode
from ..state import highwater
from ..state import verified_records as verified
from ..store.base import Store


class History(Value):
    """A resource's kept history (``log``): its records oldest first, and where they start."""

    __slots__ = ("resource", "records", "earlier_expired", "kept_from_revision")
    resource: str
    records: list[Claim]
    #: Whether older records existed and are no longer in the store (expired by the retention
    #: policy; through a remote, also never fetched by this host).
    earlier_expired: bool
    #: The revision of the oldest record shown (None: no record, or it does not verify).
    kept_from_revision: int | None

    def start_text(self) -> str | None:
        """Where the history starts, for people (None when it is complete)."""
        if not self.earlier_expired:
            return None
        if self.kept_from_revision is None and not self.records:
            return "no records kept: earlier records expired by retention"
        if self.kept_from_revision is None:
            return "history kept from an unreadable record; earlier records expired by retention"
        return (
            f"history kept from revision {self.kept_from_revision}; "
            "earlier records expired by retention"
        )

    def to_dict(self) -> dict[str, Any]:
        """``log --json`` (docs/reference/json.md)."""
        return {
            "resource": self.resource,
            "records": [c.to_dict() for c in self.records],
            "earlier_expired": self.earlier_expired,
            "kept_from_revision": self.kept_from_revision,
        }


def log(store: Store, resource: str) -> list[Claim]:
    """Every kept transition, oldest first, following the records' own chain (not the reflog)."""
    return history(store, resource).records


def history(store: Store, resource: str) -> History:
    """The kept history of ``resource``, read through one ``git cat-file --batch`` process
    fed each record's predecessor in turn: the cost follows what is printed, however long
    the store has lived (docs/performance.md).

    A ref moved back to an older record (:mod:`gitlease.state.highwater`) would hide what came
    after it, a live claim included: then the history is the chain of the newest record
    this host wrote or saw (found in the reflog), followed by the record the ref shows now,
    marked with the ``problem``.
    """
    ref = encode(resource)
    store.refresh()
    now = Now.read()
    snap = store.read(ref)
    start = store.history_start(ref) if snap.oid is not None else None
    flagged: Claim | None = None
    with store.blob_reader() as read_blob:
        chain, earlier = _walk(snap, resource, now, start, read_blob)
        shown = chain[0].record if chain else None
        revision, newest = newest_written(store, ref, snap.oid, read_blob)
        if (
            shown is not None
            and newest is not None
            and shown.revision < revision
            and store.read(ref).oid == snap.oid  # (not a write that landed just now)
        ):
            flagged = chain[0].replace(problem=moved_back(shown.revision, revision))
            chain, earlier = _walk(newest, resource, now, start, read_blob)
    if not chain:
        earlier = store.revision_floor(ref) > 0
    chain.reverse()
    records = [
        _historic(c, chain[i + 1] if i + 1 < len(chain) else None) for i, c in enumerate(chain)
    ]
    if flagged is not None:
        records.append(flagged)
    first = records[0].record if records else None
    return History(resource, records, earlier, first.revision if first else None)


def _walk(
    snap: Snapshot, resource: str, now: Now, start: str | None, read_blob: BlobRead
) -> tuple[list[Claim], bool]:
    """The records from ``snap`` back along their ``previous`` ids, newest first, and
    whether older ones existed that are no longer kept."""
    ref = snap.ref
    chain: list[Claim] = []
    seen: set[str] = set()
    earlier = False
    while snap.oid is not None and snap.oid not in seen:
        seen.add(snap.oid)
        claim = judge(snap, now, resource)
        chain.append(claim)
        record = claim.record
        if record is None:
            break  # a record that does not verify names no trustworthy predecessor
        if record.previous is None:
            earlier = record.revision > 1  # a first record after prune: a floor's successor
            break
        if snap.oid == start:
            earlier = True  # the retention pass cut the history here
            break
        data, problem = read_blob(record.previous)
        if data is None:
            earlier = True  # expired by retention (or collected): the kept part ends here
            break
        snap = Snapshot(ref, record.previous, data, problem)
    return chain, earlier


def moved_back(shown: int, revision: int) -> str:
    """Why a ref's record is below its high-water mark, in words."""
    return (
        f"the ref was moved back to this record (revision {shown}): revision {revision} was "
        "written after it. Run `gitlease verify`"
    )


#: Reads one blob: (bytes, None) or (None, why not) (:meth:`Store.blob_reader`).
BlobRead = Callable[[str], tuple[bytes | None, str | None]]


def newest_written(
    store: Store, ref: str, current: str | None, read_blob: BlobRead
) -> tuple[int, Snapshot | None]:
    """The highest revision this host wrote or saw for ``ref`` (its high-water mark, or a
    reflog line that landed), and the newest record that carries it (None when only the
    mark knows it). The mark is read first: a write landing meanwhile can only raise what
    the reflog shows."""
    mark = max(highwater.read(store.git_dir, ref), store.revision_floor(ref))  # (see prune)
    best, newest = 0, None
    for oid in store.reflog_landed(ref, current):  # oldest first: the last of the highest wins
        data, _problem = read_blob(oid)
        if data is None:
            continue  # expired by retention
        try:
            revision = parse(data).revision
        except GitleaseError:
            continue
        if revision >= best:
            best, newest = revision, Snapshot(ref, oid, data)
    return (mark, None) if mark > best else (best, newest)


def _historic(claim: Claim, successor: Claim | None) -> Claim:
    """A past record's state as it was: active until its own claim's next record, else expired."""
    if successor is None or claim.record is None or claim.state in ("released", "invalid"):
        return claim
    same = successor.record is not None and successor.record.claim_id == claim.record.claim_id
    return claim.replace(state="active" if same else "expired", expires_in_ms=None)


def read_records(store: Store, wanted: Mapping[str, tuple[str, str]]) -> dict[str, Record | None]:
    """The records with the object ids of ``wanted`` (id -> the resource each must name and
    the ref whose history it is), read as :meth:`~gitlease.store.base.Store.read_blobs`
    reads them (loose ones from their files, the rest in one ``git cat-file --batch``) and
    verified as the reads verify (a signature is checked once: the verified-records
    cache): each a record, or None when it is missing or does not verify. For history (the
    board's timelines): no clock is read, nothing is timed."""
    if not wanted:
        return {}
    blobs = store.read_blobs(list(wanted))
    known = verified.load(store.git_dir)
    out: dict[str, Record | None] = {}
    checked: list[str] = []
    for oid, (resource, ref) in wanted.items():
        data, problem = blobs.get(oid, (None, "missing"))
        try:
            record = verified_record(Snapshot(ref, oid, data, problem), resource, known)
        except CorruptRecordError:
            out[oid] = None
            continue
        out[oid] = record
        if oid not in known:
            checked.append(oid)
    if checked:
        verified.save(store.git_dir, checked, known)
    return out
