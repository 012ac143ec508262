"""Which git remote coordinates a store, and keeping every caller of a store on the same one.

A store can name a git remote that decides ownership across hosts
(docs/remote.md): ``--remote``, ``GITLEASE_REMOTE``, or ``git config
gitlease.remote``. A project's shared store is used by several clones, and a
clone that coordinated through the remote while another decided alone would
make two holders. So the first caller that names a remote records its URL in
the store's own configuration, and from then on every caller of that store
uses it (a clone that names none included) or is refused, STORE, when it names
another.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ._gitread import git_env
from .errors import StoreError, UsageError
from .gitdirs import common_dir, repository_at
from .projects import normalize_url
from .value import Value

if TYPE_CHECKING:
    from .location import Location

REMOTE_ENV = "GITLEASE_REMOTE"
CONFIG_KEY = "gitlease.remote"
#: Where a shared store records the remote its first caller named (not ``gitlease.remote``,
#: so that a store that is also somebody's repository keeps that setting as its user wrote it).
RECORD_KEY = "gitlease.coordinator"
RECORDED = "recorded in the shared store: every clone of the project uses it"


class Coordinator(Value):
    """The remote a store is coordinated through: what git is given, as named, and why."""

    __slots__ = ("remote", "named", "reason")
    remote: str  # passed to git fetch/push (a URL for a project's shared store)
    named: str  # as the caller named it (a remote name, or the URL)
    reason: str  # how it was chosen, e.g. "git config gitlease.remote"


def choose(location: Location, explicit: str | None, *, record: bool = True) -> Coordinator | None:
    """The coordinator of the store at ``location``, or None for a store on this host alone.

    ``explicit``: ``--remote`` (an empty string turns the remote off, over any setting).
    ``gitlease.remote`` is read from the repository here (every scope of its configuration)
    when there is one, else from the store's. A remote name is turned into its URL through
    the repository's configuration when the store is not that repository (it has no remotes
    of its own). ``record``: a shared store records the first remote named in it, and refuses
    another (``gitlease where`` only looks).
    """
    shared = location.project is not None
    config = location.config
    named: str | None
    if explicit is not None:
        named, why = explicit, "--remote"
    elif os.environ.get(REMOTE_ENV) is not None:
        named, why = os.environ[REMOTE_ENV], REMOTE_ENV
    else:
        why = f"git config {CONFIG_KEY}"
        named = config.remote if config is not None else _configured(location.git_dir)
        if named is None and shared:
            recorded = _recorded(location.git_dir)
            return Coordinator(recorded, recorded, RECORDED) if recorded else None
    if not named:
        return None
    if named.startswith("-"):  # it is passed to git fetch and git push as an argument
        raise UsageError(f"bad remote {named!r} (from {why}): it cannot start with -")
    named = _absolute_if_path(named)
    remote = named
    if config is not None and not _is_own_repository(location):
        remote = _absolute_if_path(config.url_of(named) or named)
    if shared and record:
        _pin(location.git_dir, remote)
    return Coordinator(remote, named, why)


def _is_own_repository(location: Location) -> bool:
    """Whether the store is the repository here itself (``gitlease.store`` naming its .git)."""
    if location.worktree_git_dir is None:
        return False
    return common_dir(location.worktree_git_dir).resolve() == location.git_dir.resolve()


def same_remote(a: str, b: str) -> bool:
    """Whether two remote URLs name one repository (the https and ssh spellings, one path)."""
    if a == b:
        return True
    net_a, net_b = normalize_url(a), normalize_url(b)
    if net_a is not None or net_b is not None:
        return net_a == net_b
    repo_a, repo_b = repository_at(Path(a)), repository_at(Path(b))
    return repo_a is not None and repo_a == repo_b


def _pin(store: Path, remote: str) -> None:
    """Record ``remote`` in the shared store, or refuse one that differs from the recorded."""
    for attempt in range(20):
        recorded = _recorded(store)
        if recorded:
            if same_remote(recorded, remote):
                return
            raise StoreError(
                f"the shared store {store} is coordinated through the remote {recorded}, and "
                f"this clone names {remote}: every clone of one project must use one "
                "coordinator. Fix gitlease.remote here, or give this clone a store of its own "
                "(git config gitlease.store PATH)"
            )
        written = _git_config(store, RECORD_KEY, remote)
        if written.returncode == 0:
            return
        time.sleep(0.01 * (attempt + 1))  # a racing first caller holds config.lock
    raise StoreError(f"cannot record the remote in {store}/config: {written.stderr.strip()}")


def _recorded(store: Path) -> str:
    try:
        text = (store / "config").read_bytes()
    except FileNotFoundError:  # not made yet (`gitlease where` in a fresh clone)
        return ""
    except OSError:
        text = None  # git says why
    # ``git config --file`` reads that one file and follows no include: a key whose name
    # (case-insensitive) is nowhere in it is not set, and the common path runs no git.
    if text is not None and RECORD_KEY.rsplit(".", 1)[1].encode() not in text.lower():
        return ""
    return _git_config(store, "--get", RECORD_KEY).stdout.strip()


def _git_config(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "config", "--file", str(store / "config"), *args],
            capture_output=True,
            text=True,
            env=git_env(),
        )
    except OSError as exc:
        raise StoreError(f"cannot run git: {exc}") from None


def _configured(git_dir: Path) -> str:
    """``git config gitlease.remote`` as git resolves it (every file, includes, environment).

    Always asked (a few milliseconds): a store that missed its remote would decide
    alone, and judge other hosts' records by the rules of a single host.
    """
    env = git_env()
    try:
        result = subprocess.run(
            ["git", "--git-dir", str(git_dir), "config", "--get", CONFIG_KEY],
            capture_output=True,
            text=True,
            env=env,
        )
    except OSError as exc:
        raise StoreError(f"cannot run git: {exc}") from None
    if result.returncode not in (0, 1):  # 1: not set
        raise StoreError(f"cannot read git config {CONFIG_KEY}: {result.stderr.strip()}")
    return result.stdout.strip()


def _absolute_if_path(remote: str) -> str:
    """A relative path names the same repository for every process (``exec``'s command too)."""
    if "://" in remote or os.path.isabs(remote) or not os.path.exists(remote):
        return remote
    return os.path.abspath(remote)
