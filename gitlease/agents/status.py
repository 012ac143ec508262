"""Whether a harness runs gitlease's hooks in a worktree: ``gitlease agents status HARNESS``.

Read, never written: for each settings file, gitlease's command on each hook event, whether
its MCP server is registered, and what keeps the hooks from running (a hook missing, the
Python it names gone, or the harness's own switch that turns hooks off). ``install`` and
``uninstall`` answer with the same report.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from .entries import json_state, load_json, load_toml, server_is_ours
from .specs import SPECS, Doc, check_harness, server_gone, worktree


def read_settings(path: Path) -> tuple[bytes | None, int | None]:
    """A settings file's bytes and mode, or (None, None) when it does not exist (USAGE when
    it cannot be read)."""
    try:
        return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


@dataclass
class FileReport:
    """One settings file: gitlease's entries there, and what is missing."""

    path: Path
    exists: bool
    hooks: dict[str, str | None]
    mcp: bool | None  # None: this file registers no server
    problems: list[str]
    manual: list[str] = field(default_factory=list)  # those of the problems install leaves
    # to the person: the harness's own switch, a `gitlease` server entry of their own

    def to_dict(self) -> Doc:
        """As ``agents status --json`` prints it (docs/reference/json.md)."""
        return {
            "path": str(self.path),
            "exists": self.exists,
            "hooks": {k: v is not None for k, v in self.hooks.items()},
            "mcp": self.mcp,
            "problems": list(self.problems),
        }


@dataclass
class Report:
    """What is in effect for one harness in one worktree."""

    harness: str
    top: Path
    files: list[FileReport]
    changed: list[str] = field(default_factory=list)

    @property
    def in_effect(self) -> bool:
        """Every hook gitlease installs is there, with a Python that exists."""
        return all(not f.problems for f in self.files)

    @property
    def installed(self) -> bool:
        """Anything of gitlease's is in the settings."""
        return any(any(v for v in f.hooks.values()) or f.mcp for f in self.files)

    @property
    def fix(self) -> str | None:
        """What to do when not in effect. Install writes gitlease's own entries only: it never
        turns the harness's switch back on, nor rewrites a server entry of the person's, so
        those are named as theirs to change; running install again would not help."""
        if self.in_effect:
            return None
        install = f"gitlease agents install {self.harness}"
        if not any(f.manual for f in self.files):
            return install
        by_hand = "change by hand what the problems name (`gitlease agents install` leaves it)"
        if all(p in f.manual for f in self.files for p in f.problems):
            return by_hand
        return f"{install}, then {by_hand}"

    def to_dict(self) -> Doc:
        """As ``agents status --json`` prints it (docs/reference/json.md)."""
        problems = [p for f in self.files for p in f.problems]
        return {
            "harness": self.harness,
            "worktree": str(self.top),
            "in_effect": self.in_effect,
            "files": [f.to_dict() for f in self.files],
            "problems": problems,
            "fix": self.fix,
            "changed": list(self.changed),
        }


def _switched_off(harness: str, doc: Doc) -> list[str]:
    """The harness's own switches in this file that keep gitlease's hooks from running:
    Claude Code's ``disableAllHooks``, Codex's ``[features] hooks = false`` (or its old name
    ``codex_hooks``), Gemini CLI's ``hooksConfig.enabled = false`` or gitlease's hook names
    in ``hooksConfig.disabled``. (A user-level file can switch them off too: not read here.)"""
    found = []
    if harness == "claude-code" and doc.get("disableAllHooks") is True:
        found.append("disableAllHooks is true: Claude Code runs no hook")
    features = doc.get("features")
    if harness == "codex" and isinstance(features, dict):
        for key in ("hooks", "codex_hooks"):
            if features.get(key) is False:
                found.append(f"[features] {key} = false: Codex runs no hook")
    config = doc.get("hooksConfig")
    if harness == "gemini" and isinstance(config, dict):
        if config.get("enabled") is False:
            found.append("hooksConfig.enabled is false: Gemini CLI runs no hook")
        disabled = config.get("disabled")
        names = [h.extra.get("name") for spec in SPECS["gemini"] for h in spec.hooks]
        for name in names:
            if isinstance(disabled, list) and name in disabled:
                found.append(f"hooksConfig.disabled names {name}")
    return found


def _python_of(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words[0] if words else None


def status(harness: str, cwd: Path | None = None) -> Report:
    """What of gitlease is in the harness's settings of this worktree, and what is missing."""
    check_harness(harness)
    _git_dir, top = worktree(cwd)
    files = []
    for spec in SPECS[harness]:
        path = top / spec.path
        data, _mode = read_settings(path)
        problems: list[str] = []
        hooks: dict[str, str | None] = {h.event: None for h in spec.hooks}
        mcp: bool | None = None
        doc: Doc = {}
        if spec.toml:
            try:
                doc = load_toml(path, data)
            except UsageError as exc:
                problems.append(str(exc))
            servers = doc.get("mcp_servers")
            mcp = isinstance(servers, dict) and "gitlease" in servers
        else:
            try:
                doc = load_json(path, data)
                hooks, found_mcp = json_state(spec, doc)
                mcp = found_mcp if spec.mcp else None
            except UsageError as exc:
                problems.append(str(exc))
        manual = [f"{spec.path}: {why}" for why in _switched_off(harness, doc)]
        problems += manual
        for event, command in hooks.items():
            if command is None:
                problems.append(f"{spec.path}: no gitlease hook on {event}")
                continue
            python = _python_of(command)
            if python is None or not (os.path.isfile(python) and os.access(python, os.X_OK)):
                problems.append(
                    f"{spec.path}: the {event} hook's Python ({python}) is gone: run "
                    f"`gitlease agents install {harness}` again"
                )
        if mcp is False:
            problems.append(f"{spec.path}: the gitlease MCP server is not registered")
        elif mcp:
            server = doc[spec.mcp or ""]["gitlease"]
            gone = server_gone(server, top)
            if gone is not None and server_is_ours(spec, data, server):
                problems.append(
                    f"{spec.path}: the gitlease MCP server's command ({gone}) is gone: run "
                    f"`gitlease agents install {harness}` again"
                )
            elif gone is not None:
                theirs = (
                    f"{spec.path}: the `gitlease` MCP server's command ({gone}) cannot be run; "
                    "the entry is not one gitlease wrote, so install leaves it: fix or remove it"
                )
                manual.append(theirs)
                problems.append(theirs)
        files.append(FileReport(path, data is not None, hooks, mcp, problems, manual))
    return Report(harness, top, files)
