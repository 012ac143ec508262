"""What gitlease puts in each harness's settings, and where: the files, the hooks, the MCP server.

The one table of it (:data:`SPECS`), read by installing, removing and the status alike;
the commands the harness runs (the hook, ``gitlease mcp``); and the worktree whose settings
are meant. See docs/howto/agent-harnesses.md for what each file means to its harness.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..gitio.gitdirs import find_git_dir
from .payloads import HARNESSES

#: What marks gitlease's own hook entries: the command runs this module.
MARKER = "gitlease.agents.hook"

Doc = dict[str, Any]


@dataclass
class HookSpec:
    """One hook gitlease puts in a harness's settings."""

    event: str
    matcher: str
    extra: Doc = field(default_factory=dict)  # more keys of the hook entry (timeout, name)


@dataclass
class FileSpec:
    """One settings file: where, its format, and what gitlease adds to it."""

    path: str  # relative to the worktree's top folder
    hooks: list[HookSpec] = field(default_factory=list)
    mcp: str | None = None  # "mcpServers" (JSON) or "mcp_servers" (TOML)
    toml: bool = False


SPECS: dict[str, list[FileSpec]] = {
    "claude-code": [
        FileSpec(
            ".claude/settings.json",
            [
                HookSpec("PreToolUse", "Edit|Write|MultiEdit|NotebookEdit", {"timeout": 30}),
                HookSpec("SessionStart", "startup|resume|clear|compact", {"timeout": 30}),
            ],
        ),
        FileSpec(".mcp.json", mcp="mcpServers"),
    ],
    "codex": [
        FileSpec(
            ".codex/hooks.json",
            [
                HookSpec("PreToolUse", "apply_patch", {"timeout": 30}),
                HookSpec("SessionStart", "startup|resume|clear", {"timeout": 30}),
            ],
        ),
        FileSpec(".codex/config.toml", mcp="mcp_servers", toml=True),
    ],
    "gemini": [
        FileSpec(
            ".gemini/settings.json",
            [
                HookSpec(
                    "BeforeTool",
                    "write_file|replace",
                    {
                        "name": "gitlease-edit-check",
                        "timeout": 30000,
                        "description": "Deny an edit in a worktree whose gitlease claim lapsed",
                    },
                ),
                HookSpec(
                    "SessionStart",
                    "startup|resume|clear",
                    {
                        "name": "gitlease-session-context",
                        "timeout": 30000,
                        "description": "Tell the model which gitlease claims this worktree holds",
                    },
                ),
            ],
            mcp="mcpServers",
        )
    ],
}


def hook_command(harness: str, python: str | None = None) -> str:
    """The command the harness runs: this Python (fixed now, like the git hooks' Python),
    isolated (``-I``: no PYTHONPATH, no user site, not the current folder)."""
    return f"{shlex.quote(python or sys.executable)} -I -m {MARKER} {harness}"


def mcp_command(python: str | None = None) -> tuple[str, list[str]]:
    """``gitlease mcp``, as the console script installed next to this Python if there is one
    (else ``python -m gitlease mcp``), so that the harness finds it without PATH."""
    python = python or sys.executable
    script = Path(python).with_name("gitlease")
    if script.is_file() and os.access(script, os.X_OK):
        return str(script), ["mcp"]
    return python, ["-m", "gitlease", "mcp"]


def server_gone(server: object) -> str | None:
    """The command of an MCP server entry when it cannot be run here (a Python removed, a
    virtualenv rebuilt elsewhere), else None; an entry with no command (a URL) is not judged."""
    command = server.get("command") if isinstance(server, dict) else None
    if not isinstance(command, str) or shutil.which(command) is not None:
        return None
    return command


def worktree(cwd: Path | None = None) -> tuple[Path, Path]:
    """(private git dir, top folder) of the worktree around ``cwd``; USAGE outside one."""
    found = find_git_dir(cwd or Path.cwd())
    if found is None or found[1] is None:
        raise UsageError(
            "not inside a git worktree: run `gitlease agents ...` in the repository whose "
            "agents should be checked"
        )
    return found[0], found[1]


def check_harness(harness: str) -> None:
    """USAGE for a harness gitlease knows nothing of."""
    if harness not in HARNESSES:
        raise UsageError(f"unknown harness {harness!r}: choose one of {', '.join(HARNESSES)}")
