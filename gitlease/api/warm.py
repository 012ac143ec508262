"""The stores a resident process opens, kept warm from one call to the next (docs/design.md,
the MCP server), and the watch of the git files that chose them, which the hooks' look
(:mod:`gitlease.hooks.warm`) shares. A command line pays for locating and opening a store
on every run; a process that answers many calls (``gitlease mcp``) pays again only when
what the store was chosen by has changed.

What they are read from is the git configuration of the repository here (and of the
store): the files git reads, every scope, and the repository's ``.git``. So a reading is
reused only while every one of those files has the same identity (device, inode, size,
modification and change times, or that it is missing), the environment that chooses them
is the same, and the working directory too. What git could read that such a stat cannot
vouch for makes a reading that is never reused: a configuration with an ``include`` or
``includeIf`` (the included file, or whether its condition holds, can change with no
stat here changing), a file that git reads and that is not among the files watched, a
project found by following a remote that is a path on this host (that repository's own
configuration names it). Then every call opens afresh, as the command line does.

Each thread has its own stores while it runs a call: two calls at once never share one
(a store keeps per-operation state). A call's stores go back to the pool when it ends.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..gitio.gitdirs import common_dir, find_git_dir
from ..gitio.gitread import git_env
from ..store.base import Store
from ..store.location import open_store

#: Environment variables that choose the store, its remote, or the git files read.
_ENV_PREFIXES = ("GIT_", "GITLEASE_", "XDG_")
_ENV_NAMES = ("HOME",)
#: Idle stores kept at most (one per configuration a call asked for, in practice one).
_IDLE_MAX = 4

Stamp = tuple[Any, ...]


def _stat(path: Path) -> tuple[int, ...] | None:
    """A file's identity as far as a stat tells, or None when it is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _environment() -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted(
            (k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES
        )
    )


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def config_files(git_dir: Path | None) -> list[Path]:
    """Every file git may read as the configuration of the repository at ``git_dir`` (its
    common and private git dirs), or of none: system, global, local and worktree."""
    env = os.environ
    files: list[Path] = []
    if not _truthy(env.get("GIT_CONFIG_NOSYSTEM")):
        if env.get("GIT_CONFIG_SYSTEM"):
            files.append(Path(env["GIT_CONFIG_SYSTEM"]))
        else:
            files.append(Path("/etc/gitconfig"))
            git = shutil.which("git")  # git built with another prefix reads PREFIX/etc/gitconfig
            if git is not None:
                files.append(Path(os.path.realpath(git)).parent.parent / "etc" / "gitconfig")
    if "GIT_CONFIG_GLOBAL" in env:
        if env["GIT_CONFIG_GLOBAL"]:
            files.append(Path(env["GIT_CONFIG_GLOBAL"]))
    else:
        home = env.get("HOME") or os.path.expanduser("~")
        xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files += [Path(xdg) / "git" / "config", Path(home) / ".gitconfig"]
    if git_dir is not None:
        common = common_dir(git_dir)
        files += [common / "config", common / "config.worktree", git_dir / "config.worktree"]
    return files


def _has_include(path: Path) -> bool:
    try:
        return b"include" in path.read_bytes().lower()
    except OSError:
        return False


def _origins(git_dir: Path | None) -> set[str] | None:
    """The files git read for the configuration of ``git_dir`` (real paths), or None when
    git could not say."""
    args = ["git", *(["--git-dir", str(git_dir)] if git_dir else []), "config"]
    try:
        result = subprocess.run(
            [*args, "--list", "--show-origin", "--null"],
            capture_output=True,
            env=git_env(),
            cwd=str(git_dir) if git_dir else None,
        )
    except OSError:
        return None
    if result.returncode not in (0, 1):
        return None
    found: set[str] = set()
    fields = result.stdout.decode("utf-8", "surrogateescape").split("\0")
    for origin in fields[0::2]:
        kind, _, where = origin.partition(":")
        if kind == "file" and where:
            base = str(git_dir) if git_dir else os.getcwd()
            found.add(os.path.realpath(os.path.join(base, where)))
        elif kind and kind != "command line":
            found.add(origin)  # a blob, stdin: nothing a stat here can watch
    return found


class Watch:
    """The files one reading came from, and their identities then."""

    def __init__(self, files: list[Path]) -> None:
        self.files = list(dict.fromkeys(files))
        self.stamp = tuple(_stat(f) for f in self.files)

    def holds(self) -> bool:
        return tuple(_stat(f) for f in self.files) == self.stamp

    def agrees(self, earlier: Watch) -> bool:
        """Whether every file ``earlier`` watched has the identity it had then: a reading
        made in between (and watched from these files) is of what they still hold. A file
        that only this watch has, the store's own, is written by gitlease, not edited."""
        now = dict(zip(self.files, self.stamp, strict=True))
        return all(now.get(f, s) == s for f, s in zip(earlier.files, earlier.stamp, strict=True))

    def watchable(self, git_dirs: list[Path | None]) -> bool:
        """Whether a stat of these files vouches for the whole configuration: no file has
        an include, and git read no file beyond them."""
        if any(_has_include(f) for f in self.files):
            return False
        watched = {os.path.realpath(f) for f in self.files}
        for git_dir in git_dirs:
            origins = _origins(git_dir)
            if origins is None or not origins <= watched:
                return False
        return True


def where_now() -> tuple[Stamp, Path | None]:
    """What a reading of the configuration here depends on besides its files: the working
    directory, the environment, the repository's ``.git`` (a directory, or a file naming
    a linked worktree's), and the git dir found."""
    cwd = os.getcwd()
    found = find_git_dir(Path(cwd))
    git_dir = found[0] if found else None
    dot_git = _dot_git(found[1] / ".git") if found and found[1] else None
    return (cwd, _environment(), found, dot_git), git_dir


def _dot_git(path: Path) -> tuple[int, ...] | None:
    """A ``.git`` file (a linked worktree's) by its stat; a ``.git`` directory by which one
    it is (git changes what is inside it on every commit: that is watched file by file)."""
    found = _stat(path)
    if found is None or not stat.S_ISDIR(found[-1]):
        return found
    return found[:2]


class Kept:
    """One reading kept: what it was made for (``key``), the files it came from, and it."""

    def __init__(self, key: Stamp, watch: Watch, value: Any) -> None:
        self.key = key
        self.watch = watch
        self.value = value


class WarmStores:
    """The stores the server's commands open, kept across calls (see the module's text)."""

    def __init__(self, opener: Callable[[str | None, str | None], Store] | None = None) -> None:
        self._open = opener or (lambda store, remote: open_store(store, remote=remote))
        self._lock = threading.Lock()
        self._idle: list[Kept] = []
        self._local = threading.local()
        #: How many stores were opened afresh (a test counts them).
        self.opened = 0

    def open_store(self, store: str | None, remote: str | None) -> Store:
        """The store ``open_store(store, remote=remote)`` would open now: this thread's or an
        idle one whose configuration is unchanged, else a new one."""
        now, git_dir = where_now()
        key = (store, remote, now)
        taken: list[Kept] = self._taken()
        for entry in list(taken):
            if entry.key == key:
                if entry.watch.holds():
                    return _begun(entry.value)
                taken.remove(entry)
        with self._lock:
            for entry in list(self._idle):
                if entry.key != key:
                    continue
                self._idle.remove(entry)
                if entry.watch.holds():
                    taken.append(entry)
                    return _begun(entry.value)
        seen = Watch(config_files(git_dir))  # (before the configuration is read)
        opened = self._open(store, remote)
        with self._lock:
            self.opened += 1
        kept = self._keep(key, git_dir, opened, seen)
        if kept is not None:
            taken.append(kept)
        return opened

    def _keep(self, key: Stamp, git_dir: Path | None, opened: Store, seen: Watch) -> Kept | None:
        """A reading to keep, or None when its configuration cannot be watched, or changed
        while the store was opened (``seen``: the repository's files as they were before)."""
        location = opened.location
        config = location.config
        if location.project is not None and config is not None:
            name = config.identity_remote()
            if name is not None and location.project.startswith("file://"):
                return None  # found through a local remote: its configuration counts too
        files = [*config_files(git_dir), *config_files(opened.git_dir)]
        files.append(opened.git_dir / "HEAD")  # the store itself: made again if it went
        watch = Watch(files)
        if not watch.agrees(seen) or not watch.watchable([git_dir, opened.git_dir]):
            return None
        return Kept(key, watch, opened)

    def _taken(self) -> list[Kept]:
        taken: list[Kept] | None = getattr(self._local, "taken", None)
        if taken is None:
            taken = self._local.taken = []
        return taken

    def release(self) -> None:
        """The end of this thread's call: its stores go back to the pool."""
        taken = self._taken()
        with self._lock:
            self._idle = (taken + self._idle)[:_IDLE_MAX]
        taken.clear()


def _begun(store: Any) -> Store:
    """A kept store, as a new command finds it: nothing of the last one's carried over."""
    store.begin_command()
    return store  # type: ignore[no-any-return]
