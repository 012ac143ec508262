"""gitlease's entries in one settings file: added, found and taken out, all else left as it was.

JSON settings (Claude Code, Gemini CLI, Codex's hooks) are merged as documents: every key,
hook and server already there stays, in its order, and gitlease's own hook entries are found
again by their command (it runs :data:`~gitlease.agents.specs.MARKER`), so a second install
changes nothing. Codex's ``config.toml`` gets a marked block of its own, appended as text
(the file's comments and layout stay), and taken out by its markers. A file that is not
valid JSON (or TOML) is refused (USAGE): nothing of gitlease's can be told apart in it.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from ..errors import UsageError
from .specs import (
    MARKER,
    Doc,
    FileSpec,
    hook_command,
    mcp_command,
    server_gone,
    top_of,
    written_by_gitlease,
)

_TOML_BEGIN = "# gitlease-managed: begin (`gitlease agents uninstall codex` removes this block)"
_TOML_END = "# gitlease-managed: end"


# ------------------------------------------------------------------ JSON settings


def load_json(path: Path, data: bytes | None) -> Doc:
    """The JSON object in ``data`` (empty for a missing or blank file); USAGE otherwise."""
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
        server = _server(spec, python)
        if "gitlease" not in servers:
            servers["gitlease"] = server
            return True
        if written_by_gitlease(servers["gitlease"]) and server_gone(
            servers["gitlease"], top_of(spec, path)
        ):
            servers["gitlease"] = server  # its Python moved: the one installing now, whole
    return False


def _server(spec: FileSpec, python: str | None) -> Doc:
    command, args = mcp_command(python)
    server: Doc = {"command": command, "args": args}
    return {"type": "stdio", **server} if spec.path == ".mcp.json" else server


def server_is_ours(spec: FileSpec, data: bytes | None, server: object) -> bool:
    """Whether the ``gitlease`` MCP server entry is one gitlease wrote (in Codex's TOML: in
    gitlease's marked block), so that install may write it anew."""
    if spec.toml and not _block_in((data or b"").decode("utf-8", "replace")):
        return False
    return written_by_gitlease(server)


def _block_in(text: str) -> bool:
    start = text.find(_TOML_BEGIN)
    return start >= 0 and text.find(_TOML_END, start) >= 0


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


def json_state(spec: FileSpec, doc: Doc) -> tuple[dict[str, str | None], bool]:
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


def load_toml(path: Path, data: bytes | None) -> Doc:
    """The TOML document in ``data`` (empty for a missing file); USAGE if it is not TOML."""
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


# ------------------------------------------------------------------ one file, whole


def with_ours(
    spec: FileSpec, path: Path, data: bytes | None, harness: str, python: str | None
) -> tuple[bytes, bool]:
    """The bytes of the settings file ``data`` (None: it does not exist) with gitlease's
    entries in, and whether the MCP server was added by this (USAGE if it is not valid)."""
    if not spec.toml:
        doc = load_json(path, data)
        added = _merge_json(spec, path, doc, harness, python)
        return _dump_json(doc), added
    servers = load_toml(path, data).get("mcp_servers")
    text = (data or b"").decode("utf-8")
    if isinstance(servers, dict) and "gitlease" in servers:
        server = servers["gitlease"]
        if not server_is_ours(spec, data, server) or not server_gone(server, top_of(spec, path)):
            return data or b"", False  # runs, or is the person's own: left as it is
        text = _strip_toml_block(text)  # gitlease's block, its Python moved: written anew
        left = load_toml(path, text.encode("utf-8")).get("mcp_servers")
        if isinstance(left, dict) and "gitlease" in left:
            return data or b"", False  # (the table was moved out of the block: left alone)
    sep = "\n\n" if text and not text.endswith("\n") else ("\n" if text else "")
    if text.endswith("\n\n"):
        sep = ""
    return (text + sep + _toml_block(python)).encode("utf-8"), True


def has_ours(spec: FileSpec, data: bytes) -> bool:
    """Whether the file's bytes hold gitlease's hooks or MCP server (in TOML, its block)."""
    if spec.toml:
        return _TOML_BEGIN.encode() in data
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    if not isinstance(doc, dict):
        return False
    hooks, mcp = json_state(spec, doc)
    return any(v is not None for v in hooks.values()) or (spec.mcp is not None and mcp)


def without_ours(spec: FileSpec, path: Path, data: bytes, mcp_added: bool) -> bytes:
    """The file's bytes with gitlease's entries taken out (the MCP server only if gitlease
    added it); the bytes as they are when there is nothing of gitlease's to take out."""
    if spec.toml:
        return _strip_toml_block(data.decode("utf-8")).encode("utf-8")
    try:
        doc = load_json(path, data)
    except UsageError:
        return data  # not JSON any more: nothing of gitlease's can be told apart; left alone
    before = _dump_json(doc)
    _unmerge_json(spec, doc, mcp_added)
    after = _dump_json(doc)
    return data if after == before else after
