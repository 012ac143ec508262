"""Which store a command uses, and opening it as the right class.

Finding the store reads files only (no git process, no pygit2): the commit
hook runs it on every commit. :func:`open_store` then chooses the class: a
:class:`~gitlease.remote.RemoteStore` when a git remote coordinates the store
(see docs/remote.md), a plain :class:`~gitlease.store.Store` otherwise. The
choice is made here, once, so that the store classes differ by their methods
and nothing else asks which one it has.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import StoreError, UsageError
from .store import Store
from .value import Value

PER_USER_REASON = "per-user store (no git repository here)"
REMOTE_ENV = "GITLEASE_REMOTE"
REMOTE_CONFIG_KEY = "gitlease.remote"


class Location(Value):
    """Where a store is and why it was chosen (``gitlease where``)."""

    __slots__ = ("git_dir", "reason", "worktree_git_dir", "worktree")
    git_dir: Path  # the store repository's common git dir
    reason: str
    worktree_git_dir: Path | None  # the private git dir of the current worktree, if any
    worktree: Path | None  # the current worktree's top directory, if any


def state_home() -> Path:
    """gitlease's per-user state directory (``$XDG_STATE_HOME/gitlease``)."""
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
        if looks_like_git_dir(current):
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


def looks_like_git_dir(path: Path) -> bool:
    """Whether ``path`` has the layout of a git directory (bare repository or ``.git``)."""
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
    found = find_git_dir(Path(cwd))
    worktree_git_dir, worktree = found if found else (None, None)
    if store is not None:
        return _explicit(Path(store), "--store", worktree_git_dir, worktree)
    env = os.environ.get("GITLEASE_STORE")
    if env:
        return _explicit(Path(env), "GITLEASE_STORE", worktree_git_dir, worktree)
    if found:
        git_dir = common_dir(found[0])
        return Location(git_dir, "the git common dir of the repository here", found[0], found[1])
    return Location(state_home() / "store.git", PER_USER_REASON, None, None)


def _explicit(path: Path, why: str, wt_git_dir: Path | None, worktree: Path | None) -> Location:
    path = path.expanduser().resolve()
    if (path / ".git").exists():
        found = find_git_dir(path)
        if found is not None:
            path = common_dir(found[0])
    elif looks_like_git_dir(path):
        path = common_dir(path)
    return Location(path, f"chosen by {why}", wt_git_dir, worktree)


def ensure_exists(location: Location) -> None:
    """Create the per-user store on first use; any other missing store is STORE."""
    if looks_like_git_dir(location.git_dir):
        return
    if location.reason == PER_USER_REASON:
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


def resolve_remote(location: Location, explicit: str | None) -> tuple[str, str] | None:
    """(remote, why) for ``--remote``, ``GITLEASE_REMOTE`` or ``git config gitlease.remote``.

    An empty value turns the remote off (``--remote ''`` over a configured one).
    """
    if explicit is not None:
        chosen = (explicit, "--remote")
    elif os.environ.get(REMOTE_ENV) is not None:
        chosen = (os.environ[REMOTE_ENV], REMOTE_ENV)
    else:
        chosen = (_configured_remote(location.git_dir), f"git config {REMOTE_CONFIG_KEY}")
    if not chosen[0]:
        return None
    if chosen[0].startswith("-"):  # it is passed to git fetch and git push as an argument
        raise UsageError(f"bad remote {chosen[0]!r} (from {chosen[1]}): it cannot start with -")
    return _absolute_if_path(chosen[0]), chosen[1]


def _configured_remote(git_dir: Path) -> str:
    """``git config gitlease.remote`` as git resolves it (every file, includes, environment).

    Always asked (a few milliseconds): a store that missed its remote would decide
    alone, and judge other hosts' records by the rules of a single host.
    """
    try:
        result = subprocess.run(
            ["git", "--git-dir", str(git_dir), "config", "--get", REMOTE_CONFIG_KEY],
            capture_output=True,
            text=True,
        )
    except OSError as exc:
        raise StoreError(f"cannot run git: {exc}") from None
    if result.returncode not in (0, 1):  # 1: not set
        raise StoreError(f"cannot read git config {REMOTE_CONFIG_KEY}: {result.stderr.strip()}")
    return result.stdout.strip()


def _absolute_if_path(remote: str) -> str:
    """A relative path names the same repository for every process (``exec``'s command too)."""
    if "://" in remote or os.path.isabs(remote) or not os.path.exists(remote):
        return remote
    return os.path.abspath(remote)


def open_store(
    store: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    *,
    remote: str | None = None,
) -> Store:
    """The store chosen by :func:`locate`, coordinated through a git remote if one is named.

    ``remote``: a remote name or URL; None reads ``GITLEASE_REMOTE`` and
    ``git config gitlease.remote``; an empty string means none (the commit hook
    says so outright, and then nothing is looked up or imported).
    """
    location = locate(store, Path(cwd) if cwd is not None else None)
    ensure_exists(location)
    if remote == "":
        return Store(location)
    from . import remote as remote_mod  # a remote store costs a module the hook never needs

    chosen = resolve_remote(location, remote)
    if chosen is None:
        return Store(location)
    return remote_mod.RemoteStore(location, *chosen)
