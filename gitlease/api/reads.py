"""Reading claims without owning them: show, list, free, log.

Reads never take a guard and never write, except that a remote store fetches
first (:meth:`~gitlease.store.base.Store.refresh`), and that they remember the
records whose signature they verified (:mod:`gitlease.state.verified_records`), so the next
read checks only what changed. A record that does not verify is shown as
``invalid``: ``show`` exits STORE on it, ``list`` carries on, ``free`` never
offers it (docs/reference/exit-codes.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .._util.value import Value, gc_paused
from ..claims.ownership import mark_bound
from ..errors import CorruptRecordError, GitleaseError
from ..gitio.gitread import Snapshot
from ..model.bootclock import stamp_foreign
from ..model.claim import Claim, corrupt_error, judge, timed_many, verdict
from ..model.claim import verified as verified_record
from ..model.clock import Now
from ..model.record import Record, parse
from ..model.refname import encode, validate_resource
from ..state import guards, highwater, keepers
from ..state import verified_records as verified
from ..state.waitqueue import waiting_for
from ..store.base import Store


def show(store: Store, resource: str) -> Claim:
    """The record of one resource, non-secret; STORE if it does not verify."""
    ref = encode(resource)
    store.refresh()
    snap = store.read(ref)
    known = (snap.oid,) if snap.oid and verified.contains(store.git_dir, snap.oid) else ()
    claim = judge(snap, Now.read(), resource, known=known)
    if claim.record is not None and not known and claim.oid:
        verified.save(store.git_dir, [claim.oid], verified.load(store.git_dir))
    claim = mark_kept(store, mark_bound(store, [claim]))[0]
    if claim.state == "invalid":
        raise corrupt_error(claim)
    return claim


def list_claims(
    store: Store, *, state: str | None = None, prefix: str | None = None, refresh: bool = True
) -> list[Claim]:
    """Every claim in the store (invalid ones included and marked), in one pass over the refs.

    ``refresh=False``: read what the store holds now (a remote store's mirror, which the
    caller refreshes on its own schedule: the board fetches at most every few seconds)."""
    claims = [
        c
        for batch in iter_claims(store, state=state, prefix=prefix, refresh=refresh)
        for c in batch
    ]
    claims.sort(key=_by_resource)
    return claims


def _by_resource(claim: Claim) -> str:
    return claim.resource


def iter_claims(
    store: Store,
    *,
    state: str | None = None,
    prefix: str | None = None,
    refresh: bool = True,
    batch: int = 1000,
) -> Iterator[list[Claim]]:
    """The claims of :func:`list_claims`, a batch at a time, in the order the store lists
    its refs (by ref name, which is not quite the order of the resources): ``list --json``
    of 100,000 claims holds one batch of records at a time (docs/performance.md, 5b).

    Each batch is judged on a clock read after it was read. The records verified here are
    noted in the verified-records cache once the last batch is out (a reader that stops
    early notes nothing)."""
    if refresh:
        store.refresh()
    git_dir = store.git_dir
    known = verified.load(git_dir)
    seen: list[str] = []  # the ids of every good record read, a batch's to a string
    fresh = False
    kept: dict[tuple[str, str], Any] | None = None
    for snaps in store.iter_all(batch=batch, stamped=False):
        now = Now.read()
        with gc_paused():
            found = [(s, verdict(s, None, known)) for s in snaps]
            claims = timed_many(found, now, _sighting(git_dir, now))
        good = [c.oid for c in claims if c.record is not None and c.oid]
        if good:
            seen.append("\n".join(good))
            fresh = fresh or any(oid not in known for oid in good)
        if prefix:
            claims = [c for c in claims if c.resource.startswith(prefix)]
        if state:
            claims = [c for c in claims if c.state == state]
        if not claims:
            continue
        if kept is None:
            kept = keepers.by_claim(git_dir)
        yield _kept(mark_bound(store, claims), kept)
    if fresh:
        verified.save(git_dir, (oid for chunk in seen for oid in chunk.split("\n")), known)


class Listing:
    """:func:`list_claims` of one store, kept from one look to the next (the board's).

    Each look lists the refs' object ids (one ``git for-each-ref``) and reads, parses and
    verifies only the records whose id changed since the last look
    (:meth:`~gitlease.store.base.Store.read_all_since`; a remote's mirror is read whole,
    and only new records are parsed). Every claim is timed afresh at every look, against
    the clock of that look: a kept active claim whose time ran out shows ``expired``
    without any write. What a look returns is what :func:`list_claims` returns for the
    same refs: a ref gone is gone, a new record is verified as ``list`` verifies it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: By ref: the snapshot last read and what it was judged to hold: its verified
        #: record, or the claim it makes whatever the time (invalid).
        self._kept: dict[str, tuple[Snapshot, Record | Claim]] = {}
        #: How many records the last look read from the store (for tests: what changed).
        self.records_read = 0

    def claims(self, *, refresh: bool = False) -> list[Claim]:
        """Every claim now, as :func:`list_claims` (``refresh``: fetch a remote first)."""
        store = self.store
        if refresh:
            store.refresh()
        before = self._kept
        seen = {ref: kept[0] for ref, kept in before.items()}
        snaps = store.read_all_since(seen, stamped=False)
        now = Now.read()
        known: frozenset[str] | None = None
        fresh = False
        found: list[tuple[Snapshot, Record | Claim]] = []
        read = 0
        with gc_paused():
            for snap in snaps:
                prior = before.get(snap.ref)
                if prior is None or prior[0].data is not snap.data:
                    read += 1
                if (
                    prior is not None
                    and prior[0].oid == snap.oid
                    and prior[0].data == snap.data
                    and prior[0].problem == snap.problem
                ):
                    found.append((snap, prior[1]))
                    continue
                if known is None:
                    known = verified.load(store.git_dir)
                got = verdict(snap, None, known)
                fresh = fresh or (isinstance(got, Record) and snap.oid not in known)
                found.append((snap, got))
            claims = timed_many(found, now, _sighting(store.git_dir, now))
        self._kept = {snap.ref: (snap, got) for snap, got in found}
        self.records_read = read
        if fresh and known is not None:
            good = [c.oid for c in claims if c.record is not None and c.oid]
            verified.save(store.git_dir, good, known)
        claims.sort(key=_by_resource)
        return mark_kept(store, mark_bound(store, claims))


def _sighting(git_dir: Path, now: Now) -> Callable[[list[Snapshot]], list[Snapshot]]:
    """First sightings from the store's own file, as the store stamps what it reads."""
    return lambda snaps: stamp_foreign(git_dir, snaps, now)


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


def list_document(
    store: Store, *, state: str | None = None, prefix: str | None = None, refresh: bool = True
) -> dict[str, Any]:
    """The ``list --json`` document (docs/reference/json.md): one source for the command and
    the board's ``/api/claims``."""
    return claims_document(list_claims(store, state=state, prefix=prefix, refresh=refresh))


def claims_document(claims: list[Claim]) -> dict[str, Any]:
    """The ``list --json`` document of claims :func:`list_claims` found."""
    with gc_paused():
        return {"claims": [c.to_dict() for c in claims]}


def free(store: Store, resources: Iterable[str]) -> list[Claim]:
    """Of the given resources, those that could be acquired now: never an invalid one, nor
    one that callers on this host wait for (they get it first, docs/concepts.md), nor one
    whose guard another process holds (a running ``exec`` or ``replace-file``, which
    ``acquire`` would wait for and then answer HELD), nor one whose ref was moved back."""
    wanted = [validate_resource(r) for r in resources]
    if wanted:
        store.refresh()
    by_ref = {s.ref: s for s in store.read_all()} if wanted else {}
    asked: dict[str, Snapshot] = {}
    names: dict[str, str] = {}
    for resource in wanted:
        ref = encode(resource)
        if ref not in asked:
            asked[ref] = by_ref.get(ref, Snapshot(ref, None, None))
            names[ref] = resource
    claims = _judged(store, list(asked.values()), names)
    out = [
        c
        for c in claims
        if c.state in ("free", "released", "expired")
        and not guards.busy(store.guard_path(c.ref))
        and not _moved_back(store, c)
    ]
    waiting = waiting_for(store.git_dir, [c.ref for c in out]) if out else {}
    return mark_bound(store, [c for c in out if not waiting.get(c.ref)])


def _moved_back(store: Store, claim: Claim) -> bool:
    """Whether the ref shows a record below its high-water mark: acquire refuses it (STORE)."""
    if claim.record is None:
        return False
    mark = max(highwater.read(store.git_dir, claim.ref), store.revision_floor(claim.ref))
    return claim.record.revision < mark


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


def _judged(
    store: Store, snaps: list[Snapshot], names: dict[str, str] | None = None
) -> list[Claim]:
    """Judge every snapshot, checking only the signatures not verified before (then noted
    for the next read, in one write)."""
    now = Now.read()
    known = verified.load(store.git_dir)
    with gc_paused():
        claims = [judge(s, now, names.get(s.ref) if names else None, known=known) for s in snaps]
    good = [c.oid for c in claims if c.record is not None and c.oid]
    if any(oid not in known for oid in good):
        verified.save(store.git_dir, good, known)
    return claims


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


def mark_kept(store: Store, claims: list[Claim]) -> list[Claim]:
    """The claims, with ``keepalive`` set on those a live keepalive process on this host
    renews (docs/concepts.md); a process that died is never reported."""
    return _kept(claims, keepers.by_claim(store.git_dir))


def _kept(claims: list[Claim], kept: dict[tuple[str, str], Any]) -> list[Claim]:
    if not kept:
        return claims
    return [
        c.replace(keepalive=kept.get((c.ref, c.record.claim_id))) if c.record else c for c in claims
    ]


def iter_resources(lines: Iterable[str]) -> Iterator[str]:
    """Resources from text lines (``-`` on the command line): blank lines skipped."""
    for line in lines:
        line = line.rstrip("\r\n")
        if line.strip():
            yield line
