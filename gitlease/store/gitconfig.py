"""A repository's git configuration as one ``git config`` call reads it, cached by the
identity of every file that call could have read (docs/design.md, the store's location).

Which store a repository uses depends on every configuration file git reads for it:
system, global and local files, the worktree's, every ``include.path`` and ``includeIf``
target (by git directory, branch or remote URL), and the ``GIT_CONFIG_*`` variables. The
one ``git config --null --show-origin --show-scope --get-regexp`` call that reads them
names the file each value came from and every include it followed or skipped (an include
is itself a configuration entry). The answer is kept in a per-user cache file with:

* the identity (device, inode, size, modification and change times) of each file git
  reads by default (the system files git may use, both global files, the repository's
  ``config`` and ``config.worktree``), of each file a value came from and of each include
  target, followed or not, absent ones as absent: a file edited, replaced, created or
  removed changes it;
* when an ``includeIf "onbranch:..."`` is among the entries, the content of the
  repository's ``HEAD`` (and of the rebase state git reads the branch from during a
  rebase): a branch switch changes it;
* in its name, a digest of the git directory, the keys asked for, the variables that
  change what git reads (``HOME``, ``XDG_CONFIG_HOME``, ``GIT_CONFIG*``) and the build of
  the ``git`` program found on ``PATH``.

A command whose cache entry matches in every file reads no git process. Nothing is cached
when a file changed within the last two seconds before the call (a file system's coarse
clock could hide a second edit within one tick: git's own "racy" rule), when a value came
from elsewhere than a file or the command line, when an include cannot be resolved, or
when the caller says a value may be secret (it is never copied into a cache file).

Within one process a read is also kept in memory, so that one command (a commit check
asks for ``gitlease.requireClaim``, then locates the store, then reads
``gitlease.trailers``) runs at most one ``git config`` whatever the cache file could
keep. The memory entry is checked against the same file identities before each reuse. A
read the cache file would refuse as racy is kept only when every recent file had the same
identity before git read it as after (an edit that landed while git read, or before the
files were looked at, is never kept), and reused only within those two seconds, so a
process that stays up (the MCP server, the keeper, the board) sees an edit made in the
same clock tick as its read no later than a command started at that moment would.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path

from .._util import lazy
from .._util.digest import sha256
from .._util.files import atomic_write
from ..errors import StoreError
from ..gitio.gitread import git_env

#: One entry: (scope, origin, key, value); origin as git shows it (``file:/path``); value None
#: for a key written without ``=`` (a boolean's true).
Entry = tuple[str, str, str, str | None]
#: Entries that name other files git may read (followed or not).
_INCLUDES = r"include\..*|includeif\..*"
#: A file changed more recently than this before the read is not trusted to a cache.
RACY_SECONDS = 2.0
_VERSION = 1
_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_GLOBAL", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")  # fmt: skip
_ENV_NUMBERED = lazy(r"GIT_CONFIG_(KEY|VALUE)_\d+")
#: Where git reads the branch from for ``onbranch:`` while a rebase runs.
_BRANCH_FILES = ("HEAD", "rebase-merge/head-name", "rebase-apply/head-name")

Ident = list[int] | None


def cache_dir() -> Path:
    """The per-user cache of configuration reads (``$XDG_CACHE_HOME/gitlease/gitconfig``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gitlease" / "gitconfig"


def read(
    git_dir: Path,
    pattern: str,
    *,
    keep: Callable[[Entry], bool] = lambda entry: True,
    secret: Callable[[Entry], bool] = lambda entry: False,
) -> list[Entry]:
    """The entries of the repository at ``git_dir`` whose key matches ``pattern`` (a
    ``git config --get-regexp`` pattern, anchored) and that ``keep`` keeps, in git's
    order: from the cache when nothing it depends on changed, else from one ``git config``
    call (STORE if git cannot read the configuration). ``secret(entry)``: true when that
    entry must never be written to a cache file (a credential): nothing is cached then."""
    git_dir = Path(os.path.abspath(git_dir))
    git, digest = _key(git_dir, pattern)
    held = _MEMORY.get(digest)
    if held is not None and _still_valid(held, git_dir):
        return [e for e in held.entries if keep(e)]
    path = cache_dir() / f"{digest}.json"
    cached = _lookup(path, digest, git_dir)
    if cached is not None:  # (what ``keep`` kept when it was written: same caller, same key)
        return cached
    # (what git reads by default, as it was before git read it: a file edited while git
    # read it, or just after, is told apart from one that was not by comparing the two)
    known = {name: _ident(name) for name in _default_files(git_dir, git)}
    before, read_at = time.time_ns(), time.monotonic_ns()
    entries = _run(git_dir, pattern, git_env(), git)
    wanted = re.compile(pattern)
    matching = [e for e in entries if wanted.fullmatch(e[2])]
    found = [e for e in matching if keep(e)]
    files = _files(git_dir, git, entries)
    if files is None:
        return found
    idents = [(name, _ident(name)) for name in files]
    onbranch = any(k.lower().startswith("includeif.onbranch:") for _, _, k, _ in entries)
    branch = _branch_state(git_dir) if onbranch else None
    racy = _racy(idents, before)
    if not racy:
        _MEMORY[digest] = _Held(idents, branch, matching, None)
    elif branch is None and all(known.get(name, [-1]) == ident for name, ident in racy):
        # every recent file was the same before git read it as after: no edit in between
        _MEMORY[digest] = _Held(idents, branch, matching, read_at)
    if not racy and not any(secret(e) for e in found):
        with suppress(OSError):  # a cache that cannot be written is no cache
            _store(path, digest, idents, branch, found)
    return found


# ------------------------------------------------------------------ reading the cache


class _Held:
    """One read kept in this process's memory: what the cache file would hold, and, for a
    read too recent to trust beyond its moment, when it was made (on the monotonic clock: a
    wall clock set back must not stretch the window)."""

    __slots__ = ("idents", "branch", "entries", "racy_since_ns")

    def __init__(
        self,
        idents: list[tuple[str, Ident]],
        branch: list[str | None] | None,
        entries: list[Entry],
        racy_since_ns: int | None,
    ) -> None:
        self.idents = idents
        self.branch = branch
        self.entries = entries
        self.racy_since_ns = racy_since_ns


#: This process's reads, by the same digest as the cache files.
_MEMORY: dict[str, _Held] = {}


def _still_valid(held: _Held, git_dir: Path) -> bool:
    since = held.racy_since_ns
    if since is not None and time.monotonic_ns() - since >= int(RACY_SECONDS * 1e9):
        return False
    if any(_ident(name) != ident for name, ident in held.idents):
        return False
    return held.branch is None or _branch_state(git_dir) == held.branch


def _lookup(path: Path, digest: str, git_dir: Path) -> list[Entry] | None:
    try:
        doc = json.loads(path.read_bytes())
        if doc.get("v") != _VERSION or doc.get("digest") != digest:
            return None
        for name, ident in doc["files"]:
            if _ident(name) != ident:
                return None
        branch = doc.get("branch")
        if branch is not None and _branch_state(git_dir) != branch:
            return None
        return [
            (str(s), str(o), str(k), None if v is None else str(v)) for s, o, k, v in doc["entries"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _ident(path: str) -> Ident:
    """What changes when a file is edited, replaced, created or removed (None: absent)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return [-1]  # (unreadable: it never matches a cache made while it could be read)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode]


def _branch_state(git_dir: Path) -> list[str | None]:
    out: list[str | None] = []
    for name in _BRANCH_FILES:
        try:
            out.append((git_dir / name).read_bytes().decode("utf-8", "replace"))
        except FileNotFoundError:
            out.append(None)
        except OSError:
            out.append("?")
    return out


# ------------------------------------------------------------------ reading git


def _run(git_dir: Path, pattern: str, env: dict[str, str], git: str | None) -> list[Entry]:
    """One ``git config`` call: the ``git`` the read's key names (:func:`_key`), so that the
    answer kept is the one that git gives."""
    args = [git or "git", "--git-dir", str(git_dir), "config", "--null", "--show-origin"]
    args += ["--show-scope", "--get-regexp", f"^({pattern.strip('^$')}|{_INCLUDES})$"]
    try:
        import subprocess  # (a command whose configuration is cached runs none)

        result = subprocess.run(args, capture_output=True, env=env)
    except OSError as exc:
        raise StoreError(f"cannot run git: {exc}") from None
    if result.returncode not in (0, 1):  # 1: none of the keys is set
        why = result.stderr.decode("utf-8", "replace").strip()
        raise StoreError(f"cannot read the git configuration of {git_dir}: {why}")
    fields = result.stdout.decode("utf-8", "replace").split("\0")
    out: list[Entry] = []
    for scope, origin, entry in zip(fields[0::3], fields[1::3], fields[2::3], strict=False):
        key, newline, value = entry.partition("\n")
        out.append((scope, origin, key, value if newline else None))
    return out


# ------------------------------------------------------------------ writing the cache


def _racy(idents: list[tuple[str, Ident]], before_ns: int) -> list[tuple[str, Ident]]:
    """The files changed too recently (or unreadable) to be told apart from a next edit."""
    racy = before_ns - int(RACY_SECONDS * 1e9)
    return [
        (name, ident)
        for name, ident in idents
        if ident is not None and (len(ident) < 6 or max(ident[3], ident[4]) >= racy)
    ]


def _store(
    path: Path,
    digest: str,
    idents: list[tuple[str, Ident]],
    branch: list[str | None] | None,
    found: list[Entry],
) -> None:
    doc = {"v": _VERSION, "digest": digest, "files": idents, "branch": branch, "entries": found}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, json.dumps(doc).encode("utf-8"), durable=False, mode=0o600)


def _files(git_dir: Path, git: str | None, entries: list[Entry]) -> list[str] | None:
    """Every file the call read or could read, or None when one cannot be named."""
    names = dict.fromkeys(_default_files(git_dir, git))
    for scope, origin, key, value in entries:
        if origin.startswith("file:"):
            source = origin[len("file:") :]
            names[source] = None
        elif scope != "command":
            return None  # a blob or standard input: nothing to stat
        else:
            source = None
        lowered = key.lower()
        if (lowered == "include.path" or lowered.startswith("includeif.")) and lowered.endswith(
            ".path"
        ):
            target = _include_target(value or "", source)
            if target is None:
                return None
            names[target] = None
    return list(names)


def _default_files(git_dir: Path, git: str | None) -> Iterable[str]:
    """The files git reads without being told: system, global, the repository's own."""
    env = os.environ
    home = os.path.expanduser("~")
    if env.get("GIT_CONFIG_SYSTEM"):
        yield env["GIT_CONFIG_SYSTEM"]
    else:
        yield "/etc/gitconfig"
        if git is not None:  # a git installed under another prefix reads <prefix>/etc/gitconfig
            bin_dir = os.path.dirname(os.path.realpath(git))
            if os.path.basename(bin_dir) == "git-core":  # <prefix>/lib/git-core, libexec
                bin_dir = os.path.dirname(bin_dir)
            yield os.path.join(os.path.dirname(bin_dir), "etc", "gitconfig")
    if env.get("GIT_CONFIG_GLOBAL"):
        yield env["GIT_CONFIG_GLOBAL"]
    else:
        xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        yield os.path.join(xdg, "git", "config")
        yield os.path.join(home, ".gitconfig")
    common = _common_dir(git_dir)
    yield str(common / "config")
    yield str(common / "config.worktree")
    yield str(git_dir / "config.worktree")
    yield str(git_dir / "commondir")


def _common_dir(git_dir: Path) -> Path:
    try:
        text = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    path = Path(text)
    return path if path.is_absolute() else Path(os.path.normpath(git_dir / path))


def _include_target(value: str, source: str | None) -> str | None:
    """The file an include names: ``~/`` is the home directory, a relative path is relative
    to the including file's directory (None: relative, from the command line)."""
    if value.startswith("~/") or value == "~":
        return os.path.expanduser(value)
    if os.path.isabs(value):
        return value
    if source is None:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(source)), value))


# ------------------------------------------------------------------ the key


def _key(git_dir: Path, pattern: str) -> tuple[str | None, str]:
    """The ``git`` that ``PATH`` names and the digest of a read (:func:`_digest`), remembered
    in this process: what the digest is computed from is checked each time (the variables,
    and the git build by one ``stat``); only the walk along ``PATH`` is trusted for
    :data:`RACY_SECONDS`, so a git installed earlier on the same ``PATH`` while a process
    stays up (the MCP server, the board) is found as late as a file edit would be. Not
    remembered: a walk along a ``PATH`` with a relative folder (it depends on the working
    directory), a git gone since, and a digest of ``GIT_CONFIG_COUNT`` or
    ``GIT_CONFIG_PARAMETERS`` variables (their values may be credentials: they are hashed
    and forgotten, as for the cache file)."""
    env = os.environ
    path, exec_path = env.get("PATH", os.defpath), env.get("GIT_EXEC_PATH")
    now = time.monotonic_ns()
    walked = _WHICH.get((path, exec_path))
    if walked is None or now - walked[1] >= int(RACY_SECONDS * 1e9):
        walked = (_which_git(), now)
        if all(os.path.isabs(folder) for folder in path.split(os.pathsep)):
            if len(_WHICH) > 16:
                _WHICH.clear()
            _WHICH[(path, exec_path)] = walked
    git = walked[0]
    build = _build(git)
    if git is not None and build is None:  # (gone since the walk: walk again)
        _WHICH.pop((path, exec_path), None)
        git = _which_git()
        build = _build(git)
    named = _named_env()
    if "GIT_CONFIG_COUNT" in env or "GIT_CONFIG_PARAMETERS" in env:
        return git, _digest(git_dir, pattern, build, named)
    memo = (str(git_dir), pattern, git, None if build is None else tuple(build), named)
    digest = _DIGESTS.get(memo)
    if digest is None:
        if len(_DIGESTS) > 64:
            _DIGESTS.clear()
        digest = _DIGESTS[memo] = _digest(git_dir, pattern, build, named)
    return git, digest


#: This process's walks along ``PATH`` for git: (PATH, GIT_EXEC_PATH) -> (git, when).
_WHICH: dict[tuple[str, str | None], tuple[str | None, int]] = {}
#: This process's digests, by everything each is computed from (the variables' values
#: included, which the environment of this process holds anyway; never a numbered
#: ``GIT_CONFIG_*`` value or ``GIT_CONFIG_PARAMETERS``: see :func:`_key`).
_DIGESTS: dict[tuple[object, ...], str] = {}


def _which_git() -> str | None:
    """The ``git`` that ``PATH`` names (in a hook, git's exec path comes first: one look)."""
    path = os.environ.get("PATH", os.defpath)
    exec_path = os.environ.get("GIT_EXEC_PATH")
    if exec_path and path.split(os.pathsep, 1)[0] == exec_path:
        candidate = os.path.join(exec_path, "git")
        if os.access(candidate, os.X_OK):
            return candidate
    for folder in path.split(os.pathsep):
        candidate = os.path.join(folder or ".", "git")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None


def _build(git: str | None) -> list[int] | None:
    """Which git build runs (its size and time: a hook's PATH starts with git's exec path,
    where the same build is a copy of its own)."""
    ident = _ident(git) if git else None
    return None if ident is None or len(ident) < 6 else [ident[2], ident[3]]


def _named_env() -> tuple[tuple[str, str], ...]:
    """The variables that change what git reads, sorted by name (the numbered
    ``GIT_CONFIG_KEY_n``/``VALUE_n`` too when ``GIT_CONFIG_COUNT`` or ``GIT_CONFIG_PARAMETERS``
    says they count)."""
    env = os.environ
    named = {k: env[k] for k in _ENV if k in env}
    if "GIT_CONFIG_COUNT" in env or "GIT_CONFIG_PARAMETERS" in env:
        named.update((k, v) for k, v in env.items() if _ENV_NUMBERED.fullmatch(k))
    return tuple(sorted(named.items()))


def _digest(
    git_dir: Path, pattern: str, build: list[int] | None, named: tuple[tuple[str, str], ...]
) -> str:
    """A digest of what the answer depends on besides files (values never stored: a
    ``GIT_CONFIG_VALUE_n`` may be a secret). ``build``: :func:`_build` of the git that reads;
    ``named``: :func:`_named_env`."""
    key = {
        "v": _VERSION,
        "git_dir": str(git_dir),
        "pattern": pattern,
        "env": named,
        "git": build,
        "home": os.path.expanduser("~"),
    }
    return sha256(json.dumps(key).encode("utf-8", "surrogateescape")).hexdigest()[:32]
