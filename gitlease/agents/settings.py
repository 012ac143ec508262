"""``gitlease agents install|uninstall|status HARNESS``: the harness's settings in the repository.

What is written, in the top folder of the current worktree (the harnesses read their
project settings there):

* ``claude-code``: ``.claude/settings.json`` (hooks ``PreToolUse`` on
  ``Edit|Write|MultiEdit|NotebookEdit`` and ``SessionStart``) and ``.mcp.json``
  (``mcpServers.gitlease``);
* ``codex``: ``.codex/hooks.json`` (hooks ``PreToolUse`` on ``apply_patch`` and
  ``SessionStart``) and ``.codex/config.toml`` (``[mcp_servers.gitlease]``);
* ``gemini``: ``.gemini/settings.json`` (hooks ``BeforeTool`` on ``write_file|replace``
  and ``SessionStart``, and ``mcpServers.gitlease``).

Install merges: every key, hook and server already there stays, in its order; gitlease's
own hook entries are found again by their command (it runs ``gitlease.agents.hook``), so a
second install changes nothing. The first install keeps the original bytes and mode of each
file (or that it did not exist) in the worktree's private git dir
(``<git-dir>/worklease/agents/HARNESS.json``); ``uninstall`` puts them back byte for byte,
or removes the file it created, when the file is still as gitlease left it. A file changed
since is edited instead: only gitlease's entries are taken out, everything else stays.
A settings file that is not valid JSON (or TOML) is refused (USAGE) and nothing is written.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shlex
import stat
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._util.files import atomic_write
from ..errors import StoreError, UsageError
from ..gitio import layout
from ..gitio.gitdirs import find_git_dir
from .payloads import HARNESSES

#: What marks gitlease's own hook entries: the command runs this module.
MARKER = "gitlease.agents.hook"
_TOML_BEGIN = "# gitlease-managed: begin (`gitlease agents uninstall codex` removes this block)"
_TOML_END = "# gitlease-managed: end"

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


# ------------------------------------------------------------------ where, and the manifest


def worktree(cwd: Path | None = None) -> tuple[Path, Path]:
    """(private git dir, top folder) of the worktree around ``cwd``; USAGE outside one."""
    found = find_git_dir(cwd or Path.cwd())
    if found is None or found[1] is None:
        raise UsageError(
            "not inside a git worktree: run `gitlease agents ...` in the repository whose "
            "agents should be checked"
        )
    return found[0], found[1]


def _check_harness(harness: str) -> None:
    if harness not in HARNESSES:
        raise UsageError(f"unknown harness {harness!r}: choose one of {', '.join(HARNESSES)}")


def _manifest_path(git_dir: Path, harness: str) -> Path:
    return layout.agents_saved(git_dir, harness)


def _read_manifest(git_dir: Path, harness: str) -> Doc:
    path = _manifest_path(git_dir, harness)
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {"harness": harness, "files": {}}
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read {path} ({exc}): remove it to start afresh") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        raise StoreError(f"{path} is not gitlease's: remove it to start afresh")
    return doc


def _write_manifest(git_dir: Path, harness: str, doc: Doc) -> None:
    path = _manifest_path(git_dir, harness)
    if not doc["files"]:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        atomic_write(path, (json.dumps(doc, indent=2) + "\n").encode(), durable=True)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: Path) -> tuple[bytes | None, int | None]:
    try:
        return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _write(path: Path, data: bytes, mode: int) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, durable=True, mode=mode)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None


# ------------------------------------------------------------------ JSON settings


def _load_json(path: Path, data: bytes | None) -> Doc:
    if data is None or not data.strip():
        return {}
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise UsageError(
            f"{path} is not valid JSON ({exc}): fix it first; nothing was changed"
        ) from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} is not a JSON object: fix it first; nothing was changed")
    return doc


def _dump_json(doc: Doc) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _ours(entry: object) -> bool:
    return isinstance(entry, dict) and MARKER in str(entry.get("command", ""))


def _table(doc: Doc, key: str, path: Path, what: str) -> Doc:
    value = doc.setdefault(key, {})
    if not isinstance(value, dict):
        raise UsageError(f"{path}: {what} is not an object: fix it first; nothing was changed")
    return value


def _merge_json(spec: FileSpec, path: Path, doc: Doc, harness: str, python: str | None) -> bool:
    """Add gitlease's hooks and server to ``doc``; whether the MCP server was added."""
    if spec.hooks:
        hooks = _table(doc, "hooks", path, "hooks")
        for hook in spec.hooks:
            groups = hooks.setdefault(hook.event, [])
            if not isinstance(groups, list):
                raise UsageError(
                    f"{path}: hooks.{hook.event} is not a list: fix it first; nothing was changed"
                )
            entry = {"type": "command", "command": hook_command(harness, python), **hook.extra}
            mine = [
                e
                for g in groups
                if isinstance(g, dict) and isinstance(g.get("hooks"), list)
                for e in g["hooks"]
                if _ours(e)
            ]
            if mine:
                for e in mine:  # a Python moved since: the command follows it
                    e.update(entry)
            else:
                groups.append({"matcher": hook.matcher, "hooks": [entry]})
    if spec.mcp:
        servers = _table(doc, spec.mcp, path, spec.mcp)
        if "gitlease" not in servers:
            command, args = mcp_command(python)
            servers["gitlease"] = {"command": command, "args": args}
            if spec.path == ".mcp.json":
                servers["gitlease"] = {"type": "stdio", **servers["gitlease"]}
            return True
    return False


def _unmerge_json(spec: FileSpec, doc: Doc, mcp_added: bool) -> None:
    hooks = doc.get("hooks")
    if spec.hooks and isinstance(hooks, dict):
        for hook in spec.hooks:
            groups = hooks.get(hook.event)
            if not isinstance(groups, list):
                continue
            kept = []
            for group in groups:
                if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                    inner = [e for e in group["hooks"] if not _ours(e)]
                    if not inner and group["hooks"]:
                        continue
                    group["hooks"] = inner
                kept.append(group)
            hooks[hook.event] = kept
            if not kept:
                del hooks[hook.event]
        if not hooks:
            del doc["hooks"]
    servers = doc.get(spec.mcp or "")
    if mcp_added and isinstance(servers, dict):
        servers.pop("gitlease", None)
        if not servers:
            del doc[spec.mcp or ""]


def _json_state(spec: FileSpec, doc: Doc) -> tuple[dict[str, str | None], bool]:
    """Per hook event, gitlease's command there (None: not there); whether gitlease's MCP
    server is registered."""
    hooks = doc.get("hooks") if isinstance(doc.get("hooks"), dict) else {}
    assert isinstance(hooks, dict)
    found: dict[str, str | None] = {}
    for hook in spec.hooks:
        groups = hooks.get(hook.event)
        found[hook.event] = None
        for group in groups if isinstance(groups, list) else []:
            inner = group.get("hooks") if isinstance(group, dict) else None
            for e in inner if isinstance(inner, list) else []:
                if _ours(e):
                    found[hook.event] = str(e["command"])
    servers = doc.get(spec.mcp or "")
    mcp = isinstance(servers, dict) and "gitlease" in servers
    return found, mcp


# ------------------------------------------------------------------ TOML (Codex's config)


def _load_toml(path: Path, data: bytes | None) -> Doc:
    if data is None:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(
            f"{path} is not valid TOML ({exc}): fix it first; nothing was changed"
        ) from None


def _toml_block(python: str | None) -> str:
    command, args = mcp_command(python)
    return (
        f"{_TOML_BEGIN}\n[mcp_servers.gitlease]\ncommand = {json.dumps(command)}\n"
        f"args = {json.dumps(args)}\n{_TOML_END}\n"
    )


def _strip_toml_block(text: str) -> str:
    start = text.find(_TOML_BEGIN)
    end = text.find(_TOML_END, start)
    if start < 0 or end < 0:
        return text
    end += len(_TOML_END)
    if text[end : end + 1] == "\n":
        end += 1
    if start >= 2 and text[start - 2 : start] == "\n\n":
        start -= 1  # the blank line install put before the block
    return text[:start] + text[end:]


# ------------------------------------------------------------------ install, uninstall, status


@dataclass
class FileReport:
    """One settings file: gitlease's entries there, and what is missing."""

    path: Path
    exists: bool
    hooks: dict[str, str | None]
    mcp: bool | None  # None: this file registers no server
    problems: list[str]

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

    def to_dict(self) -> Doc:
        """As ``agents status --json`` prints it (docs/reference/json.md)."""
        problems = [p for f in self.files for p in f.problems]
        return {
            "harness": self.harness,
            "worktree": str(self.top),
            "in_effect": self.in_effect,
            "files": [f.to_dict() for f in self.files],
            "problems": problems,
            "fix": None if not problems else f"gitlease agents install {self.harness}",
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
    _check_harness(harness)
    _git_dir, top = worktree(cwd)
    files = []
    for spec in SPECS[harness]:
        path = top / spec.path
        data, _mode = _read(path)
        problems: list[str] = []
        hooks: dict[str, str | None] = {h.event: None for h in spec.hooks}
        mcp: bool | None = None
        doc: Doc = {}
        if spec.toml:
            try:
                doc = _load_toml(path, data)
            except UsageError as exc:
                problems.append(str(exc))
            servers = doc.get("mcp_servers")
            mcp = isinstance(servers, dict) and "gitlease" in servers
        else:
            try:
                doc = _load_json(path, data)
                hooks, found_mcp = _json_state(spec, doc)
                mcp = found_mcp if spec.mcp else None
            except UsageError as exc:
                problems.append(str(exc))
        problems += [f"{spec.path}: {why}" for why in _switched_off(harness, doc)]
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
        files.append(FileReport(path, data is not None, hooks, mcp, problems))
    return Report(harness, top, files)


def install(harness: str, cwd: Path | None = None, python: str | None = None) -> Report:
    """Merge gitlease's hooks and MCP server into the harness's settings (idempotent)."""
    _check_harness(harness)
    git_dir, top = worktree(cwd)
    manifest = _read_manifest(git_dir, harness)
    # Read and merge every file before writing any: a refusal leaves all as they were.
    plans: list[tuple[FileSpec, Path, bytes | None, int | None, bytes, bool]] = []
    for spec in SPECS[harness]:
        path = top / spec.path
        data, mode = _read(path)
        if spec.toml:
            doc = _load_toml(path, data)
            servers = doc.get("mcp_servers")
            if isinstance(servers, dict) and "gitlease" in servers:
                new, added = data or b"", False
            else:
                text = (data or b"").decode("utf-8")
                sep = "\n\n" if text and not text.endswith("\n") else ("\n" if text else "")
                if text.endswith("\n\n"):
                    sep = ""
                new, added = (text + sep + _toml_block(python)).encode("utf-8"), True
        else:
            doc = _load_json(path, data)
            added = _merge_json(spec, path, doc, harness, python)
            new = _dump_json(doc)
        plans.append((spec, path, data, mode, new, added))
    report_changed = []
    for spec, path, data, mode, new, added in plans:
        entry = manifest["files"].get(spec.path)
        if entry is None or (data is None or _sha(data) != entry.get("written")):
            if entry is None or data is None or not _has_ours(spec, data):
                entry = {
                    "original": None if data is None else base64.b64encode(data).decode(),
                    "mode": mode,
                    "restore": "bytes",
                    "mcp_added": added,
                }
            else:  # changed by someone since gitlease wrote it: take out only its entries
                entry = {**entry, "restore": "structural"}
        entry["mcp_added"] = bool(entry.get("mcp_added")) or added
        if new != data:
            _write(path, new, mode if mode is not None else 0o644)
            report_changed.append(f"{'updated' if data is not None else 'created'} {path}")
        entry["written"] = _sha(new)
        manifest["files"][spec.path] = entry
    _write_manifest(git_dir, harness, manifest)
    report = status(harness, cwd)
    report.changed = report_changed
    return report


def _has_ours(spec: FileSpec, data: bytes) -> bool:
    if spec.toml:
        return _TOML_BEGIN.encode() in data
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    if not isinstance(doc, dict):
        return False
    hooks, _mcp = _json_state(spec, doc)
    return any(v is not None for v in hooks.values())


def uninstall(harness: str, cwd: Path | None = None) -> Report:
    """Take gitlease's entries out: the original bytes back where the file is as gitlease
    left it, else only gitlease's entries removed."""
    _check_harness(harness)
    git_dir, top = worktree(cwd)
    manifest = _read_manifest(git_dir, harness)
    changed = []
    for spec in SPECS[harness]:
        path = top / spec.path
        data, mode = _read(path)
        entry = manifest["files"].get(spec.path)
        if data is None:
            manifest["files"].pop(spec.path, None)
            continue
        restored: bytes | None
        if (
            entry is not None
            and entry.get("restore") == "bytes"
            and _sha(data) == entry.get("written")
        ):
            original = entry.get("original")
            if original is None:
                path.unlink()
                _remove_empty_parent(path, top)
                changed.append(f"removed {path} (gitlease created it)")
                manifest["files"].pop(spec.path, None)
                continue
            restored = base64.b64decode(original)
            new_mode = entry.get("mode") if isinstance(entry.get("mode"), int) else mode
        else:
            restored = _without_ours(spec, path, data, bool(entry and entry.get("mcp_added")))
            new_mode = mode
        if restored != data:
            _write(path, restored, new_mode if new_mode is not None else 0o644)
            changed.append(f"restored {path}")
        manifest["files"].pop(spec.path, None)
    _write_manifest(git_dir, harness, manifest)
    report = status(harness, cwd)
    report.changed = changed
    return report


def _without_ours(spec: FileSpec, path: Path, data: bytes, mcp_added: bool) -> bytes:
    if spec.toml:
        return _strip_toml_block(data.decode("utf-8")).encode("utf-8")
    try:
        doc = _load_json(path, data)
    except UsageError:
        return data  # not JSON any more: nothing of gitlease's can be told apart; left alone
    before = _dump_json(doc)
    _unmerge_json(spec, doc, mcp_added)
    after = _dump_json(doc)
    return data if after == before else after


def _remove_empty_parent(path: Path, top: Path) -> None:
    parent = path.parent
    if parent != top:
        with contextlib.suppress(OSError):
            parent.rmdir()  # only if empty
