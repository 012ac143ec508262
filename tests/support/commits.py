"""A real ``git commit`` of a fresh change, through whatever hooks the worktree has."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import git


def commit(worktree: Path, *extra: str, name: str = "change") -> tuple[bool, str]:
    """Commit a new change to ``name``.txt in ``worktree`` (``extra``: more ``git commit``
    arguments): whether it went through, and git's stderr. A refused change is unstaged."""
    path = worktree / f"{name}.txt"
    path.write_text(f"{time.time_ns()}\n")
    git("add", path.name, cwd=worktree)
    result = git("commit", "-qm", f"edit {name}", *extra, cwd=worktree, check=False)
    if result.returncode != 0:
        git("reset", "-q", cwd=worktree)
    return result.returncode == 0, result.stderr
