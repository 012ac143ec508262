"""The store: a git repository whose refs under ``refs/worklease/`` hold claim records.

Two ways in, one store:

* Reads that only look (``show``, ``list``, ``free``, the commit hook) use one
  ``git`` call and never import pygit2, which costs more than the whole read
  (docs/performance.md).
* Writes open the repository with pygit2 and change a ref only through
  :meth:`Store.compare_and_swap_many`: lock the refs, re-read them while holding
  the locks, compare with what the caller observed, set, commit.

Around every write sits the resource's guard (:mod:`gitlease.state.guards`). A
``<ref>.lock`` file found while holding the guard was left by a process that is
gone (or by a plain git command, which holds a ref lock for milliseconds): such
a lock older than :data:`~gitlease._util.files.STALE_LOCK_SECONDS` is removed.

The store also carries what the retention pass (:mod:`gitlease.maintenance.prune`)
needs: one ``git cat-file --batch`` for walking a record chain, reflog rewrites
under the ref's lock, ``git gc``, the revision floors (:mod:`gitlease.state.floors`),
and the daily start of the pass from a write (:meth:`Store.start_retention_if_due`).

:class:`Store` is the store on this host; :class:`~gitlease.store.remote.RemoteStore`
overrides the methods whose behaviour differs when a git remote coordinates it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._util import sharing as perms
from .._util.files import STALE_LOCK_SECONDS, atomic_write, is_stale, lock_age
from ..errors import AmbiguousError, CompareAndSwapFailed, CorruptRecordError, StoreError
from ..gitio.gitread import (
    OID,
    SYMBOLIC,
    UNREADABLE_OID,
    Snapshot,
    broken_refs,
    git_env,
    is_symbolic,
    packed_refs_problem,
    parse_for_each_ref,
    parse_reflog,
    stderr_text,
    with_settings,
)
from ..gitio.objects import LooseObjects, read_blob_ref
from ..model.bootclock import stamp_foreign
from ..model.refname import PREFIX, SCOPES_INDEX_REF
from ..state import guards

if TYPE_CHECKING:
    from ..gitio.catfile import BatchReader
    from .location import Location

#: git's own reflog expiry stays off for the claims: it can keep neither "the last N records"
#: nor an active claim's records back to its acquire, so the retention pass does it
#: (:mod:`gitlease.maintenance.retention`), and a plain ``git gc`` of the store drops no history.
_GC_KEYS = (
    "gc.refs/worklease/*.reflogExpireUnreachable",
    "gc.refs/worklease/*.reflogExpire",
)
_LOG_KEY = "core.logAllRefUpdates"
#: Unreferenced objects younger than this survive the pass's ``git gc``: a write stores its
#: blob before the ref (or a remote) takes it, and a push may take up to the network timeout.
GC_GRACE = "1.hour.ago"
#: How many blobs a store keeps read (a claim record is under 1 KiB).
_BLOB_CACHE = 256


def _snapshot(ref: str, oid: str, found: tuple[str, bytes] | None) -> Snapshot:
    """A listed ref's snapshot from its object's type and bytes (None: missing), with the
    problem :meth:`Store.read_all` names for it."""
    if found is None:
        return Snapshot(ref, oid, None, f"object {oid} is missing")
    kind, body = found
    if kind != "blob":
        return Snapshot(ref, oid, None, f"the ref points at a {kind}, not a blob")
    return Snapshot._of((ref, oid, body, None, None))


class Store:
    """A gitlease store. Cheap to make; pygit2 is imported on the first write only."""

    #: The git remote that coordinates this store across hosts (:mod:`gitlease.store.remote`).
    remote: str | None = None
    #: The longest pause between the looks of a waiter that is first in line (waiting.py):
    #: a look here costs a ref read, so the resource goes to it soon after it frees.
    wait_poll_seconds = 0.05

    def __init__(self, location: Location) -> None:
        self.location = location
        self.git_dir = location.git_dir
        self._repo: Any = None
        perms.register(self.git_dir)  # core.sharedRepository: several users write it
        #: Blobs read through pygit2, by object id: an object's bytes never change, so one
        #: operation's three reads of the record at a ref (early look, under the guard,
        #: under the ref lock) cost one object read (docs/performance.md, figure 1). The
        #: ref itself is read afresh every time: only it can change.
        self._blobs: dict[str, bytes] = {}
        self._durable = 0  # inside :meth:`durable`
        self._durable_repo: Any = None

    def refresh(self) -> None:
        """Bring reads up to date before a decision (a remote store fetches; here: nothing)."""

    @contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Network calls made inside end within ``seconds`` (a remote store; here: none)."""
        yield

    def recheck_refusal(self) -> bool:
        """Before refusing from what this store last read: bring it up to date if it can be
        behind, and say whether it did (then the caller judges again). Here the refs are
        the truth itself: False."""
        return False

    def outcome_readable(self, error: BaseException) -> bool:
        """Whether what landed of a write that raised ``error`` can be read from the refs now.
        Here it always can: the transaction either committed or it did not."""
        return True

    def begin_command(self) -> None:
        """A command starts with this store, which an earlier one used (a resident server
        keeps its stores open): nothing of that one carries over. Here: nothing to forget."""

    def child_env(self) -> dict[str, str]:
        """Environment for a command run under a claim, so its own gitlease calls reach this
        store the same way (a remote store names its remote; here: nothing to add)."""
        return {}

    def ensure_prunable(self) -> None:
        """Refuse ``prune`` where its revision floors could not keep revisions increasing."""

    def repair_refusal(self, *, parsed: bool) -> str | None:
        """Why ``verify --repair`` must leave a bad record alone here, or None.

        ``parsed``: whether the record still parses (its revision is known).
        """
        return None

    def prepare_write(self) -> None:
        """Open the repository with pygit2 before a decision that leads to a write, so the
        reads under the guard see exactly what the transaction will lock; and start the
        daily retention pass if it is due (:meth:`start_retention_if_due`)."""
        self.repo  # noqa: B018 - the property opens it
        self.start_retention_if_due()

    # ----------------------------------------------------------------- reads

    def _git(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
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
        if self._repo is not None:
            return self._read_pygit2(ref)
        found = self._cat_file(ref)
        if found is not None:
            return found
        # absent, or something is wrong: for-each-ref tells which (and never guesses names)
        for snap in self._for_each_ref(ref):
            if snap.ref == ref:
                return snap
        return Snapshot(ref, None, None)

    def _cat_file(self, ref: str) -> Snapshot | None:
        """The ref's object from the files when both are loose
        (:func:`gitlease.gitio.objects.read_blob_ref`),
        else from one ``git cat-file --batch`` call, looked up directly.

        (``for-each-ref`` with a full ref name still lists the whole directory, which
        costs O(claims).) None when git cannot name an object for ``ref``.
        """
        loose = read_blob_ref(self.git_dir, ref)  # a loose ref and object: no process
        if loose is not None:
            return Snapshot(ref, loose[0], loose[1])
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

    def read_many(self, refs: Sequence[str]) -> list[Snapshot]:
        """Several refs, in the order given: with the repository open in pygit2, one lookup
        each; else in two git calls whatever their number.

        One ``for-each-ref`` lists the object id of every ref in the store (it
        reads no blob, so it stays cheap with many claims), then one buffered
        ``cat-file --batch`` reads the blobs of the refs asked for. (Naming the
        refs to ``cat-file`` answers "missing" alike for an absent ref, a broken
        ref file and a missing object; :meth:`read` is a process a ref.)
        """
        if not refs:
            return []
        if self._repo is not None:
            # Open for a write (``acquire --first-free``): each ref looked up by name costs
            # what that ref costs, where listing them costs what the whole store holds
            # (docs/performance.md, figure 9); a damaged or symbolic ref is named as
            # :meth:`read` does.
            return stamp_foreign(self.git_dir, [self._read_pygit2(ref) for ref in refs])
        listed = self._git("for-each-ref", "--format=%(objectname) %(refname) %(symref)", PREFIX)
        if listed.returncode != 0:
            raise StoreError(f"cannot read the store {self.git_dir}: {stderr_text(listed)}")
        oids: dict[str, str] = {}
        symbolic: set[str] = set()
        for line in listed.stdout.decode("utf-8", "replace").splitlines():
            oid, _, rest = line.partition(" ")
            ref, _, target = rest.partition(" ")
            oids[ref] = oid
            if target:
                symbolic.add(ref)
        broken = {}
        if b"ignoring broken ref" in listed.stderr:
            broken = {s.ref: s for s in broken_refs(listed.stderr, PREFIX)}
        blobs = self._cat_objects(list(dict.fromkeys(oids[r] for r in refs if r in oids)))
        out = []
        for ref in refs:
            if ref in broken:
                out.append(broken[ref])
            elif ref in symbolic:
                out.append(Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC))
            elif ref not in oids:
                out.append(Snapshot(ref, None, None))
            else:
                data, problem = blobs.get(oids[ref], (None, f"object {oids[ref]} is missing"))
                out.append(Snapshot(ref, oids[ref], data, problem))
        return stamp_foreign(self.git_dir, out)

    def _cat_objects(self, oids: list[str]) -> dict[str, tuple[bytes | None, str | None]]:
        """Each object's blob bytes, or why there are none, from one ``cat-file --batch``."""
        if not oids:
            return {}
        asked = "".join(oid + "\n" for oid in oids).encode("ascii")
        result = self._git("cat-file", "--batch", "--buffer", input=asked)
        if result.returncode != 0:
            raise StoreError(f"cannot read the store {self.git_dir}: {stderr_text(result)}")
        out: dict[str, tuple[bytes | None, str | None]] = {}
        data = result.stdout
        pos = 0
        for oid in oids:
            end = data.find(b"\n", pos)
            if end < 0:
                break
            parts = data[pos:end].split(b" ")
            pos = end + 1
            if len(parts) != 3 or not parts[2].isdigit():
                out[oid] = (None, f"object {oid} is missing")
                continue
            size = int(parts[2])
            body = data[pos : pos + size]
            pos += size + 1  # cat-file ends every object with a newline
            if parts[1] != b"blob":
                out[oid] = (None, f"object {oid} is a {parts[1].decode()}, not a blob")
            else:
                out[oid] = (body, None)
        return out

    def read_blobs(self, oids: Sequence[str]) -> dict[str, tuple[bytes | None, str | None]]:
        """Many blobs by object id: each ``(bytes, None)``, or ``(None, why not)`` (missing,
        not a blob, not an object id). Loose objects are read from their files
        (:func:`~gitlease.gitio.objects.read_loose`), the rest in one ``cat-file --batch``."""
        out: dict[str, tuple[bytes | None, str | None]] = {}
        rest: list[str] = []
        with LooseObjects(self.git_dir / "objects") as objects:
            for oid in dict.fromkeys(oids):
                if not OID.fullmatch(oid):
                    out[oid] = (None, f"{oid[:80]!r} is not an object id")
                    continue
                loose = objects.read(oid)
                if loose is None:
                    rest.append(oid)
                elif loose[0] != "blob":
                    out[oid] = (None, f"object {oid} is a {loose[0]}, not a blob")
                else:
                    out[oid] = (loose[1], None)
        out.update(self._cat_objects(rest))
        return out

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
        (docs/performance.md, 5b). See :meth:`_listed` for how. ``stamped=False``: the
        caller stamps first sightings itself (:func:`~gitlease.model.claim.timed_many`).

        A store whose :meth:`read_all` differs (a remote's mirror stamps every ref with its
        first sighting, the whole listing at once) gives its :meth:`read_all` as one batch.
        """
        if type(self).read_all is not Store.read_all:
            yield self.read_all(prefix)
            return
        yield from self._listed(prefix, {}, batch, stamped)

    def read_all_since(
        self, seen: Mapping[str, Snapshot], *, stamped: bool = True
    ) -> list[Snapshot]:
        """What :meth:`read_all` reads, reading again only the records whose object id
        changed since ``seen`` (what an earlier call returned, by ref): a record is named by
        its object id, so a ref that still names the same id still holds the same bytes;
        the snapshot of such a ref is the one in ``seen``, its sighting stamped afresh
        (``stamped=False``: by the caller, as for :meth:`iter_all`).

        A store whose :meth:`read_all` differs (a remote's mirror) reads everything."""
        if type(self).read_all is not Store.read_all:
            return self.read_all()
        return [snap for part in self._listed(PREFIX, seen, 1 << 30, stamped) for snap in part]

    def _listed(
        self, prefix: str, seen: Mapping[str, Snapshot], batch: int, stamped: bool
    ) -> Iterator[list[Snapshot]]:
        """The refs under ``prefix`` as one ``git for-each-ref`` names them (their ids, no
        blob: git alone knows every rule of refs), read a batch at a time as git writes
        them: a loose record from its file (:class:`~gitlease.gitio.objects.LooseObjects`:
        a third of what git takes), any other through one ``git cat-file --batch``
        process; the records of ``seen`` whose ids did not change are not read at all.
        Each snapshot is what :meth:`read_all` gives for the ref (a blob, or the same
        problem), stamped as it stamps them unless ``stamped`` is False."""
        errors: list[bytes] = []
        reader: BatchReader | None = None
        objects = LooseObjects(self.git_dir / "objects")
        try:
            for lines in self._listed_ids(prefix, batch, errors):
                out: list[Snapshot] = []
                unread: list[tuple[int, str, str]] = []
                for line in lines:
                    oid, _, rest = line.partition(" ")
                    ref, _, target = rest.partition(" ")
                    before = seen.get(ref)
                    if target:
                        out.append(Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC))
                    elif before is not None and before.oid == oid and before.data is not None:
                        if before.first_seen_ms is not None:  # (stamped afresh below)
                            before = before.replace(first_seen_ms=None)
                        out.append(before)
                    else:
                        loose = objects.read(oid)
                        if loose is None:
                            unread.append((len(out), ref, oid))
                        out.append(_snapshot(ref, oid, loose))
                if unread:
                    if reader is None:
                        from ..gitio.catfile import BatchReader

                        reader = BatchReader(self.git_dir)
                    kinds = reader.read_many([oid for _, _, oid in unread])
                    for i, ref, oid in unread:
                        kind, body = kinds[oid]
                        out[i] = _snapshot(ref, oid, None if kind is None else (kind, body))
                yield stamp_foreign(self.git_dir, out) if stamped else out
        finally:
            objects.close()
            if reader is not None:
                reader.close()
        if b"ignoring broken ref" in b"".join(errors):
            yield broken_refs(b"".join(errors), prefix)

    def _listed_ids(self, prefix: str, batch: int, errors: list[bytes]) -> Iterator[list[str]]:
        """``git for-each-ref``'s lines of ``%(objectname) %(refname) %(symref)``, a batch at
        a time as git writes them (what git said on stderr, appended to ``errors``; STORE
        if it failed: nothing read before then is to be used)."""
        fmt = "--format=%(objectname) %(refname) %(symref)"
        with tempfile.TemporaryFile() as stderr:  # (a pipe could fill and stall git)
            try:
                proc = subprocess.Popen(
                    ["git", "for-each-ref", fmt, prefix],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    env=git_env(self.git_dir),
                )
            except OSError as exc:
                raise StoreError(f"cannot run git: {exc}") from None
            try:
                assert proc.stdout is not None
                lines: list[str] = []
                for raw in proc.stdout:
                    lines.append(raw.rstrip(b"\n").decode("utf-8", "surrogateescape"))
                    if len(lines) >= batch:
                        yield lines
                        lines = []
                code = proc.wait()
            finally:
                if proc.poll() is None:  # (the reader stopped early)
                    proc.kill()
                    proc.wait()
                proc.stdout.close()  # type: ignore[union-attr]
            stderr.seek(0)
            errors.append(stderr.read())
        if code != 0:
            why = errors[-1].decode("utf-8", "replace").strip() or f"git exited {code}"
            raise StoreError(f"cannot read the store {self.git_dir}: {why}")
        if lines:
            yield lines

    def _for_each_ref(self, pattern: str) -> list[Snapshot]:
        fmt = "%(refname) %(objectname) %(objecttype) %(raw:size) %(symref)%0a%(raw)"
        result = self._git("for-each-ref", f"--format={fmt}", pattern)
        if result.returncode != 0:
            if b"missing object" in result.stderr:
                return self._for_each_ref_slow(pattern)
            raise StoreError(f"cannot read the store {self.git_dir}: {stderr_text(result)}")
        snapshots = parse_for_each_ref(result.stdout)
        if b"ignoring broken ref" in result.stderr:
            snapshots.extend(broken_refs(result.stderr, pattern))
        return snapshots

    def _for_each_ref_slow(self, pattern: str) -> list[Snapshot]:
        """Names and ids first, then each blob: survives a missing object behind a ref."""
        fmt = "--format=%(refname) %(objectname) %(symref)"
        result = self._git("for-each-ref", fmt, pattern)
        if result.returncode != 0:
            raise StoreError(f"cannot read the store {self.git_dir}: {stderr_text(result)}")
        snapshots = []
        for line in result.stdout.decode("utf-8", "surrogateescape").splitlines():
            ref, _, rest = line.partition(" ")
            oid, _, target = rest.partition(" ")
            if target:
                snapshots.append(Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC))
                continue
            data, problem = self.read_blob(oid)
            snapshots.append(Snapshot(ref, oid, data, problem))
        if b"ignoring broken ref" in result.stderr:
            snapshots.extend(broken_refs(result.stderr, pattern))
        return snapshots

    def read_blob(self, oid: str) -> tuple[bytes | None, str | None]:
        """(bytes, None) for a blob, or (None, why not)."""
        if self._repo is not None:
            known = self._blobs.get(oid)
            if known is not None:
                return known, None
            import pygit2

            try:
                obj = self._repo[oid]
            except (KeyError, ValueError, pygit2.GitError):
                return None, f"object {oid} is missing"
            if obj.type != pygit2.enums.ObjectType.BLOB:
                return None, f"object {oid} is a {obj.type_str}, not a blob"
            data: bytes = obj.data
            if len(self._blobs) >= _BLOB_CACHE:
                self._blobs.clear()
            self._blobs[oid] = data
            return data, None
        kind = self._git("cat-file", "-t", oid)
        if kind.returncode != 0:
            return None, f"object {oid} is missing"
        if kind.stdout.strip() != b"blob":
            return None, f"object {oid} is a {kind.stdout.strip().decode()}, not a blob"
        blob = self._git("cat-file", "blob", oid)
        if blob.returncode != 0:
            return None, f"object {oid} cannot be read"
        return blob.stdout, None

    @contextmanager
    def blob_reader(self) -> Iterator[Callable[[str], tuple[bytes | None, str | None]]]:
        """A reader of many blobs through one ``git cat-file --batch`` process, for walking
        a record chain (``log``, ``verify``): ``read(oid)`` gives what :meth:`read_blob`
        gives, and the process starts on the first read and ends with the block. (With the
        repository open in pygit2, that reads instead.)"""
        if self._repo is not None:
            yield self.read_blob
            return
        from ..gitio.catfile import BatchReader

        reader = BatchReader(self.git_dir)
        try:
            yield reader.read
        finally:
            reader.close()

    def _read_pygit2(self, ref: str) -> Snapshot:
        import pygit2

        try:
            reference = self._repo.references.get(ref)
        except (pygit2.GitError, ValueError) as exc:
            return Snapshot(ref, UNREADABLE_OID, None, f"the ref file is corrupt ({exc})")
        if reference is None:
            problem = packed_refs_problem(self.git_dir, ref)
            if problem:  # libgit2 skips lines it cannot parse: "absent" may be a lie
                return Snapshot(ref, UNREADABLE_OID, None, problem)
            return Snapshot(ref, None, None)
        if reference.type != pygit2.enums.ReferenceType.DIRECT:
            return Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC)
        oid = str(reference.target)
        data, problem = self.read_blob(oid)
        return Snapshot(ref, oid, data, problem)

    # ---------------------------------------------------------------- guards

    def guard_path(self, ref: str) -> Path:
        """The guard file of ``ref`` (:mod:`gitlease.state.guards`)."""
        return guards.guard_path(self.git_dir, ref)

    @contextmanager
    def guard(
        self, ref: str, *, wait: float = guards.GUARD_WAIT_SECONDS, owned: bool = False
    ) -> Iterator[int]:
        """Hold the resource's guard, or raise HELD if another process keeps it. ``owned``:
        a write of the caller's own claim, which goes before acquirers
        (:func:`gitlease.guards.hold`)."""
        with guards.hold(self.guard_path(ref), ref, wait=wait, owned=owned) as fd:
            yield fd

    def clear_stale_lock(self, ref: str, *, wait: float = STALE_LOCK_SECONDS + 2) -> None:
        """Under the guard: wait out a young ``<ref>.lock``, remove one that is stale."""
        lock = self.git_dir / (ref + ".lock")
        deadline = time.monotonic() + wait
        while True:
            age = lock_age(lock)
            if age is None:
                return
            if is_stale(age):
                with suppress(FileNotFoundError):
                    lock.unlink()
                return
            if time.monotonic() >= deadline:
                raise AmbiguousError(f"{lock} is held by another git process; try again")
            time.sleep(0.02)

    # ---------------------------------------------------------------- writes

    @property
    def repo(self) -> Any:
        """The pygit2 repository (opened on first use: writes only)."""
        if self._repo is None:
            import pygit2

            try:
                self._repo = pygit2.Repository(str(self.git_dir))
            except pygit2.GitError as exc:
                raise StoreError(f"cannot open the store {self.git_dir}: {exc}") from None
        return self._repo

    @contextmanager
    def durable(self) -> Iterator[None]:
        """The writes in this block hand out a revision (an acquire, a repair's tombstone):
        libgit2 fsyncs their objects, refs and reflog lines, each with its directory, before
        the write returns, so that the revision is there after a power cut and the next one
        continues above it (docs/reference/store.md, durability). Other writes (heartbeat,
        release) are not synced: losing one to a power cut never repeats a revision."""
        self._durable += 1
        try:
            yield
        finally:
            self._durable -= 1
            if self._durable == 0 and self._repo is not None:
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

    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob; its object id."""
        self._sync_writes()
        try:
            with perms.shared_umask(self.git_dir):
                oid = str(self._writer().create_blob(data))
        except Exception as exc:  # pygit2.GitError, OSError (disk full, read-only)
            raise StoreError(f"cannot write to the store {self.git_dir}: {exc}") from None
        if len(self._blobs) >= _BLOB_CACHE:
            self._blobs.clear()
        self._blobs[oid] = data
        return oid

    def compare_and_swap(
        self, ref: str, expected_oid: str | None, data: bytes, message: str
    ) -> str:
        """Point ``ref`` at a new blob iff it still holds ``expected_oid`` (None: absent).

        The caller holds the guard. The ref is locked, re-read under the lock and
        compared; only then is it set.
        """
        return self.compare_and_swap_many([(ref, expected_oid, data)], message)[0]

    def compare_and_swap_many(
        self, updates: list[tuple[str, str | None, bytes]], message: str
    ) -> list[str]:
        """All of the updates or none, in one reference transaction (refs locked in order)."""
        import pygit2

        self.repo  # noqa: B018 - opened for the reads under the lock
        repo = self._writer()
        new_oids = [self.write_blob(data) for _, _, data in updates]
        ordered = sorted(zip(updates, new_oids, strict=True), key=lambda item: item[0][0])
        for (ref, _, _), _ in ordered:
            self._ensure_reflog(ref)
        try:
            with perms.shared_umask(self.git_dir), repo.transaction() as tx:
                for (ref, _, _), _ in ordered:
                    self._lock_ref(tx, ref)
                for (ref, expected, _), _ in ordered:
                    current = self._read_pygit2(ref)
                    if current.problem and current.oid != expected:
                        raise CorruptRecordError(f"{ref}: {current.problem}")
                    if current.oid != expected:
                        raise CompareAndSwapFailed(
                            f"{ref} changed while it was being written "
                            f"(expected {expected or 'absent'}, found {current.oid or 'absent'})"
                        )
                for (ref, _, _), new_oid in ordered:
                    tx.set_target(ref, new_oid, message=message)
        except (pygit2.GitError, OSError) as exc:
            raise StoreError(f"cannot update {updates[0][0]} in {self.git_dir}: {exc}") from None
        return new_oids

    def _lock_ref(self, tx: Any, ref: str) -> None:
        import pygit2

        for attempt in range(50):
            try:
                tx.lock_ref(ref)
                return
            except pygit2.GitError as exc:
                if "lock" not in str(exc).lower() or attempt == 49:
                    raise
                self.clear_stale_lock(ref)
                time.sleep(0.01)

    def _ensure_reflog(self, ref: str) -> None:
        """libgit2 writes a reflog for refs outside refs/heads only if the log file exists."""
        log = self.git_dir / "logs" / ref
        if log.exists():
            return
        self._ensure_gc_config()
        try:
            with perms.shared_umask(self.git_dir):
                log.parent.mkdir(parents=True, exist_ok=True)
                log.touch()
            perms.widen_parents(log)
        except OSError as exc:
            raise StoreError(f"cannot write to the store {self.git_dir}: {exc}") from None

    def _ensure_gc_config(self) -> None:
        """Keep ``git gc`` from reporting blob reflog tips as errors or expiring history on its
        own (the retention pass decides what goes: :data:`_GC_KEYS`), and make libgit2 write
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
                    if _LOG_KEY not in config:
                        config[_LOG_KEY] = "true"
                    for key in _GC_KEYS:
                        if key not in config:
                            config[key] = "never"
                return
            except Exception:
                if time.monotonic() >= deadline:
                    return  # a stale config.lock or a read-only store: the write decides
                time.sleep(0.02)

    def revision_floor(self, ref: str) -> int:
        """The last revision of a pruned resource (0 if none): revisions keep growing."""
        from ..state import floors

        return floors.read(self.git_dir, ref)

    def write_revision_floor(self, ref: str, revision: int) -> None:
        """Durably remember ``revision`` before ``prune`` removes the ref (under the guard)."""
        try:
            from ..state import floors

            floors.write(self.git_dir, ref, revision)
        except OSError as exc:
            raise StoreError(f"cannot write the floor of {ref}: {exc.strerror or exc}") from None

    # ------------------------------------------------------------- retention

    def reflog_path(self, ref: str) -> Path:
        """The reflog file of ``ref``."""
        return self.git_dir / "logs" / ref

    def reflog_refs(self) -> list[str]:
        """Every ref under ``refs/worklease/`` that has a reflog file (existing or not)."""
        base = self.git_dir / "logs" / PREFIX
        if not base.is_dir():
            return []
        root = self.git_dir / "logs"
        return sorted(
            str(p.relative_to(root))
            for p in base.rglob("*")
            if p.is_file() and not p.name.endswith(".lock")
        )

    def read_reflog(self, ref: str) -> bytes:
        """The reflog of ``ref`` as git wrote it (empty if there is none)."""
        try:
            return self.reflog_path(ref).read_bytes()
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise StoreError(f"cannot read the reflog of {ref}: {exc.strerror or exc}") from None

    def reflog_landed(self, ref: str, current: str | None) -> list[str]:
        """The object ids the ref's reflog shows it pointing at, oldest first, without the
        line of a write that never happened: libgit2 appends a reflog line before it renames
        the lock into place, so a process killed in between leaves a line that the next one
        (or, for the last, the ref itself: ``current``) contradicts. Deletions are left out.
        (For finding a ref moved back below what it held: :mod:`gitlease.state.highwater`.)
        """
        try:
            lines = parse_reflog(self.read_reflog(ref))
        except StoreError:
            return []
        landed = []
        for i, line in enumerate(lines):
            after = lines[i + 1].old if i + 1 < len(lines) else (current or "0" * len(line.new))
            if line.new == after and line.new.strip("0"):
                landed.append(line.new)
        return landed

    def history_start(self, ref: str) -> str | None:
        """The record where ``ref``'s kept history starts, if the retention pass cut it: the
        record that the reflog's first line writes over the zero id. (An untrimmed history's
        first record has no predecessor anyway; ``log`` and ``verify`` stop at this one even
        while ``git gc`` has not dropped the expired records yet, :data:`GC_GRACE`.)"""
        try:
            with self.reflog_path(ref).open("rb") as f:
                first = f.readline(512)
        except OSError:
            return None
        lines = parse_reflog(first)
        if not lines or lines[0].old.strip("0") or not OID.fullmatch(lines[0].new):
            return None
        return lines[0].new

    def rewrite_reflog(self, ref: str, change: Callable[[bytes], bytes | None]) -> bool:
        """Replace ``ref``'s reflog with ``change(current)`` while holding the ref's lock, so
        that no writer (gitlease's, git's or libgit2's, which append under that lock) adds a
        line meanwhile; None leaves it. The caller holds the guard. Whether it changed."""
        import pygit2

        path = self.reflog_path(ref)
        try:
            with self.repo.transaction() as tx:  # locked, never set: committing only unlocks
                self._lock_ref(tx, ref)
                current = self.read_reflog(ref)
                new = change(current)
                if new is None or new == current:
                    return False
                try:
                    mode = path.stat().st_mode & 0o777
                except FileNotFoundError:
                    return False
                atomic_write(path, new, durable=False, mode=mode)
                return True
        except (pygit2.GitError, OSError) as exc:
            raise StoreError(f"cannot rewrite the reflog of {ref}: {exc}") from None

    def delete_reflog(self, ref: str) -> None:
        """Remove the reflog of a ref that no longer exists (the caller holds the guard), and
        the directories it leaves empty. libgit2 leaves it behind when it deletes a ref."""
        path = self.reflog_path(ref)
        with suppress(FileNotFoundError):
            path.unlink()
        stop = self.git_dir / "logs" / PREFIX.rstrip("/")
        parent = path.parent
        while parent != stop and stop in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def collect_garbage(self, grace: str = GC_GRACE) -> None:
        """``git gc`` of the store: pack what is kept, drop what no ref or reflog names.

        Objects younger than ``grace`` survive, so a write in flight keeps its blob. A
        store that is not bare (a repository named as the store outright, with a project
        in it) gets ``git gc --auto`` instead: its own history is not ours to repack daily.
        """
        bare = self._git("rev-parse", "--is-bare-repository").stdout.strip() == b"true"
        args = ["gc", "--quiet", f"--prune={grace}", *([] if bare else ["--auto"])]
        result = self._git(*args)
        if result.returncode != 0:
            raise StoreError(f"git gc of the store {self.git_dir} failed: {stderr_text(result)}")

    def collect_garbage_trimmed(self, grace: str = GC_GRACE) -> None:
        """:meth:`collect_garbage` for the retention pass, which has just trimmed the claims'
        reflogs itself: git's own reflog expiry is skipped when the store keeps no other
        reflog (``gc.reflogExpire`` and ``gc.reflogExpireUnreachable`` set to ``never`` for
        the one ``git gc``; git then runs no ``reflog expire``).

        That expiry keeps nothing of the claims' anyway (:data:`_GC_KEYS`) but rewrites
        every reflog to say so, a lock and a rename a resource: most of a pass over a big
        store (docs/performance.md, ``prune``). A store that holds other reflogs (a
        repository named as the store outright) keeps git's expiry for them.
        """
        if self._only_claim_reflogs():
            settings = ("gc.reflogExpire", "gc.reflogExpireUnreachable")
            env = with_settings(git_env(self.git_dir), tuple((k, "never") for k in settings))
        else:
            env = git_env(self.git_dir)

        def git(*args: str) -> subprocess.CompletedProcess[bytes]:
            try:
                return subprocess.run(["git", *args], capture_output=True, env=env)
            except OSError as exc:
                raise StoreError(f"cannot run git: {exc}") from None

        bare = git("rev-parse", "--is-bare-repository").stdout.strip() == b"true"
        result = git("gc", "--quiet", f"--prune={grace}", *([] if bare else ["--auto"]))
        if result.returncode != 0:
            raise StoreError(f"git gc of the store {self.git_dir} failed: {stderr_text(result)}")

    def _only_claim_reflogs(self) -> bool:
        """Whether every reflog of the store is a claim's (under ``logs/refs/worklease``)."""
        logs = self.git_dir / "logs"
        try:
            top = os.listdir(logs)
            refs = os.listdir(logs / "refs") if "refs" in top else []
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return set(top) <= {"refs"} and set(refs) <= {PREFIX.split("/")[1]}

    def start_retention_if_due(self) -> None:
        """About once a day, start the retention pass in the background
        (:func:`gitlease.state.autoprune.start_if_due`). Best effort: it never fails a write."""
        from ..state import autoprune

        autoprune.start_if_due(self.git_dir, self.remote)

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        """Delete ``ref`` iff it still holds ``expected_oid`` (used by ``prune``)."""
        import pygit2

        self._sync_writes()
        try:
            with perms.shared_umask(self.git_dir), self.repo.transaction() as tx:
                self._lock_ref(tx, ref)
                current = self._read_pygit2(ref)
                if current.oid != expected_oid:
                    raise CompareAndSwapFailed(f"{ref} changed while it was being pruned")
                tx.remove(ref)
        except (pygit2.GitError, OSError) as exc:
            raise StoreError(f"cannot remove {ref} from {self.git_dir}: {exc}") from None
