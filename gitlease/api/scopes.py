"""Path scopes for programs: which live claims' scopes cover a path (``gitlease who``).

A claim can reserve files by path scopes (git wildmatch patterns, docs/howto/path-scopes.md).
:func:`who` is the ``gitlease who --json`` document; :func:`covering` the same as
``(path, [Claim, ...])`` pairs. Patterns themselves (``overlap``, ``matches``,
``validate``) are in :mod:`gitlease.scopes.wildmatch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import GitleaseError
from ..gitio.gitdirs import find_git_dir
from ..scopes.lookup import covering
from ..scopes.wildmatch import check_path
from ..store.base import Store

__all__ = ["bracketed_names", "covering", "folder_below_top", "who"]


def who(store: Store, paths: Sequence[str]) -> dict[str, object]:
    """``gitlease who --json``: ``{"paths": [{"path": ..., "claims": [claim, ...]}]}`` (a
    remote store's claims on a fresh fetch)."""
    for path in paths:
        check_path(path)  # (USAGE before the network)
    store.refresh()
    return {
        "paths": [
            {"path": path, "claims": [c.to_dict() for c in claims]}
            for path, claims in covering(store, paths)
        ]
    }


def folder_below_top(cwd: Path | None = None) -> str | None:
    """The folder ``cwd`` (default: the current one) is in below its worktree's top, as a
    path from the top (``src/lib``); None at the top or outside a worktree. Paths and path
    scopes are read from the top wherever a command runs: a caller below it says so."""
    here = cwd or Path.cwd()
    top = _top(here)
    try:
        below = here.resolve().relative_to(top.resolve()) if top is not None else None
    except (OSError, ValueError):
        return None
    return below.as_posix() if below is not None and below.parts else None


def _top(cwd: Path | None) -> Path | None:
    """The top folder of the worktree around ``cwd`` (default: here), or None."""
    try:
        found = find_git_dir(cwd or Path.cwd())
    except (OSError, GitleaseError):
        return None
    return found[1] if found is not None else None


def bracketed_names(patterns: Sequence[str], cwd: Path | None = None) -> list[tuple[str, str]]:
    """(pattern, the pattern as meant) for each pattern that reads a bracketed folder name
    as a class although a folder of that very name exists: ``app/[slug]/**`` covers
    ``app/s/...``, not the route folder ``app/[slug]/`` (git reads it so too; only the whole
    text is also compared literally, which ``app/[slug]/page.tsx`` enjoys). The folder is
    looked for from the worktree's top; escaped brackets are left as they are."""
    top = _top(cwd)
    if top is None:
        return []
    out = []
    for pattern in patterns:
        segments = pattern.rstrip("/").split("/")
        for i, segment in enumerate(segments[:-1]):
            if "[" not in segment or "\\" in segment:
                continue
            try:
                named = top.joinpath(*segments[: i + 1]).is_dir()
            except (OSError, ValueError):
                named = False
            if named:
                escaped = segment.replace("[", "\\[").replace("]", "\\]")
                meant = "/".join([*segments[:i], escaped, *segments[i + 1 :]])
                out.append((pattern, meant + ("/" if pattern.endswith("/") else "")))
                break
    return out
