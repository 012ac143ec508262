"""Reading claims without owning them: show, list and free (a resource's history, ``log``,
is read in :mod:`gitlease.api.history`).

Reads never take a guard and never write, except that a remote store fetches
first (:meth:`~gitlease.store.base.Store.refresh`), and that they remember the
records whose signature they verified (:mod:`gitlease.state.verified_records`), so the next
read checks only what changed. A record that does not verify is shown as
``invalid``: ``show`` exits STORE on it, ``list`` carries on, ``free`` never
offers it (docs/reference/exit-codes.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .._util.value import gc_paused
from ..claims.ownership import mark_bound
from ..gitio.gitread import Snapshot
from ..model.bootclock import stamp_foreign
from ..model.claim import Claim, corrupt_error, judge, timed_many, verdict
from ..model.clock import Now
from ..model.record import Record
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
    names: dict[str, str] = {}
    for resource in wanted:
        names.setdefault(encode(resource), resource)
    # (a few names: each read from its files; many: two git calls, whatever their number)
    claims = _judged(store, store.read_many(list(names)), names)
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
