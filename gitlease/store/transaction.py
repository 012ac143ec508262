"""The local store's writer: the repository opened with pygit2, and every ref change made
through one libgit2 reference transaction.

Only writes (and the reads a write decides from) come here, so that a read that only
looks never imports pygit2, which costs more than the whole read (docs/performance.md).
:meth:`Writer.compare_and_swap_many` is the local form of the contract of
:meth:`gitlease.store.base.Store.compare_and_swap_many`: lock the refs in order, re-read
them while holding the locks, compare with what the caller observed, set, commit. A
``<ref>.lock`` met while the caller holds the guard is waited out or, once stale, removed
(:meth:`~gitlease.store.base.Store.clear_stale_lock`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._util import sharing as perms
from ..errors import CompareAndSwapFailed, StoreError
from ..gitio.gitread import SYMBOLIC, UNREADABLE_OID, Snapshot, packed_refs_problem, unreadable_ref
from ..model.refname import SCOPES_INDEX_REF
from . import reflogs
from .base import still_as_seen

#: How many blobs a store keeps read (a claim record is under 1 KiB).
_BLOB_CACHE = 256


class Writer:
    """The pygit2 side of one local store (made on the first write or write-bound read)."""

    def __init__(self, git_dir: Path, clear_stale_lock: Callable[[str], None]) -> None:
        import pygit2

        self.git_dir = git_dir
        self._clear_stale_lock = clear_stale_lock
        try:
            self.repo: Any = pygit2.Repository(str(git_dir))
        except pygit2.GitError as exc:
            raise StoreError(f"cannot open the store {git_dir}: {exc}") from None
        #: Blobs read through pygit2, by object id: an object's bytes never change, so one
        #: operation's three reads of the record at a ref (early look, under the guard,
        #: under the ref lock) cost one object read (docs/performance.md, figure 1). The
        #: ref itself is read afresh every time: only it can change.
        self._blobs: dict[str, bytes] = {}
        self._durable = 0  # inside :meth:`durable`
        self._durable_repo: Any = None

    # ----------------------------------------------------------------- reads

    def read(self, ref: str) -> Snapshot:
        """The ref as libgit2 reads it, with its blob (a damaged or symbolic ref named)."""
        import pygit2

        try:
            reference = self.repo.references.get(ref)
        except (pygit2.GitError, ValueError) as exc:
            return Snapshot(ref, UNREADABLE_OID, None, f"the ref file is corrupt ({exc})")
        except OSError as exc:  # (libgit2 could not open it: a folder this user cannot enter)
            why = f"the ref cannot be read by this user ({exc.strerror or exc})"
            return Snapshot(ref, UNREADABLE_OID, None, why)
        if reference is None:
            problem = unreadable_ref(self.git_dir, ref) or packed_refs_problem(self.git_dir, ref)
            if problem:  # libgit2 skips lines it cannot parse: "absent" may be a lie
                return Snapshot(ref, UNREADABLE_OID, None, problem)
            return Snapshot(ref, None, None)
        if reference.type != pygit2.enums.ReferenceType.DIRECT:
            return Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC)
        oid = str(reference.target)
        data, problem = self.read_blob(oid)
        return Snapshot(ref, oid, data, problem)

    def read_blob(self, oid: str) -> tuple[bytes | None, str | None]:
        """(bytes, None) for a blob, or (None, why not)."""
        known = self._blobs.get(oid)
        if known is not None:
            return known, None
        import pygit2

        try:
            obj = self.repo[oid]
        except (KeyError, ValueError, pygit2.GitError):
            return None, f"object {oid} is missing"
        if obj.type != pygit2.enums.ObjectType.BLOB:
            return None, f"object {oid} is a {obj.type_str}, not a blob"
        data: bytes = obj.data
        self._keep(oid, data)
        return data, None

    def _keep(self, oid: str, data: bytes) -> None:
        if len(self._blobs) >= _BLOB_CACHE:
            self._blobs.clear()
        self._blobs[oid] = data

    # ---------------------------------------------------------------- durability

    @contextmanager
    def durable(self) -> Iterator[None]:
        """See :meth:`gitlease.store.local.LocalStore.durable`."""
        self._durable += 1
        try:
            yield
        finally:
            self._durable -= 1
            if self._durable == 0:
                self._sync_writes()  # off again: a ref database made later must not sync

    def _sync_writes(self) -> None:
        """Set libgit2's fsync switch for the write about to happen. The switch is one for the
        whole process: the object database reads it at each write, the ref database once,
        when a repository first touches its refs (hence :meth:`_writer`)."""
        import pygit2

        pygit2.settings.enable_fsync_gitdir(self._durable > 0)

    def _writer(self) -> Any:
        """The repository that writes: inside :meth:`durable`, a second handle whose ref
        database was made with libgit2's fsync switch on (so its refs and reflog lines are
        synced); else the one the reads use."""
        if self._durable <= 0:
            return self.repo
        if self._durable_repo is None:
            import pygit2

            self._sync_writes()
            try:
                repo = pygit2.Repository(str(self.git_dir))
                repo.references.get("HEAD")  # its ref database, made now: with the switch on
            except pygit2.GitError as exc:
                raise StoreError(f"cannot open the store {self.git_dir}: {exc}") from None
            self._durable_repo = repo
        return self._durable_repo

    # ----------------------------------------------------------------- writes

    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob; its object id."""
        self._sync_writes()
        try:
            with perms.shared_umask(self.git_dir):
                oid = str(self._writer().create_blob(data))
        except Exception as exc:  # pygit2.GitError, OSError (disk full, read-only)
            raise StoreError(f"cannot write to the store {self.git_dir}: {exc}") from None
        self._keep(oid, data)
        return oid

    def compare_and_swap_many(
        self, updates: list[tuple[str, str | None, bytes]], message: str
    ) -> list[str]:
        """All of the updates or none, in one reference transaction (refs locked in order)."""
        import pygit2

        repo = self._writer()
        new_oids = [self.write_blob(data) for _, _, data in updates]
        ordered = sorted(zip(updates, new_oids, strict=True), key=lambda item: item[0][0])
        for (ref, _, _), _ in ordered:
            self.ensure_reflog(ref)
        try:
            with perms.shared_umask(self.git_dir), repo.transaction() as tx:
                for (ref, _, _), _ in ordered:
                    self.lock_ref(tx, ref)
                for (ref, expected, _), _ in ordered:
                    still_as_seen(self.read(ref), expected)
                for (ref, _, _), new_oid in ordered:
                    tx.set_target(ref, new_oid, message=message)
        except (pygit2.GitError, OSError) as exc:
            raise StoreError(f"cannot update {updates[0][0]} in {self.git_dir}: {exc}") from None
        return new_oids

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        """Delete ``ref`` iff it still holds ``expected_oid`` (used by ``prune``)."""
        import pygit2

        self._sync_writes()
        try:
            with perms.shared_umask(self.git_dir), self.repo.transaction() as tx:
                self.lock_ref(tx, ref)
                current = self.read(ref)
                if current.oid != expected_oid:
                    raise CompareAndSwapFailed(f"{ref} changed while it was being pruned")
                tx.remove(ref)
        except (pygit2.GitError, OSError) as exc:
            raise StoreError(f"cannot remove {ref} from {self.git_dir}: {exc}") from None

    def follow(self, pairs: list[tuple[str, str | None, str]], message: str) -> None:
        """Point each ref at its new object iff it still holds the expected one, in one
        transaction (a remote store's mirror following what its remote now holds; the
        caller holds the mirror's lock). Refs that moved meanwhile are left alone."""
        import pygit2

        for ref, _, _ in pairs:
            if ref != SCOPES_INDEX_REF:  # (its history is no claim's: no reflog)
                self.ensure_reflog(ref)
        try:
            with self.repo.transaction() as tx:
                for ref, _, _ in sorted(pairs):
                    self.lock_ref(tx, ref)
                for ref, expected, new in pairs:
                    if self.read(ref).oid == expected:
                        tx.set_target(ref, new, message=message)
        except (pygit2.GitError, OSError):
            pass  # best effort: the next fetch corrects the mirror

    @contextmanager
    def locked(self, ref: str) -> Iterator[None]:
        """Hold ``ref``'s lock for the block, setting nothing (committing only unlocks)."""
        import pygit2

        try:
            with self.repo.transaction() as tx:
                self.lock_ref(tx, ref)
                yield
        except pygit2.GitError as exc:
            raise OSError(str(exc)) from None

    def lock_ref(self, tx: Any, ref: str) -> None:
        import pygit2

        for attempt in range(50):
            try:
                tx.lock_ref(ref)
                return
            except pygit2.GitError as exc:
                if "lock" not in str(exc).lower() or attempt == 49:
                    raise
                self._clear_stale_lock(ref)
                time.sleep(0.01)

    def ensure_reflog(self, ref: str) -> None:
        """libgit2 writes a reflog for refs outside refs/heads only if the log file exists
        (:func:`gitlease.store.reflogs.make_reflog`)."""
        reflogs.make_reflog(self.git_dir, ref, self._ensure_gc_config)

    def _ensure_gc_config(self) -> None:
        """Keep ``git gc`` from reporting blob reflog tips as errors or expiring history on its
        own (the retention pass decides what goes: :data:`~gitlease.store.reflogs.GC_KEYS`),
        and make libgit2 write
        reflogs in a bare store (it writes none there by default).

        Best effort: it touches history retention, never ownership, so it never fails a
        write. Racing first writers in a fresh store meet on ``config.lock``: whoever loses
        finds the setting made by the winner, or tries again for a moment.
        """
        deadline = time.monotonic() + 1.0
        while True:
            try:
                config = self.repo.config
                with perms.shared_umask(self.git_dir):
                    if reflogs.LOG_KEY not in config:
                        config[reflogs.LOG_KEY] = "true"
                    for key in reflogs.GC_KEYS:
                        if key not in config:
                            config[key] = "never"
                return
            except Exception:
                if time.monotonic() >= deadline:
                    return  # a stale config.lock or a read-only store: the write decides
                time.sleep(0.02)
