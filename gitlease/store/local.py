"""The store on this host: a git repository whose refs under ``refs/worklease/`` hold
claim records, written through libgit2 reference transactions.

Two ways in, one store:

* Reads that only look (``show``, ``list``, ``free``, the commit hook) never import pygit2,
  which costs more than the whole read (docs/performance.md): a ref and its object that are
  loose are read from their files, and so is a ref that is absent; anything else is asked
  of plain ``git`` (one call for one ref). The reads of many refs are in
  :mod:`gitlease.store.listing`.
* Writes change a ref only through :meth:`LocalStore.compare_and_swap_many`: lock the
  refs, re-read them while holding the locks, compare with what the caller observed, set,
  commit. A process that keeps a store open (the library, ``gitlease mcp``, the keeper)
  makes it a libgit2 reference transaction through pygit2 (:mod:`gitlease.store.transaction`);
  a process that writes once or twice and exits (the CLI: ``one_shot``) makes it one
  ``git update-ref --stdin`` (:mod:`gitlease.store.plumbing`), since importing pygit2
  costs more than the rest of such a write. Both take git's ref locks.

Around every write sits the resource's guard (:meth:`~gitlease.store.base.Store.guard`).
The history the retention pass keeps and trims, and ``git gc``, are in
:mod:`gitlease.store.reflogs`. A :class:`~gitlease.store.remote.RemoteStore` holds one of
these as its mirror.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from .._util import TYPE_CHECKING
from .._util import sharing as perms
from ..errors import StoreError
from ..gitio.gitread import (
    SYMBOLIC,
    UNREADABLE_OID,
    Snapshot,
    git_env,
    is_symbolic,
    packed_refs_problem,
    surely_absent,
    unreadable_ref,
)
from ..gitio.objects import read_blob_ref
from ..model.bootclock import stamp_foreign
from ..model.refname import PREFIX, SCOPES_INDEX_REF
from .base import BlobRead, Location, Store, Update

if TYPE_CHECKING:
    import subprocess
    from contextlib import AbstractContextManager
    from pathlib import Path
    from typing import Any, Protocol

    from .transaction import Writer

    class RefWriter(Protocol):
        """What a local store asks of its writer (libgit2's, or ``git update-ref``'s)."""

        git_dir: Path

        def durable(self) -> AbstractContextManager[None]: ...
        def write_blob(self, data: bytes) -> str: ...
        def compare_and_swap_many(
            self, updates: list[tuple[str, str | None, bytes]], message: str
        ) -> list[str]: ...
        def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None: ...
        def follow(self, pairs: list[tuple[str, str | None, str]], message: str) -> None: ...
        def locked(self, ref: str) -> AbstractContextManager[None]: ...
        def ensure_reflog(self, ref: str) -> None: ...


#: Up to how many refs :meth:`LocalStore.read_many` looks each up in the files before it
#: lists them through git (one process, whatever their number).
QUICK_READS = 16


class LocalStore(Store):
    """A store on this host. Cheap to make; pygit2 is imported on the first write only, and
    never when ``one_shot`` (a process that writes once or twice and exits: the module's
    text)."""

    def __init__(self, location: Location, *, one_shot: bool = False) -> None:
        super().__init__(location)
        self.one_shot = one_shot
        self._writer: RefWriter | None = None
        self._reader: Writer | None = None  # libgit2's writer: then the reads go through it
        perms.register(self.git_dir)  # core.sharedRepository: several users write it

    # ----------------------------------------------------------------- the writer

    @property
    def writer(self) -> RefWriter:
        """This store's writer, made on first use: ``git update-ref``'s for a one-shot
        process in a store it serves (:func:`gitlease.store.plumbing.serves`), else
        libgit2's (:mod:`gitlease.store.transaction`), through which the reads a write
        decides from then go too."""
        if self._writer is None and self.one_shot:
            from . import plumbing

            if plumbing.serves(self.git_dir):
                self._writer = plumbing.PlumbingWriter(
                    self.git_dir, self.clear_stale_lock, self._read_one
                )
        if self._writer is None:
            from .transaction import Writer

            self._reader = Writer(self.git_dir, self.clear_stale_lock)
            self._writer = self._reader
        return self._writer

    @property
    def repo(self) -> Any:
        """The pygit2 repository (opened on first use: writes only; a one-shot store
        writing through ``git update-ref`` has none: AttributeError)."""
        return getattr(self.writer, "repo")  # noqa: B009 - not every writer has one

    def prepare_write(self) -> None:
        """Open the writer before a decision that leads to a write, so the reads under the
        guard see exactly what the transaction will lock (libgit2's writer reads itself;
        ``git update-ref`` locks what git reads); and start the daily retention pass if it
        is due (:meth:`start_retention_if_due`)."""
        self.writer  # noqa: B018 - the property opens it
        self.start_retention_if_due()

    # ----------------------------------------------------------------- reads

    def _git(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        import subprocess  # (not on the commit check's path, which runs no git)

        env = git_env(self.git_dir)
        try:
            return subprocess.run(["git", *args], input=input, capture_output=True, env=env)
        except OSError as exc:
            raise StoreError(f"cannot run git: {exc}") from None

    def read(self, ref: str) -> Snapshot:
        """The current value of one ref (pygit2 if the repository is open, else one git call),
        stamped with its first sighting if it was written on a foreign boot clock."""
        return stamp_foreign(self.git_dir, [self._read_one(ref)])[0]

    def _read_one(self, ref: str) -> Snapshot:
        if self._reader is not None:
            return self._reader.read(ref)
        quick = self._read_quick(ref)
        if quick is not None:
            return quick
        found = self._cat_file(ref)
        if found is not None:
            return found
        # absent, or something is wrong: for-each-ref tells which (and never guesses names)
        for snap in self._for_each_ref(ref):
            if snap.ref == ref:
                return snap
        return self._missed(Snapshot(ref, None, None))

    def _read_quick(self, ref: str) -> Snapshot | None:
        """``ref`` read without a git process, or None when git must say: its record when the
        ref and the object are loose (:func:`gitlease.gitio.objects.read_blob_ref`, the bytes
        hashed), or absent when nothing names it (:func:`gitlease.gitio.gitread.surely_absent`:
        ``show`` or ``free`` of a free resource runs no git)."""
        loose = read_blob_ref(self.git_dir, ref)
        if loose is not None:
            return Snapshot(ref, loose[0], loose[1])
        if surely_absent(self.git_dir, ref):
            return Snapshot(ref, None, None)
        return None

    def _cat_file(self, ref: str) -> Snapshot | None:
        """The ref's object from one ``git cat-file --batch`` call, looked up directly.

        (``for-each-ref`` with a full ref name still lists the whole directory, which
        costs O(claims).) None when git cannot name an object for ``ref``.
        """
        if is_symbolic(self.git_dir, ref):  # git reads through it; libgit2 cannot write it
            return Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC)
        result = self._git("cat-file", "--batch", input=ref.encode("utf-8") + b"\n")
        header, _, rest = result.stdout.partition(b"\n")
        parts = header.split(b" ")
        if result.returncode != 0 or len(parts) != 3 or not parts[2].isdigit():
            return None
        oid, kind, size = parts[0].decode(), parts[1].decode(), int(parts[2])
        if kind != "blob":
            return Snapshot(ref, oid, None, f"the ref points at a {kind}, not a blob")
        return Snapshot(ref, oid, rest[:size])

    def _for_each_ref(self, pattern: str) -> list[Snapshot]:
        from . import listing

        return listing.for_each_ref(self.git_dir, self._git, pattern, self.read_blob)

    def read_many(self, refs: Sequence[str]) -> list[Snapshot]:
        """Several refs, in the order given: with the repository open in pygit2, one lookup
        each (each ref looked up by name costs what that ref costs, where listing them
        costs what the whole store holds: docs/performance.md, figure 9); a few read from
        their files when each is loose or absent; else in two git calls whatever their number
        (:func:`gitlease.store.listing.read_many`)."""
        if not refs:
            return []
        if self._reader is not None:
            return stamp_foreign(self.git_dir, [self._reader.read(ref) for ref in refs])
        if len(refs) <= QUICK_READS:  # (`free A B`: each loose or absent, no process)
            quick = [self._read_quick(ref) for ref in refs]
            if all(snap is not None for snap in quick):
                return stamp_foreign(self.git_dir, [s for s in quick if s is not None])
        from . import listing

        return [self._missed(s) for s in listing.read_many(self.git_dir, self._git, refs)]

    def _missed(self, snap: Snapshot) -> Snapshot:
        """``snap``, or, when git found no such ref while ``packed-refs`` names it (git
        binary-searches a file headed ``sorted`` and misses a line out of order), or while
        its folder cannot be read by this user (git skips such a folder without a word),
        that problem: never an absent ref while something may hold it."""
        if snap.oid is not None:
            return snap
        problem = unreadable_ref(self.git_dir, snap.ref) or packed_refs_problem(
            self.git_dir, snap.ref
        )
        return Snapshot(snap.ref, UNREADABLE_OID, None, problem) if problem else snap

    def read_all(self, prefix: str = PREFIX) -> list[Snapshot]:
        """Every claim ref under ``prefix`` with its blob, in one pass over the refs (never
        :data:`~gitlease.model.refname.SCOPES_INDEX_REF`, which holds no claim)."""
        snaps = [s for s in self._for_each_ref(prefix) if s.ref != SCOPES_INDEX_REF]
        return stamp_foreign(self.git_dir, snaps)

    def iter_all(
        self, prefix: str = PREFIX, batch: int = 1000, *, stamped: bool = True
    ) -> Iterator[list[Snapshot]]:
        """What :meth:`read_all` reads, a batch of ``batch`` snapshots at a time (broken refs
        last): ``list --json`` of 100,000 claims holds one batch of records, not every one
        (docs/performance.md, 5b; :func:`gitlease.store.listing.listed`). ``stamped=False``:
        the caller stamps first sightings itself (:func:`~gitlease.model.claim.timed_many`).
        """
        from . import listing

        yield from listing.listed(self.git_dir, prefix, {}, batch, stamped)

    def read_all_since(
        self, seen: Mapping[str, Snapshot], *, stamped: bool = True
    ) -> list[Snapshot]:
        """What :meth:`read_all` reads, reading again only the records whose object id
        changed since ``seen`` (what an earlier call returned, by ref): a record is named by
        its object id, so a ref that still names the same id still holds the same bytes;
        the snapshot of such a ref is the one in ``seen``, its sighting stamped afresh
        (``stamped=False``: by the caller, as for :meth:`iter_all`)."""
        from . import listing

        parts = listing.listed(self.git_dir, PREFIX, seen, 1 << 30, stamped)
        return [snap for part in parts for snap in part]

    def read_blob(self, oid: str) -> tuple[bytes | None, str | None]:
        """(bytes, None) for a blob, or (None, why not)."""
        if self._reader is not None:
            return self._reader.read_blob(oid)
        kind = self._git("cat-file", "-t", oid)
        if kind.returncode != 0:
            return None, f"object {oid} is missing"
        if kind.stdout.strip() != b"blob":
            return None, f"object {oid} is a {kind.stdout.strip().decode()}, not a blob"
        blob = self._git("cat-file", "blob", oid)
        if blob.returncode != 0:
            return None, f"object {oid} cannot be read"
        return blob.stdout, None

    def read_blobs(self, oids: Sequence[str]) -> dict[str, tuple[bytes | None, str | None]]:
        """Many blobs by object id: each ``(bytes, None)``, or ``(None, why not)`` (missing,
        not a blob, not an object id), read by the one reader of many objects
        (:meth:`~gitlease.gitio.catfile.BatchReader.blobs`: loose objects from their files,
        the rest in one ``git cat-file --batch`` stream)."""
        from ..gitio.catfile import BatchReader

        reader = BatchReader(self.git_dir)
        try:
            return reader.blobs(oids)
        finally:
            reader.close()

    @contextmanager
    def blob_reader(self) -> Iterator[BlobRead]:
        """A reader of many blobs through one ``git cat-file --batch`` process, for walking
        a record chain (``log``, ``verify``): ``read(oid)`` gives what :meth:`read_blob`
        gives, and the process starts on the first read and ends with the block. (With the
        repository open in pygit2, that reads instead.)"""
        if self._reader is not None:
            yield self.read_blob
            return
        from ..gitio.catfile import BatchReader

        reader = BatchReader(self.git_dir)
        try:
            yield reader.read
        finally:
            reader.close()

    # ---------------------------------------------------------------- writes

    @contextmanager
    def durable(self) -> Iterator[None]:
        """The writes in this block hand out a revision (an acquire, a repair's tombstone):
        libgit2 fsyncs their objects, refs and reflog lines, each with its directory, before
        the write returns, so that the revision is there after a power cut and the next one
        continues above it (docs/reference/store.md, durability). Other writes (heartbeat,
        release) are not synced: losing one to a power cut never repeats a revision."""
        with self.writer.durable():
            yield

    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob; its object id."""
        return self.writer.write_blob(data)

    def compare_and_swap_many(self, updates: list[Update], message: str) -> list[str]:
        """All of the updates or none, in one reference transaction (refs locked in order,
        re-read under the locks: :meth:`.transaction.Writer.compare_and_swap_many`)."""
        return self.writer.compare_and_swap_many(updates, message)

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        """Delete ``ref`` iff it still holds ``expected_oid`` (used by ``prune``)."""
        self.writer.remove_compare_and_swap(ref, expected_oid)

    # ------------------------------------------------------------- retention

    def reflog_refs(self) -> list[str]:
        """Every ref under ``refs/worklease/`` that has a reflog file (existing or not)."""
        from . import reflogs

        return reflogs.reflog_refs(self.git_dir)

    def read_reflog(self, ref: str) -> bytes:
        """The reflog of ``ref`` as git wrote it (empty if there is none)."""
        from . import reflogs

        return reflogs.read_reflog(self.git_dir, ref)

    def reflog_landed(self, ref: str, current: str | None) -> list[str]:
        """:func:`gitlease.store.reflogs.reflog_landed`."""
        from . import reflogs

        return reflogs.reflog_landed(self.git_dir, ref, current)

    def history_start(self, ref: str) -> str | None:
        """:func:`gitlease.store.reflogs.history_start`."""
        from . import reflogs

        return reflogs.history_start(self.git_dir, ref)

    def rewrite_reflog(self, ref: str, change: Callable[[bytes], bytes | None]) -> bool:
        """:func:`gitlease.store.reflogs.rewrite_reflog`, under the ref's lock."""
        from . import reflogs

        return reflogs.rewrite_reflog(self.git_dir, self.writer.locked, ref, change)

    def delete_reflog(self, ref: str) -> None:
        """:func:`gitlease.store.reflogs.delete_reflog`."""
        from . import reflogs

        reflogs.delete_reflog(self.git_dir, ref)

    def collect_garbage(self, grace: str | None = None) -> None:
        """``git gc`` of the store (:func:`gitlease.store.reflogs.collect_garbage`)."""
        from . import reflogs

        reflogs.collect_garbage(self.git_dir, grace or reflogs.GC_GRACE)

    def collect_garbage_trimmed(self, grace: str | None = None) -> None:
        """``git gc`` for the retention pass, which has just trimmed the claims' reflogs
        itself (:func:`gitlease.store.reflogs.collect_garbage`, ``trimmed``)."""
        from . import reflogs

        reflogs.collect_garbage(self.git_dir, grace or reflogs.GC_GRACE, trimmed=True)

    def start_retention_if_due(self) -> None:
        """About once a day, start the retention pass in the background
        (:func:`gitlease.state.autoprune.start_if_due`). Best effort: it never fails a write."""
        from ..state import autoprune

        autoprune.start_if_due(self.git_dir, self.remote)
