"""The local store's writer for a process that writes once or twice and exits (the CLI):
each write is one ``git update-ref --stdin`` transaction, its blobs written as loose
objects from Python, so the process never imports pygit2, whose import alone costs more
than the rest of the write (docs/performance.md, section 3).

git makes the compare-and-swap. Given ``start``, ``update REF NEW OLD`` for each ref and
``commit``, it locks every ref (``<ref>.lock``, the lock libgit2 and every
git command take), reads each again while holding the locks, compares it with OLD, and
sets them all or none: the contract of
:meth:`gitlease.store.base.Store.compare_and_swap_many`, which the resident processes keep
through libgit2's reference transaction (:mod:`gitlease.store.transaction`). Both writers
take the same locks, so they can race on one store.

What a refusal meant is read back from the refs, never from git's words: a ref that no
longer holds what the caller saw is :class:`~gitlease.errors.CompareAndSwapFailed`; one
that still does was locked by another process for a moment (waited out, or removed once
stale, as libgit2's writer does) or git could not write it (:class:`~gitlease.errors.
StoreError`, with git's message). Only git's exit status 0 is a write that landed.

git runs holding the caller's guards (their descriptors are passed to it): should this
process be killed while git writes, the guard is not free before git is done, so that a
``<ref>.lock`` found under the guard is still surely a dead writer's
(:meth:`~gitlease.store.base.Store.clear_stale_lock`).

It serves a plain SHA-1 store of loose and packed refs (:func:`serves`); a SHA-256 store,
or one whose refs git keeps in a reftable, is written through libgit2 as before.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .._util import sharing as perms
from .._util import signals
from .._util.files import held_fds
from ..errors import CorruptRecordError, StoreError
from ..gitio import objects
from ..gitio.gitread import UNREADABLE_OID, Snapshot, git_env, stderr_text
from ..model.refname import SCOPES_INDEX_REF
from . import reflogs
from .base import still_as_seen

_ZERO = "0" * 40  # (to git: the ref must not exist)
#: How many times a write meets a ref locked by someone else before it gives up (each
#: followed by :meth:`~gitlease.store.base.Store.clear_stale_lock` and 10 ms), as libgit2's.
_LOCK_ATTEMPTS = 50
#: The settings every ``update-ref`` runs with, whatever the user's configuration says: no
#: hook (libgit2 runs none either, and a ``reference-transaction`` hook could veto a claim's
#: write); a ref lock held by another process answered at once, and ``packed-refs``'s within
#: git's default second (this writer waits out a young lock and removes a stale one itself,
#: which git never does: a user's ``-1``, wait for ever, would hang a command on a dead
#: writer's lock while it holds the resource's guard).
_SETTINGS = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.filesRefLockTimeout=0",
    "-c", "core.packedRefsTimeout=1000",
)  # fmt: skip
#: Who and when a reflog line names: the writer and the time of the write, as libgit2's
#: lines do, never a date or a name the caller's environment carries (a rebase's, a hook's),
#: by which the retention pass would judge the history's age.
_UNSET = ("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE")
#: For a durable write: git syncs each ref's new file before it renames it into place.
_DURABLE = ("-c", "core.fsync=reference", "-c", "core.fsyncMethod=fsync")


def serves(git_dir: Path) -> bool:
    """Whether this writer can write the store at ``git_dir``: SHA-1 objects, and refs in
    files (its config names no other object format or ref storage, and it has no
    ``reftable/``)."""
    try:
        config = (git_dir / "config").read_text(encoding="utf-8", errors="replace").lower()
    except OSError:
        return False
    if "objectformat" in config or "refstorage" in config:
        return False
    return not os.path.lexists(git_dir / "reftable")


class PlumbingWriter:
    """Writes of one local store through ``git update-ref``; its reads are the store's own
    (``read``: one ref as :meth:`gitlease.store.local.LocalStore.read` reads it)."""

    def __init__(
        self,
        git_dir: Path,
        clear_stale_lock: Callable[[str], None],
        read: Callable[[str], Snapshot],
    ) -> None:
        self.git_dir = git_dir
        self._clear_stale_lock = clear_stale_lock
        self._read = read
        self._durable = 0  # inside :meth:`durable`

    # ---------------------------------------------------------------- durability

    @contextmanager
    def durable(self) -> Iterator[None]:
        """See :meth:`gitlease.store.local.LocalStore.durable`: the blobs are synced with their
        folders, git syncs each ref's file before the rename, and this writer then syncs the
        refs' folders and their reflogs (git leaves those to the system)."""
        self._durable += 1
        try:
            yield
        finally:
            self._durable -= 1

    # ----------------------------------------------------------------- writes

    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob; its object id."""
        try:
            return objects.write_blob(self.git_dir, data, durable=self._durable > 0)
        except OSError as exc:
            why = exc.strerror or exc
            raise StoreError(f"cannot write to the store {self.git_dir}: {why}") from None

    def compare_and_swap_many(
        self, updates: list[tuple[str, str | None, bytes]], message: str
    ) -> list[str]:
        """All of the updates or none, in one ``update-ref`` transaction (see the module).

        A ref the caller saw as unreadable (its snapshot's id is :data:`~gitlease.gitio.
        gitread.UNREADABLE_OID`, all zeros) is refused as corrupt before git runs: git reads
        an all-zero old value as "must not exist", which is not what was seen."""
        for ref, expected, _ in updates:
            if expected == UNREADABLE_OID:
                raise CorruptRecordError(f"{ref} cannot be read; it is left as it is")
        new_oids = [self.write_blob(data) for _, _, data in updates]
        ordered = sorted(zip(updates, new_oids, strict=True), key=lambda item: item[0][0])
        for (ref, _, _), _ in ordered:
            self.ensure_reflog(ref)
        refs: list[tuple[str, str | None, str | None]] = [
            (ref, expected, new) for (ref, expected, _), new in ordered
        ]

        def rewrite() -> None:
            for _, _, data in updates:
                self.write_blob(data)

        self._transaction(refs, message, "written", rewrite)
        if self._durable > 0:
            self._sync_refs([ref for ref, _, _ in refs])
        return new_oids

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        """Delete ``ref`` iff it still holds ``expected_oid`` (used by ``prune``)."""
        self._transaction([(ref, expected_oid, None)], "", "pruned")

    def follow(self, pairs: list[tuple[str, str | None, str]], message: str) -> None:
        """Point each ref at its new object iff it still holds the expected one (a remote
        store's mirror following what its remote now holds; the caller holds the mirror's
        lock). All in one transaction; should one ref have moved meanwhile, each is then
        tried alone, and those that moved are left alone. Best effort: the next fetch
        corrects the mirror."""
        pairs = [p for p in pairs if p[1] != UNREADABLE_OID]  # (see compare_and_swap_many)
        if not pairs:
            return
        for ref, _, _ in pairs:
            if ref != SCOPES_INDEX_REF:  # (its history is no claim's: no reflog)
                with suppress(StoreError):
                    self.ensure_reflog(ref)
        lines = _lines(sorted(pairs))
        if self._run(lines, message).returncode == 0 or len(lines) == 1:
            return
        for line in lines:
            self._run([line], message)

    @contextmanager
    def locked(self, ref: str) -> Iterator[None]:
        """Hold ``ref``'s lock (``<ref>.lock``, created exclusively as git and libgit2 do) for
        the block, setting nothing. Raises ``OSError`` when it cannot be taken."""
        lock = self.git_dir / (ref + ".lock")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        for attempt in range(_LOCK_ATTEMPTS):
            try:
                with perms.shared_umask(self.git_dir):
                    os.close(os.open(lock, flags, 0o666))
                break
            except FileExistsError:
                if attempt == _LOCK_ATTEMPTS - 1:
                    raise OSError(f"{lock} is held by another git process") from None
                self._clear_stale_lock(ref)
                time.sleep(0.01)
        try:
            yield
        finally:
            with suppress(FileNotFoundError):
                lock.unlink()

    def ensure_reflog(self, ref: str) -> None:
        """git appends a line to a reflog file that exists, and makes none for refs outside
        ``refs/heads`` unless told (:func:`gitlease.store.reflogs.make_reflog`)."""
        reflogs.make_reflog(self.git_dir, ref, self._ensure_gc_config)

    # ----------------------------------------------------------------- inside

    def _transaction(
        self,
        refs: list[tuple[str, str | None, str | None]],
        message: str,
        verb: str,
        rewrite: Callable[[], None] | None = None,
    ) -> None:
        """Run the transaction until git takes it, or raise what its refusal meant. ``refs``:
        (ref, the object id expected, the one being written: None to delete); ``verb``: what
        the refs were being, for the message; ``rewrite``: writes the blobs again.

        A blob that a ``git gc`` took before its ref named it (an unreferenced object older
        than the pass's grace: a gc on a clock that runs ahead, say) is written again, and the
        transaction tried again: git refuses a ref to an object it does not have, so nothing
        landed.

        A failure after git committed (a reflog line it could not write, say: git renames
        one lock after the other) is read back as what it is: every ref as written is a write
        that landed, some of them a write that landed in part (:class:`StoreError`), never a
        lost swap, which lands nothing."""
        lines = _lines(refs)
        for attempt in range(_LOCK_ATTEMPTS):
            result = self._run(lines, message)
            if result.returncode == 0:
                return
            said = stderr_text(result)
            found = [self._read(ref) for ref, _, _ in refs]
            landed = [snap.oid == new for snap, (_, _, new) in zip(found, refs, strict=True)]
            if all(landed):
                return
            if any(landed):
                raise StoreError(
                    f"git wrote part of the update of {refs[0][0]} in {self.git_dir} and then "
                    f"failed ({said}); `gitlease verify` lists what each ref holds"
                )
            for current, (_, expected, _) in zip(found, refs, strict=True):
                still_as_seen(current, expected, verb)
            if rewrite is not None and "nonexistent object" in said and attempt < 2:
                rewrite()
                continue
            if not self._busy(said, refs) or attempt == _LOCK_ATTEMPTS - 1:
                raise StoreError(f"cannot update {refs[0][0]} in {self.git_dir}: {said}")
            for ref, _, _ in refs:  # every ref still holds what was seen: a lock held a moment
                self._clear_stale_lock(ref)
            time.sleep(0.01)

    def _busy(self, said: str, refs: list[tuple[str, str | None, str | None]]) -> bool:
        """Whether git was refused a lock another process held (it says so, in the C locale
        it runs in here; or one of the locks is there now), rather than refused the write."""
        if "File exists" in said:
            return True
        locks = [ref + ".lock" for ref, _, _ in refs] + ["packed-refs.lock"]
        return any(os.path.lexists(self.git_dir / lock) for lock in locks)

    def _run(self, lines: list[str], message: str) -> subprocess.CompletedProcess[bytes]:
        durable = _DURABLE if self._durable > 0 else ()
        logged = ["-m", message] if message else []
        # (--no-deref: a ref made symbolic meanwhile is written itself, never what it names)
        args = ["git", *_SETTINGS, *durable, "update-ref", "--no-deref", *logged, "--stdin"]
        env = git_env(self.git_dir, LC_ALL="C")  # (its words: see _busy)
        for name in _UNSET:
            env.pop(name, None)
        # (start ... commit: input cut short, by this process's death between two of its
        # writes to the pipe, is a transaction git aborts, never the lines it had read)
        body = "\n".join(["start", *lines, "commit", ""]).encode("utf-8")
        try:
            with perms.shared_umask(self.git_dir), signals.after():
                return subprocess.run(
                    args,
                    input=body,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    env=env,
                    pass_fds=held_fds(),  # (the guards: held until git is done, see held_fds)
                    # its own process group: a Ctrl-C or a supervisor's signal to the
                    # command's group is the command's to defer while the write lands
                    # (gitlease.claims.interrupts), and never stops git between two refs
                    process_group=0,
                )
        except OSError as exc:
            raise StoreError(f"cannot run git: {exc}") from None

    def _sync_refs(self, refs: list[str]) -> None:
        """After a durable write: each ref's file (git before 2.36 knows no ``core.fsync``),
        its folder (the rename), its reflog and the reflog's folder. One that is gone was
        packed meanwhile (``git pack-refs --prune``), whose file git writes."""
        try:
            for path in self._synced_paths(refs):
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            why = exc.strerror or exc
            raise StoreError(f"cannot sync the store {self.git_dir}: {why}") from None

    def _synced_paths(self, refs: list[str]) -> list[Path]:
        """The files, then the folders, that :meth:`_sync_refs` syncs."""
        files = [self.git_dir / r for r in refs] + [self.git_dir / "logs" / r for r in refs]
        return files + sorted({f.parent for f in files})

    def _ensure_gc_config(self) -> None:
        """As libgit2's writer: keep ``git gc`` from expiring the claims' reflogs on its own,
        and have reflogs written in a bare store. Best effort, never fails a write; a store
        whose config file already names them runs no git."""
        try:
            text = (self.git_dir / "config").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        flat = text.lower()
        if all(k in flat for k in ("logallrefupdates", '[gc "refs/worklease/*"]', "unreachable")):
            return
        env = git_env(self.git_dir)
        with perms.shared_umask(self.git_dir):
            settings = ((reflogs.LOG_KEY, "true"), *((k, "never") for k in reflogs.GC_KEYS))
            for key, value in settings:
                with suppress(OSError):
                    got = subprocess.run(
                        ["git", "config", "--get", key], capture_output=True, env=env
                    )
                    if got.returncode == 1:
                        subprocess.run(["git", "config", key, value], capture_output=True, env=env)


def _lines(refs: list[tuple[str, str | None, str | None]]) -> list[str]:
    """``update-ref``'s lines for (ref, the object id expected or None for absent, the new
    one or None to delete)."""
    return [
        f"delete {ref} {expected}" if new is None else f"update {ref} {new} {expected or _ZERO}"
        for ref, expected, new in refs
    ]
