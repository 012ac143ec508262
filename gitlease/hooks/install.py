"""The commit hooks: put gitlease's check next to the hooks a repository already runs.

Every worktree is looked at (:mod:`gitlease.hooks.dirs` finds where git looks for its hooks,
:mod:`gitlease.hooks.inspect` what runs there), and this module answers one question for each:
does ``git commit`` here run gitlease's check? See docs/howto/hook-managers.md for what each
configuration checks.

Installing writes gitlease's hook program under each hook name, in every hooks folder of
the repository that gitlease may write: never into a folder that is part of a checkout (a
committed ``.githooks``), where it prints the line to add instead. A hook already in place
moves to ``gitlease-chained/<name>`` in the same folder and still runs first, as git would
have run it (see ``gitlease/resources/gitlease-hook``). A hook manager's reinstall that replaces or
sidelines gitlease's hook (pre-commit keeps it as ``<name>.legacy``, lefthook as
``<name>.old``, husky overwrites it) is recognised: ``status`` says so, and ``install``
puts things back in order. ``uninstall`` removes only gitlease's files and restores the
hooks it kept, byte for byte.

No pygit2 and no click here: the library uses git itself, which resolves the configuration
exactly as the commit will.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StoreError, UsageError
from . import files as _hookfiles
from .dirs import (
    HOOK_NAMES,
    KEPT_DIR,
    OLD_KEPT_SUFFIX,
    Location,
    Repository,
    kept_hook,
    location,
    locations,
    repository,
    same_path,
    sidelined_ours,
)
from .files import is_ours, read_head
from .inspect import CHECK_COMMAND, HookState, executable, inspect_hook, manager_of, same_kind

_PLACEHOLDER = "gitlease_python='python3'"
_DOCS = "docs/howto/hook-managers.md"


def hook_source(python: str | None = None) -> str:
    """The hook program from the project's ``hooks/`` folder, pinned to this Python."""
    return _hookfiles.program(
        "gitlease-hook", _PLACEHOLDER, "gitlease_python", python or sys.executable
    )


def _note_store(cwd: Path | None) -> None:
    """Note the repository's store for the hook's fast path (path scopes: gitlease.scopes)."""
    from ..errors import GitleaseError
    from ..scopes.index import note_store
    from ..store.location import locate

    try:
        where = locate(cwd=cwd)
    except GitleaseError:
        return
    note_store(where.worktree_git_dir, where.git_dir)


def snippet(name: str) -> str:
    """The line that runs the check from a hook script someone else owns."""
    return f'{CHECK_COMMAND} {name} "$@" || exit $?'


@dataclass
class WorktreeReport:
    """One worktree: its hooks folder, each hook's state, what keeps the check out, the fix."""

    worktree: Path | None
    location: Location
    hooks: list[HookState]
    problems: list[str]
    fix: str | None

    @property
    def in_effect(self) -> bool:
        """Commits here are checked: nothing is in the way of the check."""
        return not self.problems

    def to_dict(self) -> dict[str, object]:
        """The worktree as ``hooks status --json`` prints it."""
        return {
            "worktree": str(self.worktree) if self.worktree else None,
            "in_effect": self.in_effect,
            "hooks_dir": self.location.to_dict(),
            "hooks": [h.to_dict() for h in self.hooks],
            "problems": list(self.problems),
            "fix": self.fix,
        }


@dataclass
class Report:
    """The check's state in this worktree (which decides the exit code) and in all others."""

    here: WorktreeReport
    worktrees: list[WorktreeReport]
    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def in_effect(self) -> bool:
        """Commits in this worktree are checked (this decides the exit code)."""
        return self.here.in_effect

    @property
    def everywhere(self) -> bool:
        """Commits are checked in every worktree of the repository."""
        return all(w.in_effect for w in self.worktrees)

    def to_dict(self) -> dict[str, object]:
        """The report as ``hooks status --json`` prints it (docs/reference/json.md)."""
        doc = self.here.to_dict()
        doc["worktrees"] = [
            {
                "worktree": str(w.worktree) if w.worktree else None,
                "hooks_dir": str(w.location.path),
                "in_effect": w.in_effect,
                "problems": list(w.problems),
                "fix": w.fix,
            }
            for w in self.worktrees
        ]
        doc["changed"] = list(self.changed)
        doc["notes"] = list(self.notes)
        return doc


_COMMANDS = {
    "pre-commit": "git commit",
    "prepare-commit-msg": "git commit --no-verify, cherry-pick, revert, rebase",
    "pre-merge-commit": "git merge",
    "applypatch-msg": "git am, git rebase --apply",
    "pre-applypatch": "git am, git rebase --apply",
}


def _assess(
    repo: Repository, worktree: Path | None, source: str, loc: Location | None = None
) -> WorktreeReport:
    loc = loc if loc is not None else location(repo, worktree)
    hooks = [inspect_hook(loc, n, worktree, source) for n in HOOK_NAMES]
    problems: list[str] = []
    fix: str | None = None
    unchecked = [h for h in hooks if not h.checked or h.state in ("outdated", "broken")]
    if unchecked and loc.relative and not loc.path.is_dir():
        problems.append(
            f"this worktree has no hooks folder {loc.configured} (core.hooksPath is relative, "
            f"so each worktree has its own): git runs no hook here and commits are not checked"
        )
        fix = (
            "run your hook manager's install in this worktree"
            + (" (husky: `npx husky`)" if loc.path.name == "_" else "")
            + ", then `gitlease hooks install`"
        )
        return WorktreeReport(worktree, loc, hooks, problems, fix)
    groups: dict[str, list[HookState]] = {}
    for h in unchecked:
        groups.setdefault(h.detail.replace(h.name, "NAME"), []).append(h)
    for detail, group in groups.items():
        names = ", ".join(h.name for h in group)
        commands = ", ".join(dict.fromkeys(", ".join(_COMMANDS[h.name] for h in group).split(", ")))
        what = detail.replace("NAME", names) if len(group) == 1 else detail
        problems.append(f"{names} in {loc.path}: {what} (not checked: {commands})")
    if unchecked:
        if loc.checkout is not None:
            names = ", ".join(h.name for h in unchecked)
            fix = (
                f"{loc.path} is part of the checkout, so gitlease does not change it: add the "
                f"line `{snippet('NAME')}` to its {names} hooks (NAME the hook's own name) and "
                f"commit them; see {_DOCS}"
            )
        elif loc.path.name == "_" and (loc.path / "h").is_file():
            fix = (
                "run `gitlease hooks install`, or (recommended with husky) add the line "
                f"`{snippet('NAME')}` to .husky/NAME for each of "
                f"{', '.join(h.name for h in unchecked)}; see {_DOCS}"
            )
        else:
            fix = "run `gitlease hooks install`"
    return WorktreeReport(worktree, loc, hooks, problems, fix)


def _notes(repo: Repository, reports: list[WorktreeReport]) -> list[str]:
    notes: list[str] = []
    for scope in sorted({r.location.scope for r in reports if r.location.scope}):
        if scope in ("global", "system"):
            paths = sorted({str(r.location.path) for r in reports if r.location.scope == scope})
            notes.append(
                f"core.hooksPath is set in your {scope} git configuration: {', '.join(paths)} "
                "serves every repository of this user, so installing or removing gitlease's "
                "hooks there acts on all of them (each checks only worktrees bound to a claim)"
            )
    if any(r.location.path.name == "_" and (r.location.path / "h").is_file() for r in reports):
        notes.append(
            "husky rewrites .husky/_ on every `npx husky` (and `npm install`), and a new worktree "
            f"has none: the line `{snippet('NAME')}` in .husky/NAME keeps the check; see {_DOCS}"
        )
    if any(r.location.relative for r in reports):
        notes.append(
            "core.hooksPath is relative, so a worktree added later has only the hooks its "
            "checkout brings: `gitlease acquire` there says whether its commits are checked"
        )
    return notes


def _report(repo: Repository, changed: list[str] | None = None) -> Report:
    source = hook_source()
    reports = [_assess(repo, w, source) for w in repo.worktrees] or [_assess(repo, None, source)]
    here = reports[0]
    if repo.current is not None:
        for r in reports:
            if r.worktree is not None and same_path(r.worktree, repo.current):
                here = r
    return Report(here, reports, list(changed or []), _notes(repo, reports))


def status(cwd: Path | None = None) -> Report:
    """Whether commits are checked, in this worktree and in every other one."""
    return _report(repository(cwd))


def commit_check(cwd: Path | None = None) -> WorktreeReport | None:
    """Whether commits from the worktree around ``cwd`` run the check (None: no worktree).

    ``acquire`` and ``bind`` ask this, and warn when a claim is bound where commits are not
    checked.
    """
    try:
        repo = repository(cwd)
    except UsageError:
        return None
    if repo.current is None:
        return None
    return _assess(repo, repo.current, hook_source())


def assess(repo: Repository, loc: Location) -> WorktreeReport:
    """:func:`commit_check` of ``repo``'s current worktree, whose hooks folder is ``loc``
    (found by :func:`gitlease.hooks.dirs.location`): a resident server keeps those two
    while the configuration is unchanged, and looks at what the folder holds every time."""
    return _assess(repo, repo.current, hook_source(), loc)


def _install_into(
    loc: Location, top: Path | None, source: str, changed: list[str], refused: list[str]
) -> None:
    directory = loc.path
    directory.mkdir(parents=True, exist_ok=True)
    kept_dir = directory / KEPT_DIR
    for name in HOOK_NAMES:
        path = directory / name
        kept = kept_dir / name
        old = directory / (name + OLD_KEPT_SUFFIX)
        if os.path.lexists(old) and not os.path.lexists(kept):
            kept_dir.mkdir(exist_ok=True)
            os.rename(old, kept)
        front = read_head(path) if path.is_file() else None
        kind = manager_of(front)
        sidelined = sidelined_ours(directory, name)
        if kind == "gitlease":
            for stale in sidelined:
                stale.unlink()
            if front != source or not executable(path):
                _hookfiles.write(path, source)
                changed.append(f"updated {path}")
            continue
        if front is not None and inspect_hook(loc, name, top, source).state == "native":
            continue  # someone else's hook that runs the check already: leave it alone
        if sidelined:
            # A manager replaced gitlease's hook: put back what it would have sidelined.
            for stale in sidelined:
                stale.unlink()
            changed.append(f"removed gitlease's hook from {sidelined[0]}")
            if os.path.lexists(kept):
                if os.path.lexists(path) and same_kind(kept, path):
                    kept.unlink()
                else:
                    os.rename(kept, sidelined[0])
                    changed.append(f"moved the hook gitlease kept back to {sidelined[0]}")
        if os.path.lexists(path):
            if os.path.lexists(kept):
                if not same_kind(kept, path):
                    refused.append(
                        f"{path} is not gitlease's, and gitlease already keeps an earlier hook "
                        f"at {kept}: delete the one you no longer need, then install again"
                    )
                    continue
                kept.unlink()
            kept_dir.mkdir(exist_ok=True)
            os.rename(path, kept)
            changed.append(f"kept {kind or 'the earlier'} hook {name} as {kept}")
        _hookfiles.write(path, source)
        changed.append(f"installed {path}")


def install(cwd: Path | None = None) -> Report:
    """Make the check run in every worktree where gitlease may write the hooks."""
    repo = repository(cwd)
    source = hook_source()
    changed: list[str] = []
    refused: list[str] = []
    _note_store(cwd)
    for loc, top in locations(repo):
        if loc.checkout is not None:
            continue  # part of a checkout: the report names the line to add instead
        if loc.relative and not loc.path.is_dir():
            continue  # a worktree without its hooks folder: its manager makes it
        try:
            _install_into(loc, top, source, changed, refused)
        except OSError as exc:
            raise StoreError(f"cannot install hooks into {loc.path}: {exc}") from None
    report = _report(repo, changed)
    report.notes = refused + report.notes
    return report


def uninstall(cwd: Path | None = None) -> Report:
    """Remove gitlease's hooks everywhere and restore the hooks they kept."""
    repo = repository(cwd)
    changed: list[str] = []
    for loc, _top in locations(repo):
        if not loc.path.is_dir():
            continue
        try:
            _uninstall_from(loc.path, changed)
        except OSError as exc:
            raise StoreError(f"cannot uninstall hooks from {loc.path}: {exc}") from None
    return _report(repo, changed)


def _uninstall_from(directory: Path, changed: list[str]) -> None:
    for name in HOOK_NAMES:
        path = directory / name
        kept = kept_hook(directory, name)
        if is_ours(path):
            path.unlink()
            changed.append(f"removed {path}")
            if kept is not None:
                os.rename(kept, path)
                changed.append(f"restored the earlier hook {path}")
            continue
        sidelined = sidelined_ours(directory, name)
        for stale in sidelined:
            stale.unlink()
            changed.append(f"removed gitlease's hook from {stale}")
        if kept is None:
            continue
        if sidelined:
            if os.path.lexists(path) and same_kind(kept, path):
                kept.unlink()  # the manager in front reinstalled its own script over it
            else:
                os.rename(kept, sidelined[0])  # where the manager would have put it
                changed.append(f"restored the earlier hook {sidelined[0]}")
        elif not os.path.lexists(path):
            os.rename(kept, path)
            changed.append(f"restored the earlier hook {path}")
        elif same_kind(kept, path):
            kept.unlink()  # a manager rewrote the hook: its current script stays
        else:
            changed.append(f"left {kept}: it is not gitlease's, and nothing runs it")
    with contextlib.suppress(OSError):
        (directory / KEPT_DIR).rmdir()
