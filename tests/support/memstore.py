"""A store kept in memory, for unit tests of the claims engine (tests/claims/test_engine_memory.py).

It derives from the abstract store (:class:`gitlease.store.base.Store`) and keeps its
contract: :meth:`MemoryStore.compare_and_swap_many` takes one lock, reads every ref again
under it, compares each with the object id the caller expected, and sets all or none.
Refs and objects live in dicts (object ids are git's, so records read back as from git);
what a host keeps beside the refs (guards, floors) lives in ``location.git_dir``, a
folder the test gives, as for every store. mypy checks it against the base
(``[tool.mypy] files`` in pyproject.toml), so a method the contract gains must be added here.

Besides the contract, a test can move a ref behind the engine's back (:meth:`put`), make
the next write fail (:attr:`fail_next`), and see what the writes asked for
(:attr:`writes`, :attr:`durable_writes`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gitlease.errors import CompareAndSwapFailed, StoreError
from gitlease.gitio.gitread import Snapshot
from gitlease.model.record import blob_oid
from gitlease.model.refname import PREFIX, SCOPES_INDEX_REF
from gitlease.store.base import Location, Store, Update, still_as_seen


class MemoryStore(Store):
    """Refs and blobs in memory, with the compare-and-swap contract of every store."""

    def __init__(self, location: Location) -> None:
        super().__init__(location)
        self.refs: dict[str, str] = {}
        self.objects: dict[str, bytes] = {}
        #: Every object id each ref has held, oldest first (its "reflog").
        self.history: dict[str, list[str]] = {}
        #: The updates each landed write carried, in order.
        self.writes: list[list[Update]] = []
        #: How many landed writes were made inside :meth:`durable`.
        self.durable_writes = 0
        #: Raised (once) by the next :meth:`compare_and_swap_many`, before anything lands.
        self.fail_next: BaseException | None = None
        #: Whether a failed write's outcome can be read back (:meth:`outcome_readable`).
        self.readable = True
        self._lock = threading.Lock()
        self._durable = 0

    # ----------------------------------------------------------------- test handles

    def put(self, ref: str, data: bytes) -> str:
        """Point ``ref`` at ``data`` as another writer would (no guard, no compare)."""
        oid = self.write_blob(data)
        with self._lock:
            self._set(ref, oid)
        return oid

    def _set(self, ref: str, oid: str) -> None:
        self.refs[ref] = oid
        self.history.setdefault(ref, []).append(oid)

    # ----------------------------------------------------------------- reads

    def read(self, ref: str) -> Snapshot:
        oid = self.refs.get(ref)
        if oid is None:
            return Snapshot(ref, None, None)
        data, problem = self.read_blob(oid)
        return Snapshot(ref, oid, data, problem)

    def read_all(self, prefix: str = PREFIX) -> list[Snapshot]:
        names = sorted(r for r in self.refs if r.startswith(prefix) and r != SCOPES_INDEX_REF)
        return [self.read(ref) for ref in names]

    def read_blob(self, oid: str) -> tuple[bytes | None, str | None]:
        data = self.objects.get(oid)
        if data is None:
            return None, f"object {oid} is missing"
        return data, None

    # ----------------------------------------------------------------- writes

    def write_blob(self, data: bytes) -> str:
        oid = blob_oid(data)
        self.objects[oid] = data
        return oid

    def compare_and_swap_many(self, updates: list[Update], message: str) -> list[str]:
        failure, self.fail_next = self.fail_next, None
        if failure is not None:
            raise failure
        new_oids = [self.write_blob(data) for _, _, data in updates]
        with self._lock:  # (the refs' locks: read again under them, then compared)
            for ref, expected, _ in updates:
                still_as_seen(self.read(ref), expected)
            for (ref, _, _), oid in zip(updates, new_oids, strict=True):
                self._set(ref, oid)
            self.writes.append(list(updates))
            self.durable_writes += self._durable > 0
        return new_oids

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        with self._lock:
            if self.refs.get(ref) != expected_oid:
                raise CompareAndSwapFailed(f"{ref} changed while it was being pruned")
            del self.refs[ref]

    @contextmanager
    def durable(self) -> Iterator[None]:
        self._durable += 1
        try:
            yield
        finally:
            self._durable -= 1

    def outcome_readable(self, error: BaseException) -> bool:
        return self.readable

    # ----------------------------------------------------------------- history

    def reflog_refs(self) -> list[str]:
        return sorted(r for r in self.history if r.startswith(PREFIX))

    def read_reflog(self, ref: str) -> bytes:
        return b""  # (no reflog file: :meth:`reflog_landed` answers from :attr:`history`)

    def reflog_landed(self, ref: str, current: str | None) -> list[str]:
        return list(self.history.get(ref, []))

    def history_start(self, ref: str) -> str | None:
        return None

    def rewrite_reflog(self, ref: str, change: Callable[[bytes], bytes | None]) -> bool:
        return False

    def delete_reflog(self, ref: str) -> None:
        self.history.pop(ref, None)

    def collect_garbage_trimmed(self, grace: str | None = None) -> None:
        kept = set(self.refs.values()) | {o for h in self.history.values() for o in h}
        self.objects = {oid: data for oid, data in self.objects.items() if oid in kept}

    def start_retention_if_due(self) -> None:
        """Never: a memory store has no background pass."""

    def raise_store_error(self, why: str) -> None:
        """Make the next write fail as a store that cannot be written (STORE)."""
        self.fail_next = StoreError(why)
