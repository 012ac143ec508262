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
from .gitdirs import repository_at
from .projects import normalize_url
from .value import Value

if TYPE_CHECKING:
    from .location import Location

REMOTE_ENV = "GITLEASE_REMOTE"
CONFIG_KEY = "gitlease.remote"
RECORDED = "recorded in the shared store: every clone of the project uses it"


class Coordinator(Value):
    """The remote a store is coordinated through: what git is given, as named, and why."""

    __slots__ = ("remote", "named", "reason")
    remote: str  # passed to git fetch/push (a URL for a project's shared store)
    named: str  # as the caller named it (a remote name, or the URL)
    reason: str  # how it was chosen, e.g. "git config gitlease.remote"


def choose(location: Location, explicit: str | None) -> Coordinator | None:
    """The coordinator of the store at ``location``, or None for a store on this host alone.

    ``explicit``: ``--remote`` (an empty string turns the remote off, over any setting).
    """
    shared = location.project is not None
    named: str | None
    if explicit is not None:
        named, why = explicit, "--remote"
    elif os.environ.get(REMOTE_ENV) is not None:
        named, why = os.environ[REMOTE_ENV], REMOTE_ENV
    elif shared:
        named = location.config.remote if location.config is not None else None
        why = f"git config {CONFIG_KEY}"
        if named is None:
            recorded = _recorded(location.git_dir)
            return Coordinator(recorded, recorded, RECORDED) if recorded else None
    else:
        named, why = _configured(location.git_dir), f"git config {CONFIG_KEY}"
    if not named:
        return None
    if named.startswith("-"):  # it is passed to git fetch and git push as an argument
        raise UsageError(f"bad remote {named!r} (from {why}): it cannot start with -")
    named = _absolute_if_path(named)
    remote = named
    if shared:  # the shared store has no remotes of its own: the clone's name becomes a URL
        config = location.config
        remote = (config.url_of(named) if config is not None else None) or remote
        remote = _absolute_if_path(remote)
        _pin(location.git_dir, remote)
    return Coordinator(remote, named, why)


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
        written = _git_config(store, CONFIG_KEY, remote)
        if written.returncode == 0:
            return
        time.sleep(0.01 * (attempt + 1))  # a racing first caller holds config.lock
    raise StoreError(f"cannot record the remote in {store}/config: {written.stderr.strip()}")


def _recorded(store: Path) -> str:
    return _git_config(store, "--get", CONFIG_KEY).stdout.strip()


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
