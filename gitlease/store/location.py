"""Which store a command uses, and opening it as the right class.

In a repository the store is, unless configured otherwise, a bare repository
of its own under the per-user state directory, shared by every clone and
worktree of the same project on this host (:mod:`gitlease.store.projects` names the
project); so two clones of one project never both grant one resource, and the
claims never ride along in the project's own objects, clones or mirrors
(docs/reference/store.md). Finding it costs one ``git config`` call and no
pygit2: the commit hook runs it on every commit.

:func:`open_store` then chooses the class: a :class:`~gitlease.store.remote.RemoteStore`
when a git remote coordinates the store (:mod:`gitlease.store.coordinator`), a
:class:`~gitlease.store.local.LocalStore` otherwise; both are a
:class:`~gitlease.store.base.Store`, as callers see them. The choice is made here, once,
so that the store classes differ by their methods and nothing else asks which one it
has. (The :class:`~gitlease.store.base.Location` value lives with the stores' contract,
so that no store imports this module.)
"""

from __future__ import annotations

import os
from pathlib import Path

from .._util import TYPE_CHECKING
from ..errors import StoreError, UsageError
from ..gitio.gitdirs import common_dir, find_git_dir, looks_like_git_dir, require_utf8
from ..gitio.gitread import git_env
from .base import Location, Store
from .local import LocalStore
from .projects import identify, read_config, store_name

if TYPE_CHECKING:
    from typing import Any


PER_USER_REASON = "per-user store (no git repository here)"
PROJECT_REASON = "the store shared by every clone of"


def state_home() -> Path:
    """gitlease's per-user state directory (``$XDG_STATE_HOME/gitlease``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "gitlease"


def locate(
    store: str | os.PathLike[str] | None = None, cwd: str | os.PathLike[str] | None = None
) -> Location:
    """Choose the store: ``--store``, ``GITLEASE_STORE``, ``git config gitlease.store``, the
    shared store of the project here, or the per-user store outside any repository."""
    if cwd is None:
        try:
            cwd = Path.cwd()
        except FileNotFoundError:
            raise StoreError(
                "the current directory no longer exists (was the worktree removed?)"
            ) from None
    found = find_git_dir(Path(cwd))
    wt_git_dir, worktree = found if found else (None, None)
    require_utf8(wt_git_dir)
    if store is not None:
        return _explicit(Path(store), "chosen by --store", wt_git_dir, worktree)
    env = os.environ.get("GITLEASE_STORE")
    if env:
        return _explicit(Path(env), "chosen by GITLEASE_STORE", wt_git_dir, worktree)
    if wt_git_dir is None:
        return Location(state_home() / "store.git", PER_USER_REASON, None, None)
    config = read_config(wt_git_dir)
    common = common_dir(wt_git_dir)
    base = worktree or common
    if config.store:
        path = Path(config.store).expanduser()
        path = path if path.is_absolute() else base / path
        chosen = _explicit(path, "chosen by git config gitlease.store", wt_git_dir, worktree)
        return chosen.replace(config=config)
    project = identify(common, config, base)
    git_dir = state_home() / "stores" / store_name(project.identity)
    reason = f"{PROJECT_REASON} {project.identity} on this host ({project.why})"
    return Location(git_dir, reason, wt_git_dir, worktree, project.identity, config)


def _explicit(path: Path, why: str, wt_git_dir: Path | None, worktree: Path | None) -> Location:
    path = path.expanduser().resolve()
    if (path / ".git").exists():
        found = find_git_dir(path)
        if found is not None:
            path = common_dir(found[0])
    elif looks_like_git_dir(path):
        path = common_dir(path)
    return Location(path, why, wt_git_dir, worktree)


def ensure_exists(location: Location) -> None:
    """Create a per-user or project store on first use; a store named outright must exist."""
    if looks_like_git_dir(location.git_dir):
        return
    if location.reason == PER_USER_REASON or location.project is not None:
        _init_bare(location.git_dir, location.project)
        return
    raise StoreError(f"store {location.git_dir} is missing or is not a git repository")


def _init_bare(path: Path, project: str | None) -> None:
    """``git init --bare`` beside ``path``, then one rename: racing first users meet a
    whole store or none (the loser's copy is thrown away)."""
    import shutil
    import subprocess

    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.new")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = git_env()  # run from a git hook, git init would follow the hook's GIT_DIR
        made = subprocess.run(
            # sha1 whatever GIT_DEFAULT_HASH says: libgit2 (every write) reads no sha256
            ["git", "init", "--bare", "--quiet", "--object-format=sha1", str(tmp)],
            capture_output=True,
            env=env,
        )
        if made.returncode == 0 and project is not None:
            made = subprocess.run(
                ["git", "--git-dir", str(tmp), "config", "gitlease.project", project],
                capture_output=True,
                env=env,
            )
        if made.returncode != 0:
            why = made.stderr.decode("utf-8", "replace").strip()
            raise StoreError(f"cannot create the store {path}: {why}")
        try:
            os.rename(tmp, path)
        except OSError:
            if looks_like_git_dir(path):
                return  # another caller's store, made meanwhile: use it
            if os.path.lexists(path):
                raise StoreError(
                    f"cannot create the store {path}: something that is not a git repository "
                    "is already there; move it away (gitlease makes the store), or choose "
                    "another store with `git config gitlease.store PATH`"
                ) from None
            raise
    except OSError as exc:
        raise StoreError(f"cannot create the store {path}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def open_store(
    store: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    *,
    remote: str | None = None,
    one_shot: bool = False,
) -> Store:
    """The store chosen by :func:`locate`, coordinated through a git remote if one is named.

    ``remote``: a remote name or URL; None reads ``GITLEASE_REMOTE`` and
    ``git config gitlease.remote``; an empty string means none (the commit hook
    says so outright, and then nothing is looked up or imported).
    ``one_shot``: this process writes once or twice and exits (the CLI): its writes run
    ``git update-ref`` instead of importing pygit2 (:mod:`gitlease.store.plumbing`).
    """
    location = locate(store, cwd)
    if store is not None:
        _refuse_a_project_as_its_own_store(Path(store), location)
    ensure_exists(location)
    if remote == "":
        return LocalStore(location, one_shot=one_shot)
    from . import coordinator  # (the commit check, remote="", never needs it)

    chosen = coordinator.choose(location, remote)
    if chosen is None:
        return LocalStore(location, one_shot=one_shot)
    from . import remote as remote_mod  # a remote store costs modules a local one never needs

    return remote_mod.RemoteStore(location, chosen.remote, chosen.reason, one_shot=one_shot)


def recorded_coordinator(location: Location) -> dict[str, str | None] | None:
    """The coordinator a project's shared store records (remote, by, at), or None."""
    if location.project is None:
        return None
    from . import coordinator

    found = coordinator.recorded(location.git_dir)
    if found is None:
        return None
    from .link import redact

    return {**found, "remote": redact(found["remote"] or "")}


def _refuse_a_project_as_its_own_store(given: Path, location: Location) -> None:
    """USAGE when ``given`` is a working repository (one with a worktree) whose commands use
    another store: its project's shared store, or the one its configuration names. gitlease
    0.1 kept claims in the repository itself, and code still passing the project's path
    would coordinate with nobody (the CLI, the hooks and every clone use the shared store).
    ``git config gitlease.store .`` makes the repository its own store, deliberately."""
    found = find_git_dir(given.expanduser().resolve())
    if found is not None and found[1] is None and found[0].name == ".git":
        found = (found[0], found[0].parent)  # a worktree's .git named itself
    if found is None or found[1] is None:
        return  # a bare repository, or no repository: a store named outright
    if common_dir(found[0]).resolve() != location.git_dir.resolve():
        return  # a folder inside a repository, naming another store
    saved = os.environ.pop("GITLEASE_STORE", None)
    try:
        natural = locate(cwd=found[1])
    finally:
        if saved is not None:
            os.environ["GITLEASE_STORE"] = saved
    if natural.git_dir.resolve() == location.git_dir.resolve():
        return
    raise UsageError(
        f"{found[1]} is a working repository, not a store: its commands, its hooks and its "
        f"clones use the store {natural.git_dir} ({natural.reason}). Pass the repository as "
        f"cwd (gitlease.open_store(cwd={str(found[1])!r})), or that store itself; to keep "
        "claims in the repository on purpose, set `git config gitlease.store .` there"
    )


def where(store: str | os.PathLike[str] | None = None, remote: str | None = None) -> dict[str, Any]:
    """``gitlease where``: the store a command here uses and why, this worktree's receipts,
    the remote that coordinates it (credentials redacted), and the git command that shows
    its claims. It only looks: nothing is created, and no remote is recorded."""
    import shlex

    from ..receipts.directory import default_dir
    from . import coordinator
    from .link import redact

    location = locate(store)
    found = coordinator.choose(location, remote, record=False)
    path = str(location.git_dir)
    return {
        "store": path,
        "exists": location.git_dir.is_dir(),  # (the first write creates it)
        "reason": location.reason,
        "project": location.project,
        "worktree": str(location.worktree) if location.worktree else None,
        "receipts": str(default_dir(location.worktree_git_dir, state_home())),
        "remote": redact(found.named) if found else None,
        "remote_url": redact(found.remote) if found else None,
        "remote_reason": f"chosen by {found.reason}" if found else None,
        "remote_recorded": recorded_coordinator(location),
        "inspect": f"git --git-dir={shlex.quote(path)} for-each-ref "
        "--format='%(refname) %(raw)' refs/worklease/",
    }
