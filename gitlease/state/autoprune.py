"""The daily retention pass, started from writes: about once a day a write starts
``gitlease prune --auto`` in the background (which reads ``gitlease.autoPrune``), detached,
and goes on at once. One ``stat`` of ``<store>/worklease/last-prune`` when it is not due.

The stamp's time is set when a pass is claimed, so racing writers start one pass (and a
second one started anyway finds the pass lock taken and ends). Best effort: it never fails
a write. The pass itself is :mod:`gitlease.maintenance.prune`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

from .._util import procs
from .._util.files import atomic_write
from ..gitio import layout
from ..gitio.gitread import git_env
from . import guards

#: How often writes start the retention pass in the background (``gitlease.autoPrune``).
AUTO_PRUNE_SECONDS = 86_400.0
#: How long a process that found the pass not due waits before it looks again.
LOOK_AGAIN_SECONDS = 60.0
#: By store: until when (on the monotonic clock) this process does not look again.
_NOT_DUE: dict[Path, float] = {}
#: Retention passes this process started and has not reaped yet (a library caller lives on).
_BACKGROUND: list[subprocess.Popen[bytes]] = []


def start_if_due(git_dir: Path, remote: str | None) -> None:
    """Start the pass on the store at ``git_dir`` (through ``remote``, if it has one) when
    the last one started a day ago or more; a new store's first pass is due a day from now.

    A process that found it not due looks again only :data:`LOOK_AGAIN_SECONDS` later (every
    write of the library or the MCP server asks; the pass is about once a day)."""
    if time.monotonic() < _NOT_DUE.get(git_dir, 0.0):
        return
    stamp = layout.last_prune(git_dir)
    now = time.time()
    try:
        age = now - stamp.stat().st_mtime
    except FileNotFoundError:
        _touch(stamp, now)  # a new store: its first pass is due a day from now
        return
    except OSError:
        return
    if -AUTO_PRUNE_SECONDS < age < AUTO_PRUNE_SECONDS:  # (far in the future: clock went back)
        if len(_NOT_DUE) > 64:
            _NOT_DUE.clear()
        _NOT_DUE[git_dir] = time.monotonic() + min(LOOK_AGAIN_SECONDS, AUTO_PRUNE_SECONDS - age)
        return
    if _touch(stamp, now):
        _spawn(git_dir, remote)


def _touch(path: Path, when: float) -> bool:
    """Set the stamp's time (creating it): False if it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # (replaced, not touched: the new file is this user's, so its time can be set even
        # where another user of a shared store made the last one)
        atomic_write(path, b"", durable=False, mode=0o644)
        os.utime(path, (when, when))
        return True
    except OSError:
        return False


def _spawn(git_dir: Path, remote: str | None) -> None:
    """``python -m gitlease prune --auto`` on this store, detached: its own session, no
    terminal, nothing inherited that would make it act for the caller (a lent guard)."""
    env = {k: v for k, v in git_env().items() if k not in (guards.GUARD_ENV, "GITLEASE_RECEIPT")}
    env.update(GITLEASE_STORE=str(git_dir), GITLEASE_REMOTE=remote or "")
    _BACKGROUND[:] = [proc for proc in _BACKGROUND if proc.poll() is None]
    with suppress(OSError, ValueError):
        argv = [sys.executable, "-m", "gitlease", "prune", "--auto"]
        _BACKGROUND.append(procs.start_detached(argv, env))
