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


def server_gone(server: object, top: Path) -> str | None:
    """The command of an MCP server entry when it cannot be run here (a Python removed, a
    virtualenv rebuilt elsewhere), else None; an entry with no command (a URL) is not judged.
    A bare name is looked up on PATH; a relative path from ``top``, the worktree's top
    folder, where the harness starts the server (not from wherever this runs)."""
    command = server.get("command") if isinstance(server, dict) else None
    if not isinstance(command, str) or "$" in command:
        return None  # (a harness expands ${VAR} in a command: not judged from here)
    if "/" in command and not os.path.isabs(command):
        found = top / command
        return None if found.is_file() and os.access(found, os.X_OK) else command
    return None if shutil.which(command) is not None else command


def written_by_gitlease(server: object) -> bool:
    """Whether an MCP server entry has the shape :func:`mcp_command` writes: an absolute
    ``.../gitlease mcp``, or ``/path/to/python -m gitlease mcp``. Only such an entry is
    rewritten when its command is gone; any other (a bare name, a relative path, extra keys
    such as ``env``) is the person's, and is only reported."""
    if not isinstance(server, dict) or set(server) - {"type", "command", "args"}:
        return False
    command, args = server.get("command"), server.get("args")
    if not isinstance(command, str) or not os.path.isabs(command):
        return False
    if server.get("type", "stdio") != "stdio":
        return False
    return (Path(command).name == "gitlease" and args == ["mcp"]) or args == [
        "-m",
        "gitlease",
        "mcp",
    ]


def top_of(spec: FileSpec, path: Path) -> Path:
    """The worktree's top folder, from a settings file's path and its spec."""
    return path.parents[len(Path(spec.path).parts) - 1]


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
