"""``gitlease agents install|uninstall HARNESS``: gitlease into a harness's settings and out again.

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
or removes the file it created (and the folder, if install made it), when the file is still
as gitlease left it. A file changed
since is edited instead: only gitlease's entries are taken out, everything else stays.
A settings file that is not valid JSON (or TOML) is refused (USAGE) and nothing is written.
"""

from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path

from .._util.digest import sha256
from .._util.files import atomic_write
from ..errors import StoreError
from ..gitio import layout
from .entries import has_ours, with_ours, without_ours
from .specs import SPECS, Doc, FileSpec, check_harness, worktree
from .status import Report, read_settings, status


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
    return sha256(data).hexdigest()


def _write(path: Path, data: bytes, mode: int) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, durable=True, mode=mode)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None


def install(harness: str, cwd: Path | None = None, python: str | None = None) -> Report:
    """Merge gitlease's hooks and MCP server into the harness's settings (idempotent)."""
    check_harness(harness)
    git_dir, top = worktree(cwd)
    manifest = _read_manifest(git_dir, harness)
    # Read and merge every file before writing any: a refusal leaves all as they were.
    plans: list[tuple[FileSpec, Path, bytes | None, int | None, bytes, bool]] = []
    folders: dict[Path, bool] = {}  # (whether each folder was there before any write)
    for spec in SPECS[harness]:
        path = top / spec.path
        data, mode = read_settings(path)
        new, added = with_ours(spec, path, data, harness, python)
        plans.append((spec, path, data, mode, new, added))
        folders.setdefault(path.parent, path.parent.is_dir())
    report_changed = []
    for spec, path, data, mode, new, added in plans:
        entry = manifest["files"].get(spec.path)
        if entry is None or (data is None or _sha(data) != entry.get("written")):
            if entry is None or data is None or not has_ours(spec, data):
                entry = {
                    "original": None if data is None else base64.b64encode(data).decode(),
                    "mode": mode,
                    "restore": "bytes",
                    "mcp_added": added,
                    # uninstall removes the folder only if this install made it
                    "folder_made": not folders[path.parent],
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


def uninstall(harness: str, cwd: Path | None = None) -> Report:
    """Take gitlease's entries out: the original bytes back where the file is as gitlease
    left it, else only gitlease's entries removed."""
    check_harness(harness)
    git_dir, top = worktree(cwd)
    manifest = _read_manifest(git_dir, harness)
    changed = []
    for spec in SPECS[harness]:
        path = top / spec.path
        data, mode = read_settings(path)
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
                if entry.get("folder_made", True) is True:  # (installs before it: removed)
                    _remove_empty_parent(path, top)
                changed.append(f"removed {path} (gitlease created it)")
                manifest["files"].pop(spec.path, None)
                continue
            restored = base64.b64decode(original)
            new_mode = entry.get("mode") if isinstance(entry.get("mode"), int) else mode
        else:
            restored = without_ours(spec, path, data, bool(entry and entry.get("mcp_added")))
            new_mode = mode
        if restored != data:
            _write(path, restored, new_mode if new_mode is not None else 0o644)
            changed.append(f"restored {path}")
        manifest["files"].pop(spec.path, None)
    _write_manifest(git_dir, harness, manifest)
    report = status(harness, cwd)
    report.changed = changed
    return report


def _remove_empty_parent(path: Path, top: Path) -> None:
    parent = path.parent
    if parent != top:
        with contextlib.suppress(OSError):
            parent.rmdir()  # only if empty
