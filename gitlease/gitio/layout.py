"""Where gitlease keeps its own files inside a git directory: the layout, named once.

A store's folder ``<store>/worklease/`` holds what a host keeps beside the refs (guards,
high-water marks, prune floors, the wait queue, the keepalive registry, sightings, caches and
locks); a worktree's ``<git dir>/worklease/`` holds its receipts and bindings. Each file is
listed for people in docs/reference/store.md (files); every module that reads or writes one
asks here, so that the layout is written in one place. No pygit2, no click: the hooks use it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from .._util.digest import sha256

#: The folder gitlease owns in every git directory it uses.
FOLDER = "worklease"


def folder(git_dir: Path) -> Path:
    """``<git dir>/worklease``."""
    return git_dir / FOLDER


@lru_cache(maxsize=1024)  # (one operation names a resource's guard, mark and floor: one hash)
def ref_digest(ref: str) -> str:
    """The name of a resource's own file (guard, high-water mark, floor): 40 hex digits of the
    SHA-256 of its ref (a ref's bytes may not make a file name; a name that is not UTF-8
    keeps its bytes as surrogates)."""
    return sha256(ref.encode("utf-8", "surrogateescape")).hexdigest()[:40]


def _in_folder(*parts: str) -> Callable[[Path], Path]:
    """The function that names one file or folder under a git directory's ``worklease/``."""

    @lru_cache(maxsize=64)  # (an operation asks for the same few folders many times)
    def path(git_dir: Path) -> Path:
        return git_dir.joinpath(FOLDER, *parts)

    return path


# ---------------------------------------------------------------- the store's folder

guards_dir = _in_folder("guards")  # a lock file a resource, named by ref_digest
highwater_dir = _in_folder("highwater")  # the highest revision each resource reached
floors_dir = _in_folder("floors")  # the last revision of a resource whose ref was pruned
waiters_dir = _in_folder("waiters")  # the wait queue: one file a waiting caller
sightings = _in_folder("sightings")  # the boots and boot clocks this store has seen
keepalive_registry = _in_folder("keepalive.json")  # which keeper keeps which claim
keepalive_lock = _in_folder("keepalive.lock")  # taken while the registry changes
prune_lock = _in_folder("prune.lock")  # one retention pass at a time
last_prune = _in_folder("last-prune")  # when the daily pass last started
mirror_lock = _in_folder("mirror.lock")  # a remote store's mirror, fetched by one at a time
packed_refs_checked = _in_folder("packed-refs-checked")  # a packed-refs libgit2 can read
scopes_index = _in_folder("scopes", "index")  # the live path scopes, for the commit check
scopes_guard = _in_folder("scopes", "guard")  # taken while the index is rebuilt


def verified_cache(git_dir: Path, uid: int) -> Path:
    """One cache a user: a user trusts only the records it verified itself."""
    return folder(git_dir) / f"verified-{uid}"


# ---------------------------------------------------------------- a worktree's folder

receipts_dir = _in_folder("receipts")  # the secrets that prove a claim is this worktree's
bindings_dir = _in_folder("bindings")  # the claims the commit hooks check


def is_worktree_file(path: Path) -> Path | None:
    """The git dir whose receipts or bindings folder holds ``path``, or None. (On the parts
    of ``path``, which it keeps: every receipt read and written asks, and each of its
    ``parents`` would be a new path object.)"""
    parts = path.parts
    for i in range(len(parts) - 2, 0, -1):  # parts[: i + 1] is a parent, nearest first
        if parts[i] in ("receipts", "bindings") and parts[i - 1] == FOLDER:
            return Path(*parts[: i - 1]) if i > 1 else Path()
    return None


def scopes_store_note(common_git_dir: Path) -> Path:
    """Where a repository notes its store's path (the commit hook's shell fast path)."""
    return folder(common_git_dir) / "scopes-store"


def agents_saved(git_dir: Path, harness: str) -> Path:
    """What ``agents install`` keeps of a harness's settings, to restore them byte for byte."""
    return folder(git_dir) / "agents" / f"{harness}.json"
