"""Finding git directories without running git: the commit hook does it on every commit.

A worktree's ``.git`` is a directory (the main worktree) or a file naming the
private git dir of a linked worktree; every worktree shares the *common* dir
(refs, objects, config), named by the ``commondir`` file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError


def find_git_dir(start: Path) -> tuple[Path, Path | None] | None:
    """(git dir, worktree top) of the repository around ``start``, without running git."""
    env_dir = os.environ.get("GIT_DIR")
    if env_dir:
        git_dir = Path(env_dir)
        if not git_dir.is_absolute():
            git_dir = Path.cwd() / git_dir
        top = os.environ.get("GIT_WORK_TREE")
        return git_dir.resolve(), Path(top).resolve() if top else worktree_of(git_dir.resolve())
    current = start.resolve()
    while True:
        dot_git = current / ".git"
        if dot_git.is_dir():
            return dot_git, current
        if dot_git.is_file():
            target = read_gitfile(dot_git)
            if target is not None:
                return target, current
        if looks_like_git_dir(current):
            return current, None
        if current.parent == current:
            return None
        current = current.parent


def worktree_of(git_dir: Path) -> Path | None:
    """The top folder of the worktree whose private git dir is ``git_dir`` (a ``.git``
    folder's parent, or where a linked worktree's ``gitdir`` file points), or None."""
    if git_dir.name == ".git":
        return git_dir.parent
    gitdir_file = git_dir / "gitdir"  # linked worktree: points at <worktree>/.git
    try:
        return Path(gitdir_file.read_text().strip()).parent
    except OSError:
        return None


def read_gitfile(path: Path) -> Path | None:
    """The git dir a ``.git`` file points at (a linked worktree, a submodule), or None."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return (path.parent / target).resolve() if not target.is_absolute() else target


def looks_like_git_dir(path: Path) -> bool:
    """Whether ``path`` has the layout of a git directory (bare repository or ``.git``)."""
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def common_dir(git_dir: Path) -> Path:
    """The common dir shared by every linked worktree of the repository."""
    env = os.environ.get("GIT_COMMON_DIR")
    if env:
        return Path(env).resolve()
    try:
        text = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    target = Path(text)
    return (git_dir / target).resolve() if not target.is_absolute() else target


def repository_at(path: Path) -> Path | None:
    """The common git dir of the repository at exactly ``path`` (bare, or its top), or None."""
    try:
        if looks_like_git_dir(path):
            return common_dir(path).resolve()
        dot_git = path / ".git"
        if dot_git.is_dir():
            return common_dir(dot_git).resolve()
        target = read_gitfile(dot_git) if dot_git.is_file() else None
        return common_dir(target).resolve() if target is not None else None
    except OSError:
        return None


#: The spellings git tries for a local repository path, in git's order (``get_repo_path`` in
#: builtin/clone.c and ``enter_repo`` in path.c, which ``git clone``, ``fetch`` and
#: ``push`` go through): ``shop`` finds ``shop/.git``, ``shop``, ``shop.git/.git``,
#: ``shop.git``, each a git directory or a ``.git`` file naming one.
_GIT_SUFFIXES = ("/.git", "", ".git/.git", ".git")


def repository_for(path: Path) -> Path | None:
    """The common git dir that git itself reaches for the local repository path ``path``
    (as a clone's ``remote.origin.url`` names it), or None: the first of git's spellings
    that is a git directory, or a ``.git`` file naming one. So ``git clone /srv/shop`` and
    ``git clone /srv/shop.git`` are one repository when git finds one for both."""
    text = str(path).rstrip("/") or "/"
    for suffix in _GIT_SUFFIXES:
        candidate = Path(text + suffix)
        try:
            if candidate.is_dir():
                if looks_like_git_dir(candidate):
                    return common_dir(candidate).resolve()
            elif candidate.is_file():
                target = read_gitfile(candidate)
                if target is not None and looks_like_git_dir(target):
                    return common_dir(target).resolve()
        except OSError:
            continue
    return None


def require_utf8(path: Path | None) -> None:
    """USAGE for a repository whose path is not UTF-8: git prints paths as bytes, and the
    store, receipts and hooks name them in UTF-8 text (refused cleanly, rather than failing
    later in the middle of a command)."""
    if path is None:
        return
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UsageError(
            f"the repository's path is not UTF-8 ({shown}): gitlease needs a UTF-8 path; "
            "rename the directory, or clone the repository to a UTF-8 path"
        ) from None
