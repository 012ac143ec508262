"""The window between a claim's write and the command's answer, for SIGINT, SIGTERM, SIGHUP.

A signal that lands after ``acquire`` wrote its claim used to end the command with 130 or
143 while the claim stayed held and bound: an exit code that contradicts the store. A
command that takes claims *arms* the window (:func:`arm`); from just before the
compare-and-swap (:func:`begin`) these signals are only recorded. If nothing was written
after all (:func:`cancel`), the old handlers come back and a recorded signal acts at once,
as if it had just arrived. Otherwise the command asks, just before it answers, whether a
signal came (:func:`pending`): it then releases the claims again under their guards and
exits 128+N (130, 143, 129; AMBIGUOUS, naming the claims, if even that fails). A signal after the
answer is ignored: the answer (exit 0) is already true.

Recording handlers are Python-level: a process the command starts (a keepalive) gets the
default dispositions back at ``exec``, so nothing here leaks into it. Main thread only.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from .._util.signals import ENDING

#: SIGHUP too: a closed terminal is the usual sender, and its default ends the process.
_SIGNALS = ENDING
_armed = False
_saved: dict[int, Any] | None = None
_caught: int | None = None


def arm() -> None:
    """This command undoes a write that a signal follows (``acquire``, ``bundle acquire``,
    ``exec``). A signal an earlier command of this process recorded is forgotten: that
    command answered for it."""
    global _armed, _caught
    _armed = True
    _caught = None


def _record(signum: int, _frame: FrameType | None) -> None:
    global _caught
    if _caught is None:
        _caught = signum


def begin() -> None:
    """The write may land from now on: record SIGINT, SIGTERM and SIGHUP instead of acting
    on them."""
    global _saved
    if (
        not _armed
        or _saved is not None
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    _saved = {s: signal.signal(s, _record) for s in _SIGNALS}


def cancel() -> None:
    """Nothing was written after all: the old handlers again, and a recorded signal now."""
    global _saved, _caught
    if _saved is None:
        return
    for signum, handler in _saved.items():
        signal.signal(signum, handler)
    caught, _saved, _caught = _caught, None, None
    if caught is not None:
        signal.raise_signal(caught)


def pending() -> int | None:
    """The signal recorded since the write (None: none came)."""
    return _caught
