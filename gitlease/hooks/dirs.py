"""Where git looks for the hooks of each worktree of a repository, and what a hooks folder
holds besides gitlease's hook (the hook it kept, a hook manager's sidelined copy).

Where git looks depends on ``core.hooksPath``. Unset, or absolute, every worktree of the
repository shares one folder (with a global value, every repository of the user does).
Relative, it is resolved in each worktree's own top folder, so each worktree has its own
hooks (husky's ``.husky/_``, a committed ``.githooks``), and a worktree added later has
whatever its checkout brings. A folder that is part of a checkout is never written by
gitlease. See docs/howto/hook-managers.md.

No pygit2 and no click here: git itself resolves the configuration exactly as the commit will.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..gitio.gitdirs import require_utf8
from .files import is_ours

#: The hooks that carry the check: `git commit` (pre-commit; prepare-commit-msg, which
#: `--no-verify` does not skip, and which cherry-pick, revert and rebase also run), merges
#: (pre-merge-commit) and `git am` / `git rebase --apply` (applypatch-msg, pre-applypatch).
HOOK_NAMES = (
    "pre-commit",
    "prepare-commit-msg",
    "pre-merge-commit",
    "applypatch-msg",
    "pre-applypatch",
)
#: The folder, next to the hooks, where gitlease keeps the hooks it moved aside.
KEPT_DIR = "gitlease-chained"
#: Where gitlease 0.1 kept an earlier hook (``<name>.gitlease-chained``); moved on install.
OLD_KEPT_SUFFIX = ".gitlease-chained"
#: Where a hook manager moves a hook it replaces: pre-commit (which runs it), lefthook (which
#: does not).
SIDELINED = (".legacy", ".old")


def _git(*args: str, cwd: Path | None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",  # a path that is not UTF-8 keeps its bytes (os.fsdecode)
        )
    except OSError as exc:
        raise UsageError(f"cannot run git: {exc}") from None


@dataclass
class Location:
    """Where git looks for the hooks of one worktree."""

    path: Path
    configured: str | None  # the value of core.hooksPath, if set
    scope: str | None  # where it is set: local, global, system, worktree, command
    #: A folder that is part of this checkout (not ignored, or tracked): gitlease never
    #: writes there. None, or the worktree it belongs to.
    checkout: Path | None = None

    @property
    def relative(self) -> bool:
        """``core.hooksPath`` is relative: each worktree resolves it in its own top folder."""
        return self.configured is not None and not Path(self.configured).is_absolute()

    def to_dict(self) -> dict[str, object]:
        """The location as ``hooks status --json`` prints it."""
        return {
            "path": str(self.path),
            "core_hooks_path": self.configured,
            "scope": self.scope,
            "per_worktree": self.relative,
            "part_of_checkout": self.checkout is not None,
        }


@dataclass
class Repository:
    """A repository as the hooks see it: its common git folder and its worktrees."""

    common_dir: Path
    current: Path | None  # the worktree around cwd (None in a bare repository)
    cwd: Path | None = None  # where git was asked (for the worktrees, listed when needed)
    _trees: list[Path] | None = field(default=None, repr=False)

    @property
    def worktrees(self) -> list[Path]:
        """Every worktree whose folder exists, the main one first (one ``git worktree list``,
        on first use: the look at one worktree's hooks rarely needs it)."""
        if self._trees is None:
            self._trees = _worktrees(self.cwd, self.current)
        return self._trees


def repository(cwd: Path | None = None) -> Repository:
    """The repository around ``cwd``, and its worktrees; :class:`UsageError` outside one."""
    both = _git("rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel",
                cwd=cwd)  # fmt: skip
    lines = both.stdout.splitlines()
    current: Path | None
    if both.returncode == 0 and len(lines) == 2 and lines[0].strip() and lines[1].strip():
        common, current = Path(lines[0].strip()), Path(lines[1].strip())  # (in a worktree)
    else:  # a bare repository, or a git dir: no top folder (or not a repository at all)
        found = _git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=cwd)
        if found.returncode != 0 or not found.stdout.strip():
            raise UsageError(f"not inside a git repository: {found.stderr.strip()}")
        common = Path(found.stdout.strip())
        top = _git("rev-parse", "--show-toplevel", cwd=cwd)
        current = Path(top.stdout.strip()) if top.returncode == 0 and top.stdout.strip() else None
    require_utf8(common)
    return Repository(common, current, cwd)


def _worktrees(cwd: Path | None, current: Path | None) -> list[Path]:
    listed = _git("worktree", "list", "--porcelain", cwd=cwd)
    trees: list[Path] = []
    for line in listed.stdout.splitlines():
        if line.startswith("worktree "):
            trees.append(Path(line[len("worktree ") :]))
        elif line == "bare" and trees:
            trees.pop()
    trees = [t for t in trees if t.is_dir()]
    if current is not None and not any(same_path(current, t) for t in trees):
        trees.insert(0, current)
    return trees


def same_path(a: Path, b: Path) -> bool:
    """The two paths name one folder (through links)."""
    return os.path.realpath(a) == os.path.realpath(b)


def _under(path: Path, top: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(top))


def location(repo: Repository, worktree: Path | None) -> Location:
    """The hooks folder that git uses for commits made in ``worktree``."""
    where = worktree if worktree is not None else repo.common_dir
    got = _git("config", "--show-scope", "--path", "--get", "core.hooksPath", cwd=where)
    if got.returncode == 0 and "\t" in got.stdout:
        scope, value = got.stdout.rstrip("\n").split("\t", 1)
        path = Path(value)
        if not path.is_absolute():
            path = (worktree if worktree is not None else repo.common_dir) / path
        loc = Location(Path(os.path.normpath(path)), value, scope)
    else:
        loc = Location(repo.common_dir / "hooks", None, None)
    loc.checkout = _checkout_owning(loc.path, repo)
    return loc


def _checkout_owning(directory: Path, repo: Repository) -> Path | None:
    """The worktree whose checkout ``directory`` is part of (not ignored), if any."""
    if _under(directory, repo.common_dir):
        return None  # (the worktrees are not asked for: none holds it in its checkout)
    for top in repo.worktrees:
        if not _under(directory, top) or _under(directory, top / ".git"):
            continue
        if _under(directory, repo.common_dir):
            continue
        real_top = Path(os.path.realpath(top))
        rel = Path(os.path.realpath(directory)).relative_to(real_top)
        probes = [str(rel / n) for n in HOOK_NAMES] + [str(rel / KEPT_DIR / HOOK_NAMES[0])]
        got = _git("check-ignore", "--", *probes, cwd=real_top)
        ignored = set(got.stdout.splitlines())
        if not all(p in ignored for p in probes):
            return top
    return None


def locations(repo: Repository) -> list[tuple[Location, Path | None]]:
    """Each distinct hooks folder of the repository, with the first worktree using it."""
    seen: dict[str, tuple[Location, Path | None]] = {}
    trees: list[Path | None] = list(repo.worktrees) or [None]  # a bare repository: its own
    for worktree in trees:
        loc = location(repo, worktree)
        seen.setdefault(os.path.realpath(loc.path), (loc, worktree))
    return list(seen.values())


def kept_hook(directory: Path, name: str) -> Path | None:
    """The earlier hook gitlease keeps for ``name`` in ``directory`` (either layout), if any."""
    for path in (directory / KEPT_DIR / name, directory / (name + OLD_KEPT_SUFFIX)):
        if os.path.lexists(path):
            return path
    return None


def sidelined_ours(directory: Path, name: str) -> list[Path]:
    """gitlease's hooks a hook manager moved aside (``<name>.legacy``, ``<name>.old``)."""
    return [directory / (name + s) for s in SIDELINED if is_ours(directory / (name + s))]
