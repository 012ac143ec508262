"""Reading a harness's hook payload: which event it is, where, and which files an edit touches.

The formats are the harnesses' published ones (tests/support/payloads/ holds an example of each,
with where it came from):

* Claude Code: ``PreToolUse`` with ``tool_name`` ``Edit``, ``Write``, ``MultiEdit``
  (``tool_input.file_path``) or ``NotebookEdit`` (``tool_input.notebook_path``); and
  ``SessionStart``.
* Codex: ``PreToolUse`` with ``tool_name`` ``apply_patch``, whose ``tool_input.command``
  is the patch text; it names its files in ``*** Add File: P``, ``*** Update File: P``,
  ``*** Delete File: P`` and ``*** Move to: P`` lines. And ``SessionStart``.
* Gemini CLI: ``BeforeTool`` with ``tool_name`` ``write_file`` or ``replace``
  (``tool_input.file_path``); and ``SessionStart``.

Parsed totally: anything unexpected (not JSON, not an object, wrong types, a path with a
NUL, a patch that names no file) gives an :class:`Event` of kind ``unreadable`` with the
reason, never an exception. Standard library only: this runs on every edit.
"""

from __future__ import annotations

import json

HARNESSES = ("claude-code", "codex", "gemini")

#: The most a payload may hold: a ``Write`` of a big file carries the whole file.
MAX_PAYLOAD = 64 << 20

_CLAUDE_EDITS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
                 "NotebookEdit": "notebook_path"}  # fmt: skip
_GEMINI_EDITS = {"write_file": "file_path", "replace": "file_path"}
_PRE_EDIT = {"claude-code": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}
#: (as a trimmed line starts: the path follows, after white space Codex trims too)
_PATCH_HEADERS = ("*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:")


class Event:
    """One hook call: ``kind`` is ``edit``, ``session``, ``other`` or ``unreadable``.

    (A plain class, not a dataclass: importing dataclasses costs this hook a fifth of its time.)
    """

    __slots__ = ("cwd", "kind", "paths", "why")

    def __init__(
        self,
        kind: str,
        cwd: str | None = None,
        paths: list[str] | None = None,
        why: str | None = None,
    ) -> None:
        self.kind = kind
        self.cwd = cwd
        self.paths = paths or []
        self.why = why  # for ``unreadable``: what was wrong


def parse(harness: str, raw: bytes) -> Event:
    """The event in ``raw`` (a payload from ``harness``), never raising."""
    if len(raw) > MAX_PAYLOAD:
        return Event("unreadable", why=f"the payload is larger than {MAX_PAYLOAD >> 20} MiB")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return Event("unreadable", why="the payload is not JSON")
    if not isinstance(doc, dict):
        return Event("unreadable", why="the payload is not a JSON object")
    cwd = doc.get("cwd")
    cwd = cwd if isinstance(cwd, str) and cwd and "\0" not in cwd else None
    name = doc.get("hook_event_name")
    if name == "SessionStart":
        return Event("session", cwd)
    if name != _PRE_EDIT[harness]:
        return Event("other", cwd)
    tool, tool_input = doc.get("tool_name"), doc.get("tool_input")
    if not isinstance(tool, str):
        return Event("unreadable", cwd, why="the payload's tool_name is not a string")
    if harness == "codex":
        if tool != "apply_patch":
            return Event("other", cwd)
        return _patch_event(cwd, tool_input)
    key = (_CLAUDE_EDITS if harness == "claude-code" else _GEMINI_EDITS).get(tool)
    if key is None:
        return Event("other", cwd)
    path = tool_input.get(key) if isinstance(tool_input, dict) else None
    if not _good_path(path):
        return Event("unreadable", cwd, why=f"the payload's tool_input.{key} is not a path")
    assert isinstance(path, str)
    return Event("edit", cwd, [path])


def _patch_event(cwd: str | None, tool_input: object) -> Event:
    """Codex's ``apply_patch``: the patch text (``tool_input.command``, as Codex sends it;
    also ``patch`` or ``input``, or the input itself as a string) and the files it names."""
    text = tool_input if isinstance(tool_input, str) else None
    if isinstance(tool_input, dict):
        for key in ("command", "patch", "input"):
            if isinstance(tool_input.get(key), str):
                text = tool_input[key]
                break
    if text is None:
        return Event("unreadable", cwd, why="the payload's tool_input holds no patch text")
    paths = patch_paths(text)
    if not paths:
        return Event("unreadable", cwd, why="the patch names no file")
    if not all(_good_path(p) for p in paths):
        return Event("unreadable", cwd, why="the patch names a path that is not one")
    return Event("edit", cwd, paths)


def patch_paths(text: str) -> list[str]:
    """The files an ``apply_patch`` patch adds, changes, deletes or moves to, in order, once.

    Read as Codex's own parser reads it (``codex-rs/apply-patch``): lines end at ``\n``
    only (not at the other characters Python's ``splitlines`` breaks at, which would cut a
    path short), and a header counts once the line's surrounding white space is trimmed (an
    indented header is applied by Codex, so it is checked here). Trimming more than Codex
    does can only find more files to check, never fewer."""
    found: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        for header in _PATCH_HEADERS:
            if line.startswith(header):
                path = line[len(header) :].strip()
                if path not in found:
                    found.append(path)
    return found


def _good_path(path: object) -> bool:
    return isinstance(path, str) and bool(path.strip()) and "\0" not in path
