"""Installing the fencing ``pre-receive`` hook in the repository that holds the claims.

``gitlease hooks install --server``, in the server's (usually bare) repository. As with the
commit hooks, a ``pre-receive`` already in place is moved aside to
``pre-receive.gitlease-chained`` and still runs first, with the same input; ``uninstall``
removes only a file that carries gitlease's marker and renames the kept hook back.
Installing twice changes nothing. What the hook checks: :mod:`gitlease.fence.hook`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .._util.value import Value
from ..errors import StoreError, UsageError
from ..hooks import files as _hookfiles
from ..hooks.files import is_ours

HOOK_NAMES = ("pre-receive",)
CHAINED = ".gitlease-chained"
_SOURCE = "gitlease-pre-receive"
_PLACEHOLDER = "GITLEASE_PYTHON_DEFAULT='python3'"


class HookState(Value):
    """One server hook: installed, outdated, foreign or missing; ``chained``: a kept hook."""

    __slots__ = ("name", "path", "state", "chained")
    name: str
    path: Path
    state: str
    chained: bool

    def to_dict(self) -> dict[str, Any]:
        """The hook as ``hooks status --server --json`` prints it."""
        return {"hook": self.name, "path": str(self.path), "state": self.state,
                "chained": self.chained}  # fmt: skip


def hook_source() -> str:
    """The hook program from the project's ``hooks/`` folder, pointed at this Python."""
    return _hookfiles.program(_SOURCE, _PLACEHOLDER, "GITLEASE_PYTHON_DEFAULT", sys.executable)


def hooks_dir(cwd: Path | None = None) -> Path:
    """``core.hooksPath`` if set (relative to the repository), else ``<git dir>/hooks``."""

    def git(*args: str) -> str:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
        if result.returncode not in (0, 1):
            raise UsageError(f"not inside a git repository: {result.stderr.strip()}")
        return result.stdout.strip()

    common = git("rev-parse", "--path-format=absolute", "--git-common-dir")
    if not common:
        raise UsageError("not inside a git repository")
    configured = git("config", "--path", "--get", "core.hooksPath")
    if configured:
        path = Path(configured)
        if not path.is_absolute():  # relative to where git runs the hooks
            bare = git("rev-parse", "--is-bare-repository") == "true"
            path = Path(common if bare else git("rev-parse", "--show-toplevel")) / path
        return path
    return Path(common) / "hooks"


def status(cwd: Path | None = None) -> list[HookState]:
    """The server hook's state: installed, outdated, foreign or missing."""
    directory = hooks_dir(cwd)
    source = hook_source()
    out = []
    for name in HOOK_NAMES:
        path = directory / name
        chained = (directory / (name + CHAINED)).exists()
        if not path.exists():
            state = "missing"
        elif not is_ours(path):
            state = "foreign"
        elif path.read_text(encoding="utf-8") != source:
            state = "outdated"
        else:
            state = "installed"
        out.append(HookState(name, path, state, chained))
    return out


def install(cwd: Path | None = None) -> list[HookState]:
    """Install the fencing ``pre-receive``, keeping one already there to run first."""
    directory = hooks_dir(cwd)
    source = hook_source()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name in HOOK_NAMES:
            path = directory / name
            kept = directory / (name + CHAINED)
            if path.exists() and not is_ours(path):
                if kept.exists():
                    raise UsageError(
                        f"{path} is not gitlease's and {kept} already exists: "
                        "resolve by hand, then install again"
                    )
                os.rename(path, kept)
            if path.exists() and path.read_text(encoding="utf-8") == source:
                continue
            _hookfiles.write(path, source)
    except OSError as exc:
        raise StoreError(f"cannot install hooks into {directory}: {exc}") from None
    return status(cwd)


def uninstall(cwd: Path | None = None) -> list[HookState]:
    """Remove gitlease's ``pre-receive`` and put back the hook it kept."""
    directory = hooks_dir(cwd)
    try:
        for name in HOOK_NAMES:
            path = directory / name
            kept = directory / (name + CHAINED)
            if path.exists() and is_ours(path):
                path.unlink()
                if kept.exists():
                    os.rename(kept, path)
    except OSError as exc:
        raise StoreError(f"cannot uninstall hooks from {directory}: {exc}") from None
    return status(cwd)
