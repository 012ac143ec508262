"""Permissions in a shared store, computed as git computes them.

git reads ``core.sharedRepository`` (``git init --shared=group`` writes it) and, for
each file and directory it creates in the repository, widens the mode: ``group``
adds group read and write (0660), ``all`` adds world read too (0664), an octal mode
(``0640``) is taken as the mode itself; directories get the execute bit wherever
they are readable, and the set-group-id bit, so that everything made in them stays
in the repository's group. ``umask`` (or ``false``) leaves the umask alone.

gitlease does the same for what it makes under a store: its ``worklease/`` folders,
guards, locks, marks, floors and caches, and (through :func:`shared_umask`) the
reference folders, reflogs and objects libgit2 makes during a write. Without that the
first user's private files lock every other user out of the store for good. The
stores gitlease uses are registered once, when opened (:func:`register`); nothing
else in the process (receipts, bindings, the worktree) is touched.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from . import lazy

PERM_GROUP = 0o660
PERM_EVERYBODY = 0o664

#: git dir (as text, with a trailing slash) -> git's value: > 0 widens, < 0 is exact.
_SHARED: dict[str, int] = {}

_SECTION = lazy(r"^\s*\[\s*([A-Za-z0-9.-]+)\s*(?:\"[^\"]*\")?\s*\]")
_KEY = lazy(r"^\s*sharedrepository\s*=\s*\"?([^\"\s;#]*)\"?", re.IGNORECASE)


def parse(value: str) -> int:
    """git's reading of a ``core.sharedRepository`` value (setup.c, ``git_config_perm``):
    0 for the umask, :data:`PERM_GROUP`, :data:`PERM_EVERYBODY`, or minus an exact mode."""
    text = value.strip().lower()
    if text in ("", "umask", "false", "no", "off"):
        return 0
    if text in ("group", "true", "yes", "on"):
        return PERM_GROUP
    if text in ("all", "world", "everybody"):
        return PERM_EVERYBODY
    try:
        number = int(text, 8)
    except ValueError:
        return 0
    if number in (0, 1, 2):
        return (0, PERM_GROUP, PERM_EVERYBODY)[number]
    if number & 0o600 != 0o600:
        return 0  # git refuses such a value; the umask is the safe reading here
    return -(number & 0o666)


def configured(git_dir: Path) -> int:
    """The store's own ``core.sharedRepository`` (read from its config file, no git call)."""
    try:
        text = (git_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    section = ""
    value = 0
    for line in text.splitlines():
        head = _SECTION.match(line)
        if head:
            section = head[1].lower()
            continue
        key = _KEY.match(line) if section == "core" else None
        if key:
            value = parse(key[1])
    return value


def register(git_dir: Path) -> int:
    """Note the store at ``git_dir`` and how it is shared; the value (0: not shared)."""
    shared = configured(git_dir)
    root = os.path.join(os.path.abspath(git_dir), "")
    if shared:
        _SHARED[root] = shared
    else:
        _SHARED.pop(root, None)
    return shared


def _lookup(path: Path | str) -> tuple[str, int] | None:
    if not _SHARED:
        return None
    text = os.path.abspath(path)
    for root, shared in _SHARED.items():
        if text.startswith(root):
            return root, shared
    return None


def is_shared(path: Path | str) -> bool:
    """Whether ``path`` lies in a registered store that several users share."""
    return _lookup(path) is not None


def file_mode(shared: int, mode: int) -> int:
    """git's ``calc_shared_perm`` for a file created with ``mode``."""
    tweak = -shared if shared < 0 else shared
    if not mode & stat.S_IWUSR:
        tweak &= ~0o222
    if mode & stat.S_IXUSR:
        tweak |= (tweak & 0o444) >> 2
    return (mode & ~0o777) | tweak if shared < 0 else mode | tweak


def dir_mode(shared: int, mode: int) -> int:
    """git's ``adjust_shared_perm`` for a directory: readable means searchable, and set-gid."""
    new = file_mode(shared, mode | stat.S_IXUSR)
    return (new | (new & 0o444) >> 2 | stat.S_ISGID) & 0o7777


def widen_fd(fd: int, path: Path, mode: int) -> None:
    """Give a file this process just created under a shared store its shared mode."""
    found = _lookup(path)
    if found is not None:
        os.fchmod(fd, file_mode(found[1], mode))


def widen_parents(path: Path) -> None:
    """Give the directories from ``path``'s folder up to its store their shared mode (those
    this user owns; another user's were widened by them). Best effort: never fails."""
    found = _lookup(path)
    if found is None:
        return
    root, shared = found
    current = os.path.dirname(os.path.abspath(path))
    while os.path.join(current, "").startswith(root):
        with suppress(OSError):
            st = os.stat(current, follow_symlinks=False)
            wanted = dir_mode(shared, stat.S_IMODE(st.st_mode))
            mine = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
            if mine and stat.S_IMODE(st.st_mode) != wanted:
                os.chmod(current, wanted)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent


@contextmanager
def shared_umask(git_dir: Path) -> Iterator[None]:
    """Around a write by libgit2 in a shared store: a umask that lets it make folders and
    files with the shared bits (git's set-gid folders keep them in the group)."""
    found = _lookup(os.path.join(git_dir, "x"))
    if found is None:
        yield
        return
    shared = found[1]
    widest = dir_mode(shared, 0o700) & 0o777
    old = os.umask(0)
    os.umask(old & ~widest if shared > 0 else 0o777 & ~widest)
    try:
        yield
    finally:
        os.umask(old)
