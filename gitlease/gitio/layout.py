"""Where gitlease keeps its own files inside a git directory: the layout, named once.

A store's folder ``<store>/worklease/`` holds what a host keeps beside the refs (guards,
high-water marks, prune floors, the wait queue, the keepalive registry, sightings, caches and
locks); a worktree's ``<git dir>/worklease/`` holds its receipts and bindings. Each file is
listed for people in docs/reference/store.md (files); every module that reads or writes one
asks here, so that the layout is written in one place. No pygit2, no click: the hooks use it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

#: The folder gitlease owns in every git directory it uses.
FOLDER = "worklease"


def folder(git_dir: Path) -> Path:
    """``<git dir>/worklease``."""
    return git_dir / FOLDER


def ref_digest(ref: str) -> str:
    """The name of a resource's own file (guard, high-water mark, floor): 40 hex digits of the
    SHA-256 of its ref (a ref's bytes may not make a file name; a name that is not UTF-8
    keeps its bytes as surrogates)."""
    return hashlib.sha256(ref.encode("utf-8", "surrogateescape")).hexdigest()[:40]


# ---------------------------------------------------------------- the store's folder


def guards_dir(git_dir: Path) -> Path:
    return folder(git_dir) / "guards"


def highwater_dir(git_dir: Path) -> Path:
    return folder(git_dir) / "highwater"


def floors_dir(git_dir: Path) -> Path:
    return folder(git_dir) / "floors"


def waiters_dir(git_dir: Path) -> Path:
    return folder(git_dir) / "waiters"


def sightings(git_dir: Path) -> Path:
    return folder(git_dir) / "sightings"


def keepalive_registry(git_dir: Path) -> Path:
    return folder(git_dir) / "keepalive.json"


def keepalive_lock(git_dir: Path) -> Path:
    return folder(git_dir) / "keepalive.lock"


def verified_cache(git_dir: Path, uid: int) -> Path:
    """One cache a user: a user trusts only the records it verified itself."""
    return folder(git_dir) / f"verified-{uid}"


def prune_lock(git_dir: Path) -> Path:
    return folder(git_dir) / "prune.lock"


def last_prune(git_dir: Path) -> Path:
    return folder(git_dir) / "last-prune"


def mirror_lock(git_dir: Path) -> Path:
    return folder(git_dir) / "mirror.lock"


def packed_refs_checked(git_dir: Path) -> Path:
    return folder(git_dir) / "packed-refs-checked"


def scopes_index(git_dir: Path) -> Path:
    return folder(git_dir) / "scopes" / "index"


def scopes_guard(git_dir: Path) -> Path:
    return folder(git_dir) / "scopes" / "guard"


# ---------------------------------------------------------------- a worktree's folder


def receipts_dir(worktree_git_dir: Path) -> Path:
    return folder(worktree_git_dir) / "receipts"


def bindings_dir(worktree_git_dir: Path) -> Path:
    return folder(worktree_git_dir) / "bindings"


def is_worktree_file(path: Path) -> Path | None:
    """The git dir whose receipts or bindings folder holds ``path``, or None."""
    for parent in path.parents:
        if parent.name in ("receipts", "bindings") and parent.parent.name == FOLDER:
            return parent.parent.parent
    return None


def scopes_store_note(common_git_dir: Path) -> Path:
    """Where a repository notes its store's path (the commit hook's shell fast path)."""
    return folder(common_git_dir) / "scopes-store"


def agents_saved(git_dir: Path, harness: str) -> Path:
    """What ``agents install`` keeps of a harness's settings, to restore them byte for byte."""
    return folder(git_dir) / "agents" / f"{harness}.json"
