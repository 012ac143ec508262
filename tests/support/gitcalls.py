"""Counting the git processes a command starts: a ``git`` first on PATH that notes each call."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def counting_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A ``git`` first on PATH that counts its calls, then runs the real one: the environment
    that puts it first, and the file that gets one line (the git command's arguments) a
    call."""
    real = shutil.which("git")
    assert real
    bindir = tmp_path / "counting-bin"
    bindir.mkdir(exist_ok=True)
    calls = tmp_path / "git-calls"
    wrapper = bindir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}, calls


def counted(calls: Path) -> int:
    """The git calls noted in ``calls``, less those that refresh the cached git config of
    the store's location (made only when it is stale: gitlease/store/gitconfig.py)."""
    return len([c for c in calls.read_text().splitlines() if "--show-origin" not in c])


def edit_once_git_has_read(monkeypatch, edit) -> None:  # type: ignore[no-untyped-def]
    """Make ``edit()`` run once, right after the next ``git config`` read of the store's
    location returned (gitlease/store/gitconfig.py): an edit that overtakes the read."""
    from gitlease.store import gitconfig

    real_run = gitconfig._run
    edits: list[str] = []

    def read_then_edit(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = real_run(*args, **kwargs)
        if not edits:  # (git has read the configuration: now someone changes it)
            edits.append("done")
            edit()
        return out

    monkeypatch.setattr(gitconfig, "_run", read_then_edit)
