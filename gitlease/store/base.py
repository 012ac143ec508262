"""What every store is: where it lives (:class:`Location`) and what it does (:class:`Store`).

The claims engine, the readers and the maintenance passes talk to a store through this
contract only, so that a store on this host (:class:`~gitlease.store.local.LocalStore`), one
coordinated through a git remote (:class:`~gitlease.store.remote.RemoteStore`) and the
memory-backed store of the engine's unit tests are siblings: each says how it reads a ref,
writes a blob and compares-and-swaps, and nobody asks which one it has. The model is
dulwich's ``RefsContainer``, whose ``set_if_equals`` and ``remove_if_equals`` each backend
implements under its own locks.

The contract of a write (:meth:`Store.compare_and_swap_many`): every ref named is locked,
read again *while locked*, and compared with the object id the caller decided from (None:
absent); only if every one still holds it is any of them set, all in one transaction (a
local reference transaction, one atomic push). A ref that moved raises
:class:`~gitlease.errors.CompareAndSwapFailed` and nothing lands; a ref that cannot be read
raises :class:`~gitlease.errors.CorruptRecordError` unless the caller expected exactly that.

What a host keeps beside the refs (the guards, the revision floors: :mod:`gitlease.state`)
lives in the folder ``location.git_dir`` names for every store alike, so this class keeps it.
Nothing here imports pygit2 or starts a process: the commit hook loads this module.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from .._util import TYPE_CHECKING
from .._util.files import STALE_LOCK_SECONDS, is_stale, lock_age
from .._util.value import Value
from ..errors import AmbiguousError, CompareAndSwapFailed, CorruptRecordError, StoreError
from ..gitio.gitread import Snapshot
from ..model.refname import PREFIX
from ..state import guards

if TYPE_CHECKING:
    from typing import Any, ClassVar

    from .projects import RepoConfig

#: One update of :meth:`Store.compare_and_swap_many`: (ref, expected object id or None, bytes).
Update = tuple[str, str | None, bytes]
#: Reads one blob: ``(bytes, None)``, or ``(None, why not)``.
BlobRead = Callable[[str], tuple[bytes | None, str | None]]


def still_as_seen(current: Snapshot, expected: str | None, verb: str = "written") -> None:
    """The contract's comparison, for every backend (see the module's text): ``current``, the
    ref read again under its lock, still holds ``expected`` (None: absent), or this raises
    :class:`~gitlease.errors.CorruptRecordError` (it cannot be read, and the caller expected
    otherwise) or :class:`~gitlease.errors.CompareAndSwapFailed` (it moved). ``verb``: what
    the ref was being, for the message."""
    ref = current.ref
    if current.problem and current.oid != expected:
        raise CorruptRecordError(f"{ref}: {current.problem}")
    if current.oid != expected:
        raise CompareAndSwapFailed(
            f"{ref} changed while it was being {verb} "
            f"(expected {expected or 'absent'}, found {current.oid or 'absent'})"
        )


class Location(Value):
    """Where a store is and why it was chosen (``gitlease where``).

    (Here rather than beside :func:`~gitlease.store.location.locate`, which makes the
    stores: every store holds one, and the stores import nothing that imports them.)
    """

    __slots__ = ("git_dir", "reason", "worktree_git_dir", "worktree", "project", "config")
    _defaults: ClassVar[dict[str, Any]] = {"project": None, "config": None}
    git_dir: Path  # the store repository's common git dir
    reason: str
    worktree_git_dir: Path | None  # the private git dir of the current worktree, if any
    worktree: Path | None  # the current worktree's top directory, if any
    #: The project whose clones share this store (None: a store named outright, or per-user).
    project: str | None
    #: The git configuration of the repository here, as read to choose the store.
    config: RepoConfig | None


class Store(ABC):
    """A gitlease store: refs under ``refs/worklease/`` holding claim records (blobs).

    The abstract methods are what a backend must say; the others have the meaning of a
    store whose refs are the truth itself (a remote store overrides them: its refs here
    are a mirror of what the remote decides).
    """

    #: The git remote that coordinates this store across hosts (None: none).
    remote: str | None = None
    #: Whether what a read here shows is the truth itself (a remote store's refs are a
    #: mirror that can be behind: a refusal waits for a fresh look, :meth:`recheck_refusal`).
    #: A store whose :meth:`recheck_refusal` can bring it up to date sets this False: an
    #: acquire then always looks before taking the guards, where that fresh look is made.
    reads_are_current = True
    #: The longest pause between the looks of a waiter that is first in line
    #: (:mod:`gitlease.claims.waiting`): a look here costs a ref read, so the resource goes
    #: to it soon after it frees.
    wait_poll_seconds = 0.05

    def __init__(self, location: Location) -> None:
        self.location = location
        self.git_dir = location.git_dir

    # ------------------------------------------------------------ reads (abstract)

    @abstractmethod
    def read(self, ref: str) -> Snapshot:
        """The current value of one ref: its object id and blob, or why it has none."""

    @abstractmethod
    def read_all(self, prefix: str = PREFIX) -> list[Snapshot]:
        """Every claim ref under ``prefix`` with its blob (never the scope index,
        :data:`~gitlease.model.refname.SCOPES_INDEX_REF`, which holds no claim)."""

    @abstractmethod
    def read_blob(self, oid: str) -> tuple[bytes | None, str | None]:
        """``(bytes, None)`` for a blob, or ``(None, why not)``."""

    # ------------------------------------------------------------ reads built on them

    def read_here(self, ref: str) -> Snapshot:
        """``ref`` as this host's repository holds it, stamped with no first sighting: for
        refs that hold no claim's record (the scope index). Here: :meth:`read`."""
        return self.read(ref)

    def read_many(self, refs: Sequence[str]) -> list[Snapshot]:
        """Several refs, in the order given (a backend may read them in fewer calls)."""
        return [self.read(ref) for ref in refs]

    def iter_all(
        self, prefix: str = PREFIX, batch: int = 1000, *, stamped: bool = True
    ) -> Iterator[list[Snapshot]]:
        """What :meth:`read_all` reads, a batch at a time (here: one batch). ``stamped``:
        whether a backend that stamps first sightings does (False: the caller does)."""
        yield self.read_all(prefix)

    def read_all_since(
        self, seen: Mapping[str, Snapshot], *, stamped: bool = True
    ) -> list[Snapshot]:
        """What :meth:`read_all` reads, given what an earlier call returned (a backend may
        skip the records whose object ids did not change; here: read everything)."""
        return self.read_all()

    def read_blobs(self, oids: Sequence[str]) -> dict[str, tuple[bytes | None, str | None]]:
        """Many blobs by object id, each as :meth:`read_blob` gives it."""
        return {oid: self.read_blob(oid) for oid in dict.fromkeys(oids)}

    @contextmanager
    def blob_reader(self) -> Iterator[BlobRead]:
        """A reader of many blobs in turn (walking a record chain: ``log``, ``verify``);
        a backend may keep one process for the block. Here: :meth:`read_blob`."""
        yield self.read_blob

    # ------------------------------------------------------------ writes (abstract)

    @abstractmethod
    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob (no ref moves); its object id."""

    @abstractmethod
    def compare_and_swap_many(self, updates: list[Update], message: str) -> list[str]:
        """All of the updates or none (see the module's text): each ref locked, re-read
        under the lock and compared with its expected object id, then set to a new blob
        of the bytes given. The new object ids, in the order of ``updates``. The caller
        holds the guard of every ref."""

    @abstractmethod
    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        """Delete ``ref`` iff it still holds ``expected_oid`` (``prune``), or refuse."""

    def compare_and_swap(
        self, ref: str, expected_oid: str | None, data: bytes, message: str
    ) -> str:
        """:meth:`compare_and_swap_many` of one ref."""
        return self.compare_and_swap_many([(ref, expected_oid, data)], message)[0]

    @contextmanager
    def durable(self) -> Iterator[None]:
        """The writes in this block hand out a revision (an acquire, a repair's tombstone):
        on disk before they return, so the next revision continues above it after a power
        cut (docs/reference/store.md, durability). Here: nothing to sync."""
        yield

    def prepare_write(self) -> None:  # noqa: B027 - a default most backends keep
        """Before a decision that leads to a write: make the reads under the guard see what
        the write will lock (a backend opens its writer). Here: nothing."""

    # ------------------------------------------------------------ what differs by backend

    def refresh(self) -> None:  # noqa: B027 - a default most backends keep
        """Bring reads up to date before a decision (a remote store fetches; here: nothing)."""

    @contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Network calls made inside end within ``seconds`` (a remote store; here: none)."""
        yield

    def recheck_refusal(self) -> bool:
        """Before refusing from what this store last read: bring it up to date if it can be
        behind, and say whether it did (then the caller judges again). Here the refs are
        the truth itself: False. (A store that can be behind says so with
        :attr:`reads_are_current` too.)"""
        return False

    def outcome_readable(self, error: BaseException) -> bool:
        """Whether what landed of a write that raised ``error`` can be read from the refs now.
        Here it always can: the transaction either committed or it did not."""
        return True

    def begin_command(self) -> None:  # noqa: B027 - a default most backends keep
        """A command starts with this store, which an earlier one used (a resident server
        keeps its stores open): nothing of that one carries over. Here: nothing to forget."""

    def child_env(self) -> dict[str, str]:
        """Environment for a command run under a claim, so its own gitlease calls reach this
        store the same way (a remote store names its remote; here: nothing to add)."""
        return {}

    def ensure_prunable(self) -> None:  # noqa: B027 - a default most backends keep
        """Refuse ``prune`` where its revision floors could not keep revisions increasing."""

    def repair_refusal(self, *, parsed: bool) -> str | None:
        """Why ``verify --repair`` must leave a bad record alone here, or None.

        ``parsed``: whether the record still parses (its revision is known).
        """
        return None

    # ------------------------------------------------------------ history (abstract)

    @abstractmethod
    def reflog_refs(self) -> list[str]:
        """Every ref under ``refs/worklease/`` that has a kept history (existing or not)."""

    @abstractmethod
    def read_reflog(self, ref: str) -> bytes:
        """The history of ``ref`` in git's reflog format (empty if there is none)."""

    @abstractmethod
    def reflog_landed(self, ref: str, current: str | None) -> list[str]:
        """The object ids ``ref`` held, oldest first, writes that never landed left out."""

    @abstractmethod
    def history_start(self, ref: str) -> str | None:
        """The record where ``ref``'s kept history starts if the retention pass cut it."""

    @abstractmethod
    def rewrite_reflog(self, ref: str, change: Callable[[bytes], bytes | None]) -> bool:
        """Replace ``ref``'s history with ``change(current)`` under the ref's lock (None
        leaves it); whether it changed. The caller holds the guard."""

    @abstractmethod
    def delete_reflog(self, ref: str) -> None:
        """Remove the history of a ref that no longer exists (the caller holds the guard)."""

    @abstractmethod
    def collect_garbage_trimmed(self, grace: str | None = None) -> None:
        """Drop what no ref or kept history names, older than ``grace`` (None: the store's
        default), for the retention pass, which has just trimmed the histories itself."""

    @abstractmethod
    def start_retention_if_due(self) -> None:
        """About once a day, start the retention pass in the background (best effort)."""

    # ------------------------------------------------------------ what a host keeps here

    def guard_path(self, ref: str) -> Path:
        """The guard file of ``ref`` (:mod:`gitlease.state.guards`)."""
        return guards.guard_path(self.git_dir, ref)

    @contextmanager
    def guard(
        self, ref: str, *, wait: float = guards.GUARD_WAIT_SECONDS, owned: bool = False
    ) -> Iterator[int]:
        """Hold the resource's guard, or raise HELD if another process keeps it. ``owned``:
        a write of the caller's own claim, which goes before acquirers
        (:func:`gitlease.state.guards.hold`)."""
        with guards.hold(self.guard_path(ref), ref, wait=wait, owned=owned) as fd:
            yield fd

    def clear_stale_lock(self, ref: str, *, wait: float = STALE_LOCK_SECONDS + 2) -> None:
        """Under the guard: wait out a young ``<ref>.lock``, remove one that is stale.

        A lock found while holding the guard was left by a process that is gone (or by a
        plain git command, which holds a ref lock for milliseconds)."""
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

    def revision_floor(self, ref: str) -> int:
        """The last revision of a pruned resource (0 if none): revisions keep growing."""
        from ..state import floors

        return floors.read(self.git_dir, ref)

    def write_revision_floor(self, ref: str, revision: int) -> None:
        """Durably remember ``revision`` before ``prune`` removes the ref (under the guard)."""
        from ..state import floors

        try:
            floors.write(self.git_dir, ref, revision)
        except OSError as exc:
            raise StoreError(f"cannot write the floor of {ref}: {exc.strerror or exc}") from None
