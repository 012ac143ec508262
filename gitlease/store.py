"""The store: a git repository whose refs under ``refs/worklease/`` hold claim records.

Two ways in, one store:

* Reads that only look (``show``, ``list``, ``free``, the commit hook) use one
  ``git for-each-ref`` call and never import pygit2, which costs more than the
  whole read (SPEC §10).
* Writes open the repository with pygit2 and change a ref only through
  :meth:`Store.compare_and_swap`: lock the ref, re-read it while holding the
  lock, compare with what the caller observed, set, commit.

Around every write sits the resource's *guard*, an ``flock`` on a small file
in ``<store>/worklease/guards/``. The kernel drops it when its process dies, so
a ``<ref>.lock`` file found while holding the guard was left by a process that
is gone (or by a plain git command, which holds a ref lock for milliseconds):
such a lock older than :data:`STALE_LOCK_SECONDS` is removed.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, ClassVar

from .errors import AmbiguousError, CorruptRecordError, HeldError, StoreError
from .refname import PREFIX
from .value import Value

STALE_LOCK_SECONDS = 3.0
GUARD_WAIT_SECONDS = 2.0
GUARD_ENV = "GITLEASE_GUARD"
_GC_KEY = "gc.refs/worklease/*.reflogExpireUnreachable"
_HELD = threading.local()  # guards this thread holds: taking one again is a no-op
_PACKED_REFS_SHA1 = re.compile(rb"(?:(?:#[^\n]*|\^[0-9a-f]{40}|[0-9a-f]{40} refs/\S+)?\n)*")
_PACKED_REFS_SHA256 = re.compile(rb"(?:(?:#[^\n]*|\^[0-9a-f]{64}|[0-9a-f]{64} refs/\S+)?\n)*")
#: Test-only: no guard and no ref lock around compare-and-swap (see ``_unlocked_read_then_write``).
BREAK_ENV = "GITLEASE_TESTING_BREAK_CAS"
BROKEN_FOR_TESTS = os.environ.get(BREAK_ENV) == "yes-break-safety-for-tests"


class Snapshot(Value):
    """What a ref held when it was read: its object id and the blob's bytes."""

    __slots__ = ("ref", "oid", "data", "problem", "first_seen_ms")
    _defaults: ClassVar[dict[str, Any]] = {"problem": None, "first_seen_ms": None}
    ref: str
    oid: str | None  # None: the ref does not exist
    data: bytes | None  # None: absent ref
    problem: str | None  # set when the ref exists but cannot be read as a blob
    #: Remote stores only: when this host first saw this object id at this ref (boot clock).
    first_seen_ms: int | None


class CompareAndSwapFailed(AmbiguousError):
    """The ref no longer held the record the caller decided on: nothing was written."""


class WriteOutcomeUnknown(AmbiguousError):
    """A write was interrupted and may or may not have landed (a dropped push)."""


class Location(Value):
    """Where a store is and why it was chosen (``gitlease where``)."""

    __slots__ = ("git_dir", "reason", "worktree_git_dir", "worktree")
    git_dir: Path  # the store repository's common git dir
    reason: str
    worktree_git_dir: Path | None  # the private git dir of the current worktree, if any
    worktree: Path | None  # the current worktree's top directory, if any


def state_home() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "gitlease"


def find_git_dir(start: Path) -> tuple[Path, Path | None] | None:
    """(git dir, worktree top) of the repository around ``start``, without running git."""
    env_dir = os.environ.get("GIT_DIR")
    if env_dir:
        git_dir = Path(env_dir)
        if not git_dir.is_absolute():
            git_dir = Path.cwd() / git_dir
        top = os.environ.get("GIT_WORK_TREE")
        return git_dir.resolve(), Path(top).resolve() if top else _worktree_of(git_dir.resolve())
    current = start.resolve()
    while True:
        dot_git = current / ".git"
        if dot_git.is_dir():
            return dot_git, current
        if dot_git.is_file():
            target = _read_gitfile(dot_git)
            if target is not None:
                return target, current
        if _looks_like_git_dir(current):
            return current, None
        if current.parent == current:
            return None
        current = current.parent


def _worktree_of(git_dir: Path) -> Path | None:
    if git_dir.name == ".git":
        return git_dir.parent
    gitdir_file = git_dir / "gitdir"  # linked worktree: points at <worktree>/.git
    try:
        return Path(gitdir_file.read_text().strip()).parent
    except OSError:
        return None


def _read_gitfile(path: Path) -> Path | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return (path.parent / target).resolve() if not target.is_absolute() else target


def _looks_like_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def common_dir(git_dir: Path) -> Path:
    """The common dir shared by every linked worktree of the repository."""
    env = os.environ.get("GIT_COMMON_DIR")
    if env:
        return Path(env).resolve()
    try:
        text = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    target = Path(text)
    return (git_dir / target).resolve() if not target.is_absolute() else target


def locate(store: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Location:
    """Choose the store: ``--store``, ``GITLEASE_STORE``, the enclosing repository, or per-user."""
    if cwd is None:
        try:
            cwd = Path.cwd()
        except FileNotFoundError:
            raise StoreError(
                "the current directory no longer exists (was the worktree removed?)"
            ) from None
    found = find_git_dir(cwd)
    worktree_git_dir, worktree = found if found else (None, None)
    if store is not None:
        return _explicit(Path(store), "--store", worktree_git_dir, worktree)
    env = os.environ.get("GITLEASE_STORE")
    if env:
        return _explicit(Path(env), "GITLEASE_STORE", worktree_git_dir, worktree)
    if found:
        git_dir = common_dir(found[0])
        return Location(git_dir, "the git common dir of the repository here", found[0], found[1])
    path = state_home() / "store.git"
    return Location(path, "per-user store (no git repository here)", None, None)


def _explicit(path: Path, why: str, wt_git_dir: Path | None, worktree: Path | None) -> Location:
    path = path.expanduser().resolve()
    if (path / ".git").exists():
        found = find_git_dir(path)
        assert found is not None
        path = common_dir(found[0])
    elif _looks_like_git_dir(path):
        path = common_dir(path)
    return Location(path, f"chosen by {why}", wt_git_dir, worktree)


def _ensure_exists(location: Location) -> None:
    if _looks_like_git_dir(location.git_dir):
        return
    if location.reason.startswith("per-user"):
        _init_bare(location.git_dir)
        return
    raise StoreError(f"store {location.git_dir} is missing or is not a git repository")


def _init_bare(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    result = subprocess.run(
        ["git", "init", "--bare", "--quiet", str(path)], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise StoreError(f"cannot create the per-user store {path}: {result.stderr.strip()}")


class Store:
    """A gitlease store. Cheap to make; pygit2 is imported on the first write only."""

    #: The git remote that coordinates this store across hosts (:mod:`gitlease.remote`).
    remote: str | None = None

    def __init__(self, location: Location) -> None:
        self.location = location
        self.git_dir = location.git_dir
        self._repo: Any = None

    @classmethod
    def open(
        cls,
        store: str | os.PathLike[str] | None = None,
        cwd: Path | None = None,
        *,
        remote: str | None = None,
    ) -> Store:
        """The store chosen by :func:`locate`; a :class:`~gitlease.remote.RemoteStore` when a
        remote is named (``remote``, ``GITLEASE_REMOTE``, ``git config gitlease.remote``;
        an empty name means none)."""
        location = locate(store, cwd)
        _ensure_exists(location)
        if remote == "":  # said outright (the commit hook): nothing to look up or import
            return cls(location)
        from . import remote as remote_mod

        chosen = remote_mod.resolve(location, remote)
        if chosen is not None:
            return remote_mod.RemoteStore(location, *chosen)
        return cls(location)

    def refresh(self) -> None:
        """Bring reads up to date before a decision (a remote store fetches; here: nothing)."""

    @contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Network calls made inside end within ``seconds`` (a remote store; here: none)."""
        yield

    # ----------------------------------------------------------------- reads

    def _git(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        env = dict(os.environ, GIT_DIR=str(self.git_dir))
        env.pop("GIT_WORK_TREE", None)
        env.pop("GIT_COMMON_DIR", None)
        try:
            return subprocess.run(["git", *args], input=input, capture_output=True, env=env)
        except OSError as exc:
            raise StoreError(f"cannot run git: {exc}") from None

    def read(self, ref: str) -> Snapshot:
        """The current value of one ref (pygit2 if the repository is open, else one git call)."""
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
        """One ``git cat-file --batch`` call: the ref's object, looked up directly.

        (``for-each-ref`` with a full ref name still lists the whole directory, which
        costs O(claims).) None when git cannot name an object for ``ref``.
        """
        result = self._git("cat-file", "--batch", input=ref.encode("utf-8") + b"\n")
        header, _, rest = result.stdout.partition(b"\n")
        parts = header.split(b" ")
        if result.returncode != 0 or len(parts) != 3 or not parts[2].isdigit():
            return None
        oid, kind, size = parts[0].decode(), parts[1].decode(), int(parts[2])
        if kind != "blob":
            return Snapshot(ref, oid, None, f"the ref points at a {kind}, not a blob")
        return Snapshot(ref, oid, rest[:size])

    def read_all(self, prefix: str = PREFIX) -> list[Snapshot]:
        """Every ref under ``prefix`` with its blob, in one pass over the refs."""
        return self._for_each_ref(prefix)

    def _for_each_ref(self, pattern: str) -> list[Snapshot]:
        fmt = "%(refname) %(objectname) %(objecttype) %(raw:size)%0a%(raw)"
        result = self._git("for-each-ref", f"--format={fmt}", pattern)
        if result.returncode != 0:
            if b"missing object" in result.stderr:
                return self._for_each_ref_slow(pattern)
            raise StoreError(f"cannot read the store {self.git_dir}: {stderr_text(result)}")
        snapshots = _parse_for_each_ref(result.stdout)
        if b"ignoring broken ref" in result.stderr:
            snapshots.extend(_broken_refs(result.stderr, pattern))
        return snapshots

    def _for_each_ref_slow(self, pattern: str) -> list[Snapshot]:
        """Names and ids first, then each blob: survives a missing object behind a ref."""
        result = self._git("for-each-ref", "--format=%(refname) %(objectname)", pattern)
        if result.returncode != 0:
            raise StoreError(f"cannot read the store {self.git_dir}: {stderr_text(result)}")
        snapshots = []
        for line in result.stdout.decode("utf-8", "replace").splitlines():
            ref, _, oid = line.partition(" ")
            data, problem = self.read_blob(oid)
            snapshots.append(Snapshot(ref, oid, data, problem))
        if b"ignoring broken ref" in result.stderr:
            snapshots.extend(_broken_refs(result.stderr, pattern))
        return snapshots

    def read_blob(self, oid: str) -> tuple[bytes | None, str | None]:
        """(bytes, None) for a blob, or (None, why not)."""
        if self._repo is not None:
            import pygit2

            try:
                obj = self._repo[oid]
            except (KeyError, ValueError, pygit2.GitError):
                return None, f"object {oid} is missing"
            if obj.type != pygit2.enums.ObjectType.BLOB:
                return None, f"object {oid} is a {obj.type_str}, not a blob"
            return obj.data, None
        kind = self._git("cat-file", "-t", oid)
        if kind.returncode != 0:
            return None, f"object {oid} is missing"
        if kind.stdout.strip() != b"blob":
            return None, f"object {oid} is a {kind.stdout.strip().decode()}, not a blob"
        blob = self._git("cat-file", "blob", oid)
        if blob.returncode != 0:
            return None, f"object {oid} cannot be read"
        return blob.stdout, None

    def _read_pygit2(self, ref: str) -> Snapshot:
        import pygit2

        try:
            reference = self._repo.references.get(ref)
        except (pygit2.GitError, ValueError) as exc:
            return Snapshot(ref, "0" * 40, None, f"the ref file is corrupt ({exc})")
        if reference is None:
            problem = self._packed_refs_problem(ref)
            if problem:  # libgit2 skips lines it cannot parse: "absent" may be a lie
                return Snapshot(ref, "0" * 40, None, problem)
            return Snapshot(ref, None, None)
        if reference.type != pygit2.enums.ReferenceType.DIRECT:
            return Snapshot(ref, "0" * 40, None, "the ref is symbolic")
        oid = str(reference.target)
        data, problem = self.read_blob(oid)
        return Snapshot(ref, oid, data, problem)

    def _packed_refs_problem(self, ref: str) -> str | None:
        """Why ``packed-refs`` cannot back libgit2's "``ref`` is absent", or None.

        libgit2 skips lines it cannot parse, so a damaged line could hide ``ref``:
        every line must have the repository's object id length, and no line may
        name ``ref`` at all.
        """
        try:
            data = (self.git_dir / "packed-refs").read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"packed-refs cannot be read ({exc.strerror})"
        pattern = _PACKED_REFS_SHA256 if self._sha256() else _PACKED_REFS_SHA1
        if pattern.fullmatch(data) and b" " + ref.encode() + b"\n" not in data:
            return None
        for number, line in enumerate(data.split(b"\n"), 1):
            if line and not line.startswith(b"#") and not pattern.fullmatch(line + b"\n"):
                return f"packed-refs is corrupt at line {number}"
            if line.endswith(b" " + ref.encode()):
                return f"packed-refs line {number} names {ref}, which libgit2 cannot read"
        return None

    def _sha256(self) -> bool:
        try:
            config = (self.git_dir / "config").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return "objectformat = sha256" in config.lower().replace("\t", " ")

    # ---------------------------------------------------------------- guards

    def guard_path(self, ref: str) -> Path:
        digest = hashlib.sha256(ref.encode("utf-8")).hexdigest()[:40]
        return self.git_dir / "worklease" / "guards" / digest

    @contextmanager
    def guard(self, ref: str, *, wait: float = GUARD_WAIT_SECONDS) -> Iterator[int]:
        """Hold the resource's guard (an ``flock``), or raise HELD if another process keeps it.

        Re-entrant within a thread; another thread of the same process waits like
        any other caller (each thread opens its own descriptor). The command that
        ``exec`` runs (and its descendants) work under exec's guard instead of
        waiting for it, which would deadlock: ``GITLEASE_GUARD`` lists exec's pid
        and guard (one line per enclosing exec), each counting only while that pid
        is a live ancestor. The lock itself is never
        inherited, so a killed exec frees the resource at once.
        """
        path = self.guard_path(ref)
        if BROKEN_FOR_TESTS or _held_by_ancestor(path):
            yield -1
            return
        held: dict[str, int] = _HELD.__dict__.setdefault("guards", {})
        if str(path) in held:
            yield held[str(path)]
            return
        fd = _open_guard(path)
        try:
            if not flock_polling(fd, time.monotonic() + wait):
                raise HeldError(
                    f"the guard of {ref} is held by another gitlease process "
                    "(a running exec or replace-file); try again later"
                )
            held[str(path)] = fd
            yield fd
        finally:
            held.pop(str(path), None)
            os.close(fd)  # closing drops the flock

    def clear_stale_lock(self, ref: str, *, wait: float = STALE_LOCK_SECONDS + 2) -> None:
        """Under the guard: wait out a young ``<ref>.lock``, remove one older than the limit."""
        lock = self.git_dir / (ref + ".lock")
        deadline = time.monotonic() + wait
        while True:
            try:
                age = time.time() - lock.stat().st_mtime
            except FileNotFoundError:
                return
            if age > STALE_LOCK_SECONDS or age < -1.0:  # from the future: the clock went back
                with suppress(FileNotFoundError):
                    lock.unlink()
                return
            if time.monotonic() >= deadline:
                raise AmbiguousError(f"{lock} is held by another git process; try again")
            time.sleep(0.02)

    # ---------------------------------------------------------------- writes

    @property
    def repo(self) -> Any:
        if self._repo is None:
            import pygit2

            try:
                self._repo = pygit2.Repository(str(self.git_dir))
            except pygit2.GitError as exc:
                raise StoreError(f"cannot open the store {self.git_dir}: {exc}") from None
        return self._repo

    def write_blob(self, data: bytes) -> str:
        try:
            return str(self.repo.create_blob(data))
        except Exception as exc:  # pygit2.GitError, OSError (disk full, read-only)
            raise StoreError(f"cannot write to the store {self.git_dir}: {exc}") from None

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

        repo = self.repo
        new_oids = [self.write_blob(data) for _, _, data in updates]
        ordered = sorted(zip(updates, new_oids, strict=True), key=lambda item: item[0][0])
        for (ref, _, _), _ in ordered:
            self._ensure_reflog(ref)
        if BROKEN_FOR_TESTS:
            self._unlocked_read_then_write(ordered)
            return new_oids
        try:
            with repo.transaction() as tx:
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

    def _unlocked_read_then_write(self, ordered: list[Any]) -> None:
        """The deliberately broken build (``GITLEASE_TESTING_BREAK_CAS``): compare, then set
        without the lock, so a racer can slip in between. Only the history tests use it, to
        show that the checker catches what it would let through."""
        for (ref, expected, _), _ in ordered:
            if self._read_pygit2(ref).oid != expected:
                raise CompareAndSwapFailed(f"{ref} changed")
        time.sleep(0.01)  # widen the window a racer needs
        for (ref, _, _), new_oid in ordered:
            self.repo.references.create(ref, new_oid, force=True)

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
            log.parent.mkdir(parents=True, exist_ok=True)
            log.touch()
        except OSError as exc:
            raise StoreError(f"cannot write to the store {self.git_dir}: {exc}") from None

    def _ensure_gc_config(self) -> None:
        """Keep ``git gc`` from reporting blob reflog tips as errors or expiring history early.

        Best effort: it touches history retention, never ownership, so it never fails a
        write. Racing first writers in a fresh store meet on ``config.lock``: whoever loses
        finds the setting made by the winner, or tries again for a moment.
        """
        deadline = time.monotonic() + 1.0
        while True:
            try:
                config = self.repo.config
                if _GC_KEY in config:
                    return
                config[_GC_KEY] = "never"
                return
            except Exception:
                if time.monotonic() >= deadline:
                    return  # a stale config.lock or a read-only store: the write decides
                time.sleep(0.02)

    def _floor_path(self, ref: str) -> Path:
        digest = hashlib.sha256(ref.encode("utf-8")).hexdigest()[:40]
        return self.git_dir / "worklease" / "floors" / digest

    def revision_floor(self, ref: str) -> int:
        """The last revision of a pruned resource (0 if none): revisions keep growing."""
        try:
            return int(self._floor_path(ref).read_text(encoding="ascii"))
        except (OSError, ValueError):
            return 0

    def write_revision_floor(self, ref: str, revision: int) -> None:
        """Durably remember ``revision`` before ``prune`` removes the ref (under the guard)."""
        path = self._floor_path(ref)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{revision}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        """Delete ``ref`` iff it still holds ``expected_oid`` (used by ``prune``)."""
        import pygit2

        try:
            with self.repo.transaction() as tx:
                self._lock_ref(tx, ref)
                current = self._read_pygit2(ref)
                if current.oid != expected_oid:
                    raise CompareAndSwapFailed(f"{ref} changed while it was being pruned")
                tx.remove(ref)
        except (pygit2.GitError, OSError) as exc:
            raise StoreError(f"cannot remove {ref} from {self.git_dir}: {exc}") from None


def flock_polling(fd: int, deadline: float) -> bool:
    """Take an exclusive ``flock`` on ``fd`` before the monotonic ``deadline``; False if not."""
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def open_lock_file(path: Path) -> int:
    """A descriptor of a small lock file (made 0600, with its directory), or STORE."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot open {path}: {exc.strerror}") from None


def guard_delegation(path: Path) -> str:
    """``GITLEASE_GUARD`` for this process's descendants: its guard on top of any inherited."""
    inherited = [e for e in os.environ.get(GUARD_ENV, "").split("\n") if e]
    return "\n".join([*inherited, f"{os.getpid()}:{path}"])


def _held_by_ancestor(path: Path) -> bool:
    for entry in os.environ.get(GUARD_ENV, "").split("\n"):
        pid, _, held = entry.partition(":")
        if held == str(path) and pid.isdigit() and int(pid) > 1 and _is_ancestor(int(pid)):
            return True
    return False


def _is_ancestor(pid: int) -> bool:
    """Whether ``pid`` is an ancestor of this process (read from /proc on Linux)."""
    current = os.getppid()
    for _ in range(128):
        if current == pid:
            return True
        if current <= 1:
            return False
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
            current = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def _open_guard(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, flags, 0o600)
    except FileNotFoundError:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(path, flags, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot create the guard {path}: {exc}") from None
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC):
            raise StoreError(f"cannot open the guard {path}: {exc.strerror}") from None
        raise StoreError(f"cannot open the guard {path}: {exc}") from None


def stderr_text(result: subprocess.CompletedProcess[bytes]) -> str:
    return result.stderr.decode("utf-8", "replace").strip() or f"git exited {result.returncode}"


def _parse_for_each_ref(out: bytes) -> list[Snapshot]:
    snapshots = []
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        ref, oid, kind, size = out[pos:end].decode("utf-8").split(" ")
        start = end + 1
        stop = start + int(size)
        data = out[start:stop]
        pos = stop + 1  # for-each-ref ends every entry with a newline
        if kind == "blob":
            snapshots.append(Snapshot(ref, oid, data))
        else:
            snapshots.append(Snapshot(ref, oid, None, f"the ref points at a {kind}, not a blob"))
    return snapshots


def _broken_refs(stderr: bytes, pattern: str) -> list[Snapshot]:
    broken = []
    for line in stderr.decode("utf-8", "replace").splitlines():
        if "ignoring broken ref" in line:
            ref = line.rsplit(" ", 1)[-1]
            if ref == pattern or (pattern.endswith("/") and ref.startswith(pattern)):
                broken.append(Snapshot(ref, "0" * 40, None, "the ref file is corrupt"))
    return broken
