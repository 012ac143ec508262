"""Which git remote coordinates a store, and keeping every caller of a store on the same one.

A store can name a git remote that decides ownership across hosts
(docs/remote.md): ``--remote``, ``GITLEASE_REMOTE``, or ``git config
gitlease.remote``. A project's shared store is used by several clones, and a
clone that coordinated through the remote while another decided alone would
make two holders. So the store records one coordinator in its own
configuration, and from then on every caller of that store uses it (a clone that
names none included) or is refused, STORE, when it names another.

The record comes from a deliberate act, never from one clone's configuration
alone (a copied clone's ``gitlease.remote`` once pinned the coordinator for every
clone): ``gitlease remote set``, a ``--remote`` or ``GITLEASE_REMOTE`` given to a
command, or a ``gitlease.remote`` that names the project's own repository (the one
every clone's origin leads to, which names the store). A configuration naming any
other remote is refused until the coordinator is recorded. The record says who
made it and when (``gitlease where``, ``gitlease remote show``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._util.value import Value
from ..errors import StoreError, UsageError
from ..gitio.gitdirs import common_dir, repository_for
from ..gitio.gitread import git_env
from .projects import identify, normalize_url, read_config

if TYPE_CHECKING:
    import subprocess

    from .base import Location

REMOTE_ENV = "GITLEASE_REMOTE"
CONFIG_KEY = "gitlease.remote"
#: Where a shared store records the remote its first caller named (not ``gitlease.remote``,
#: so that a store that is also somebody's repository keeps that setting as its user wrote it).
RECORD_KEY = "gitlease.coordinator"
RECORDED = "recorded in the shared store: every clone of the project uses it"
#: Who recorded the coordinator (user@host, where, how) and when (RFC 3339 UTC).
RECORD_BY_KEY = "gitlease.coordinatorBy"
RECORD_AT_KEY = "gitlease.coordinatorAt"


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
            return (
                Coordinator(recorded, recorded, recorded_reason(location.git_dir))
                if recorded
                else None
            )
    if not named:
        return None
    if named.startswith("-"):  # it is passed to git fetch and git push as an argument
        raise UsageError(f"bad remote {named!r} (from {why}): it cannot start with -")
    named = _absolute_if_path(named)
    remote = named
    if config is not None and not _is_own_repository(location):
        remote = _absolute_if_path(config.url_of(named) or named)
    if shared and record:
        _pin(location, remote, named, why)
    return Coordinator(remote, named, why)


def recorded_reason(store: Path) -> str:
    """Why a clone that names no remote uses the recorded one: who recorded it, and when."""
    by = _git_config(store, "--get", RECORD_BY_KEY).stdout.strip()
    at = _git_config(store, "--get", RECORD_AT_KEY).stdout.strip()
    if not by and not at:
        return RECORDED + " (recorded by gitlease 0.2.0 or earlier: who and when unknown)"
    return f"{RECORDED}; recorded by {by or 'unknown'} at {at or 'an unknown time'}"


def recorded(store: Path) -> dict[str, str | None] | None:
    """The recorded coordinator of a shared store, with who recorded it and when, or None."""
    url = _recorded(store)
    if not url:
        return None
    by = _git_config(store, "--get", RECORD_BY_KEY).stdout.strip()
    at = _git_config(store, "--get", RECORD_AT_KEY).stdout.strip()
    return {"remote": url, "by": by or None, "at": at or None}


def project_repository(location: Location, remote: str) -> bool:
    """Whether ``remote`` is the project's own repository: the one whose identity names
    the shared store (every clone's origin leads there)."""
    if location.project is None:
        return False
    network = normalize_url(remote)
    if network is not None:
        return network == location.project
    repo = repository_for(Path(remote))
    if repo is None:
        return False
    try:
        return identify(repo, read_config(repo), repo.parent).identity == location.project
    except StoreError:
        return False


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
    repo_a, repo_b = repository_for(Path(a)), repository_for(Path(b))
    return repo_a is not None and repo_a == repo_b


def _pin(location: Location, remote: str, named: str, why: str) -> None:
    """Use ``remote`` with the shared store: it must be the recorded coordinator; with none
    recorded, record it when naming it was deliberate (:func:`choose`'s rule), else refuse."""
    store = location.git_dir
    current = _recorded(store)
    if current:
        if same_remote(current, remote):
            return
        raise StoreError(
            f"the shared store {store} is coordinated through the remote {current}, and "
            f"this clone names {remote}: every clone of one project must use one "
            "coordinator. Fix gitlease.remote here, or give this clone a store of its own "
            "(git config gitlease.store PATH)"
        )
    if why == f"git config {CONFIG_KEY}" and not project_repository(location, remote):
        raise StoreError(
            f"this clone's git config {CONFIG_KEY} names {remote}, which is not the "
            f"project's own repository ({location.project}), and the shared store {store} "
            "records no coordinator: one clone's configuration never chooses the coordinator "
            f"of every clone. Record it deliberately with `gitlease remote set {named}` (every "
            "clone then uses it), or give this clone a store of its own (git config "
            "gitlease.store PATH)"
        )
    how = {REMOTE_ENV: "GITLEASE_REMOTE", "--remote": "--remote"}.get(why, "gitlease.remote")
    record(location, remote, how=f"named by {how}")


def record(location: Location, remote: str, *, how: str) -> None:
    """Write ``remote`` as the shared store's coordinator, with who, where, how and when."""
    import getpass
    import socket

    from ..model.clock import Now, rfc3339

    store = location.git_dir
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    where = location.worktree or location.worktree_git_dir or Path.cwd()
    by = f"{user}@{socket.gethostname()} in {where} ({how})"
    when = rfc3339(Now.read().wall_ms)
    for key, value in ((RECORD_KEY, remote), (RECORD_BY_KEY, by), (RECORD_AT_KEY, when)):
        for attempt in range(20):
            written = _git_config(store, key, value)
            if written.returncode == 0:
                break
            time.sleep(0.01 * (attempt + 1))  # a racing caller holds config.lock
        else:
            raise StoreError(
                f"cannot record the remote in {store}/config: {written.stderr.strip()}"
            )


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
    import subprocess  # (a read loads subprocess only when it runs git: 1.5-2 ms a process)

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
    import subprocess

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


def set_recorded(location: Location, named: str, *, replace: bool = False) -> dict[str, Any]:
    """``gitlease remote set``: record ``named`` (a remote of the repository here, or a URL)
    as the coordinator of the project's shared store, deliberately; the record. Replacing a
    different recorded coordinator takes ``replace`` (claims held through the old one are
    then invisible to the new one: release them first)."""
    if location.project is None:
        raise UsageError(
            "only a project's shared store records a coordinator, and this store is named "
            "outright: name its remote with `git config gitlease.remote NAME` instead"
        )
    if not named or named.startswith("-"):
        raise UsageError(f"bad remote {named!r}: name a remote of this repository, or a URL")
    remote = _absolute_if_path(named)
    if location.config is not None and not _is_own_repository(location):
        remote = _absolute_if_path(location.config.url_of(remote) or remote)
    current = _recorded(location.git_dir)
    if current and not same_remote(current, remote) and not replace:
        raise StoreError(
            f"the shared store {location.git_dir} already records the coordinator {current}: "
            "every clone uses it. To move every clone to another one, release the claims "
            f"held through it, then run `gitlease remote set --replace {named}`"
        )
    record(location, remote, how="gitlease remote set")
    return recorded(location.git_dir) or {}
