"""The commit hooks: put gitlease's check next to the hooks a repository already runs.

Where git looks for hooks depends on ``core.hooksPath``. Unset, or absolute, every worktree
of the repository shares one folder (with a global value, every repository of the user
does). Relative, it is resolved in each worktree's own top folder, so each worktree has its
own hooks (husky's ``.husky/_``, a committed ``.githooks``), and a worktree added later has
whatever its checkout brings. This module therefore looks at every worktree, and answers
one question for each: does ``git commit`` here run gitlease's check? See
docs/howto/hook-managers.md for what each configuration checks.

Installing writes gitlease's hook program under each hook name, in every hooks folder of
the repository that gitlease may write: never into a folder that is part of a checkout (a
committed ``.githooks``), where it prints the line to add instead. A hook already in place
moves to ``gitlease-chained/<name>`` in the same folder and still runs first, as git would
have run it (see ``hooks/gitlease-hook``). A hook manager's reinstall that replaces or
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
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import _hookfiles
from ._hookfiles import has_marker, is_ours, read_head
from .errors import StoreError, UsageError

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
KEPT_DIR = "gitlease-chained"
#: Where gitlease 0.1 kept an earlier hook (``<name>.gitlease-chained``); moved on install.
OLD_KEPT_SUFFIX = ".gitlease-chained"
#: Where a hook manager moves a hook it replaces: pre-commit (which runs it), lefthook (which
#: does not).
SIDELINED = (".legacy", ".old")
#: The command that runs the check from a manager's configuration or a hook script.
CHECK_COMMAND = "gitlease-hook"
_CHECK_WORDS = ("gitlease-hook", "gitlease.hookcheck", "gitlease-claim")
_PLACEHOLDER = "gitlease_python='python3'"
_DOCS = "docs/howto/hook-managers.md"


def hook_source(python: str | None = None) -> str:
    """The hook program from the project's ``hooks/`` folder, pinned to this Python."""
    return _hookfiles.program(
        "gitlease-hook", _PLACEHOLDER, "gitlease_python", python or sys.executable
    )


def snippet(name: str) -> str:
    """The line that runs the check from a hook script someone else owns."""
    return f'{CHECK_COMMAND} {name} "$@" || exit $?'


# ------------------------------------------------------------------ finding the hooks folders


def _git(*args: str, cwd: Path | None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
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
    worktrees: list[Path]  # every worktree whose folder exists, the main one first
    current: Path | None  # the worktree around cwd (None in a bare repository)


def repository(cwd: Path | None = None) -> Repository:
    """The repository around ``cwd``, and its worktrees; :class:`UsageError` outside one."""
    found = _git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=cwd)
    if found.returncode != 0 or not found.stdout.strip():
        raise UsageError(f"not inside a git repository: {found.stderr.strip()}")
    common = Path(found.stdout.strip())
    top = _git("rev-parse", "--show-toplevel", cwd=cwd)
    current = Path(top.stdout.strip()) if top.returncode == 0 and top.stdout.strip() else None
    listed = _git("worktree", "list", "--porcelain", cwd=cwd)
    trees: list[Path] = []
    for line in listed.stdout.splitlines():
        if line.startswith("worktree "):
            trees.append(Path(line[len("worktree ") :]))
        elif line == "bare" and trees:
            trees.pop()
    trees = [t for t in trees if t.is_dir()]
    if current is not None and not any(_same(current, t) for t in trees):
        trees.insert(0, current)
    return Repository(common, trees, current)


def _same(a: Path, b: Path) -> bool:
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


# ------------------------------------------------------------------ what each hook does


def manager_of(text: str | None) -> str | None:
    """Whose hook script this is, when it is a hook manager's (or gitlease's)."""
    if text is None:
        return None
    if has_marker(text):
        return "gitlease"
    if "File generated by pre-commit" in text:
        return "pre-commit"
    if "call_lefthook" in text or "lefthook run" in text:
        return "lefthook"
    if re.search(r'dirname[^\n]*"\$0"\)/h"', text) or "husky.sh" in text:
        return "husky"
    return None


def _mentions_check(text: str | None) -> bool:
    if text is None:
        return False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        if any(word in stripped for word in _CHECK_WORDS):
            return True
    return False


def _lefthook_runs_check(top: Path, name: str) -> bool:
    """A lefthook configuration in ``top`` with a command for ``name`` that runs the check."""
    for base in ("lefthook", ".lefthook", ".config/lefthook"):
        for variant in ("", "-local"):
            for ext in (".yml", ".yaml"):
                text = read_head(top / f"{base}{variant}{ext}")
                if text is None:
                    continue
                section: list[str] = []
                inside = False
                for line in text.splitlines():
                    if line and not line[0].isspace() and not line.startswith("#"):
                        inside = re.match(rf"['\"]?{re.escape(name)}['\"]?\s*:", line) is not None
                        continue
                    if inside:
                        section.append(line)
                if _mentions_check("\n".join(section)):
                    return True
    return False


def _pre_commit_runs_check(top: Path, script: str, name: str) -> bool:
    """The pre-commit framework's configuration runs gitlease's check in stage ``name``."""
    found = re.search(r"--config=([^\s)'\"]+)", script)
    config = top / (found.group(1) if found else ".pre-commit-config.yaml")
    text = read_head(config)
    if not _mentions_check(text):
        return False
    try:
        import yaml  # type: ignore[import-untyped]  # pre-commit's own dependency
    except ImportError:
        return True  # it names the check; which stages cannot be read without PyYAML
    try:
        doc = yaml.safe_load(text or "")
    except Exception:
        return False
    aliases = {"commit": "pre-commit", "merge-commit": "pre-merge-commit"}
    aliases["prepare-commit"] = "prepare-commit-msg"
    for repo in (doc or {}).get("repos", []) if isinstance(doc, dict) else []:
        for hook in repo.get("hooks", []) if isinstance(repo, dict) else []:
            if not isinstance(hook, dict) or not _mentions_check(
                f"{hook.get('id', '')} {hook.get('entry', '')}"
            ):
                continue
            stages = hook.get("stages")
            if stages is None and repo.get("repo") not in ("local", "meta"):
                stages = ["pre-commit", "prepare-commit-msg", "pre-merge-commit"]
            if stages is None or name in {aliases.get(s, s) for s in stages}:
                return True
    return False


def _pinned_python(text: str) -> str | None:
    found = re.search(r"^gitlease_python=(.*)$", text, re.MULTILINE)
    if not found:
        return None
    try:
        words = shlex.split(found.group(1))
    except ValueError:
        return None
    return words[0] if words else None


def _program(text: str) -> str:
    """The hook program without the line that pins its Python."""
    return re.sub(r"^gitlease_python=.*$", "", text, count=1, flags=re.MULTILINE)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@dataclass
class HookState:
    """One hook name in one hooks folder, and whether git running it runs the check."""

    name: str
    path: Path
    #: installed (gitlease's, current), outdated (gitlease's, another version), broken
    #: (gitlease's, cannot run), native (someone else's hook that runs the check), sidelined
    #: (a hook manager replaced gitlease's), foreign (someone else's, no check), missing.
    state: str
    checked: bool
    manager: str | None = None  # whose hook git runs here (gitlease, husky, lefthook, pre-commit)
    kept: Path | None = None  # the earlier hook that gitlease's runs first
    detail: str = ""

    @property
    def chained(self) -> bool:
        """gitlease keeps an earlier hook here, which its own runs first."""
        return self.kept is not None

    def to_dict(self) -> dict[str, object]:
        """The hook as ``hooks status --json`` prints it."""
        return {
            "hook": self.name,
            "path": str(self.path),
            "state": self.state,
            "checked": self.checked,
            "manager": self.manager,
            "chained": self.chained,
            "kept": str(self.kept) if self.kept else None,
            "detail": self.detail,
        }


def _kept(directory: Path, name: str) -> Path | None:
    for path in (directory / KEPT_DIR / name, directory / (name + OLD_KEPT_SUFFIX)):
        if os.path.lexists(path):
            return path
    return None


def _sidelined_ours(directory: Path, name: str) -> list[Path]:
    return [directory / (name + s) for s in SIDELINED if is_ours(directory / (name + s))]


def inspect_hook(loc: Location, name: str, top: Path | None, source: str) -> HookState:
    """What git runs for hook ``name`` in ``loc``, and whether that runs the check."""
    directory = loc.path
    path = directory / name
    text = read_head(path) if path.is_file() else None
    kept = _kept(directory, name)
    manager = manager_of(text)
    if text is None:
        return HookState(name, path, "missing", False, detail="no hook there")
    if not _executable(path):
        return HookState(
            name, path, "foreign", False, manager, kept, "not executable, so git does not run it"
        )
    if manager == "gitlease":
        kept_for_ours = kept if kept is not None and _executable(kept) else None
        if _program(text) != _program(source):
            return HookState(
                name, path, "outdated", True, manager, kept_for_ours, "from another gitlease"
            )
        python = _pinned_python(text)
        if not python or not (os.path.isabs(python) and os.access(python, os.X_OK)):
            return HookState(
                name,
                path,
                "broken",
                False,
                manager,
                kept_for_ours,
                f"its Python ({python}) is gone: every commit is refused",
            )
        return HookState(name, path, "installed", True, manager, kept_for_ours)
    who = manager or "someone else"
    native = False
    if manager == "husky":
        native = _mentions_check(read_head(directory.parent / name))
        where = directory.parent / name
    elif manager == "lefthook":
        native = top is not None and _lefthook_runs_check(top, name)
        where = Path("lefthook.yml")
    elif manager == "pre-commit":
        native = top is not None and _pre_commit_runs_check(top, text, name)
        where = Path(".pre-commit-config.yaml")
    else:
        native = _mentions_check(text)
        where = path
    if native:
        return HookState(name, path, "native", True, manager, None, f"{where} runs the check")
    sidelined = _sidelined_ours(directory, name)
    if sidelined:
        runs_it = manager == "pre-commit" and sidelined[0].name.endswith(".legacy")
        detail = f"{who} moved gitlease's hook to {sidelined[0].name}"
        detail += " and still runs it" if runs_it else " and does not run it"
        return HookState(name, path, "sidelined", runs_it, manager, kept, detail)
    return HookState(
        name, path, "foreign", False, manager, kept, f"{who}'s hook, without the check"
    )


# ------------------------------------------------------------------ reports


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


def _assess(repo: Repository, worktree: Path | None, source: str) -> WorktreeReport:
    loc = location(repo, worktree)
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
            if r.worktree is not None and _same(r.worktree, repo.current):
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


def hooks_dir(cwd: Path | None = None) -> Path:
    """The hooks folder git uses for commits in the worktree around ``cwd``."""
    repo = repository(cwd)
    return location(repo, repo.current).path


# ------------------------------------------------------------------ install and uninstall


def _locations(repo: Repository) -> list[tuple[Location, Path | None]]:
    """Each distinct hooks folder of the repository, with the first worktree using it."""
    seen: dict[str, tuple[Location, Path | None]] = {}
    trees: list[Path | None] = list(repo.worktrees) or [None]  # a bare repository: its own
    for worktree in trees:
        loc = location(repo, worktree)
        seen.setdefault(os.path.realpath(loc.path), (loc, worktree))
    return list(seen.values())


def _same_kind(a: Path, b: Path) -> bool:
    """Both scripts of one hook manager (its reinstall supersedes the other), or identical."""
    try:
        if a.read_bytes() == b.read_bytes():
            return True
    except OSError:
        return False
    kind = manager_of(read_head(a))
    return kind is not None and kind == manager_of(read_head(b))


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
        sidelined = _sidelined_ours(directory, name)
        if kind == "gitlease":
            for stale in sidelined:
                stale.unlink()
            if front != source or not _executable(path):
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
                if os.path.lexists(path) and _same_kind(kept, path):
                    kept.unlink()
                else:
                    os.rename(kept, sidelined[0])
                    changed.append(f"moved the hook gitlease kept back to {sidelined[0]}")
        if os.path.lexists(path):
            if os.path.lexists(kept):
                if not _same_kind(kept, path):
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
    for loc, top in _locations(repo):
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
    for loc, _top in _locations(repo):
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
        kept = _kept(directory, name)
        if is_ours(path):
            path.unlink()
            changed.append(f"removed {path}")
            if kept is not None:
                os.rename(kept, path)
                changed.append(f"restored the earlier hook {path}")
            continue
        sidelined = _sidelined_ours(directory, name)
        for stale in sidelined:
            stale.unlink()
            changed.append(f"removed gitlease's hook from {stale}")
        if kept is None:
            continue
        if sidelined:
            if os.path.lexists(path) and _same_kind(kept, path):
                kept.unlink()  # the manager in front reinstalled its own script over it
            else:
                os.rename(kept, sidelined[0])  # where the manager would have put it
                changed.append(f"restored the earlier hook {sidelined[0]}")
        elif not os.path.lexists(path):
            os.rename(kept, path)
            changed.append(f"restored the earlier hook {path}")
        elif _same_kind(kept, path):
            kept.unlink()  # a manager rewrote the hook: its current script stays
        else:
            changed.append(f"left {kept}: it is not gitlease's, and nothing runs it")
    with contextlib.suppress(OSError):
        (directory / KEPT_DIR).rmdir()
