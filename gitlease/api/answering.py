"""Taking claims, then answering: a program's answer must never contradict the store.

A command that takes claims and then answers (``acquire``, ``bundle acquire``) first arms
the signal window (:func:`arm`): from just before the write, SIGINT, SIGTERM and SIGHUP are only
recorded. Just before it answers, it asks whether one came (:func:`pending`); if so, or if
the answer cannot be written, it releases what it took (:func:`undo_acquire`), so that no
exit but success leaves a claim behind (docs/reference/exit-codes.md).

A command that writes its own claims (``heartbeat``, ``release``) answers them instead
(:func:`answering_owned`): a signal that meets the write once it could land waits for the
write, its bookkeeping and the answer, which is the write's; :func:`owned_came` says which
signal came. Once such a command's answer is decided, :func:`end_with` makes a further
signal end the process with that answer's code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

from .._util import signals
from ..claims.acquire import undo_acquire
from ..claims.interrupts import answering_owned, arm, close, owned_came, pending

__all__ = ["answering_owned", "arm", "end_with", "owned_came", "pending", "undo_acquire"]

#: The handlers :func:`end_with` replaced, put back by ``end_with(None)``.
_REPLACED: dict[int, Any] = {}


def end_with(code: int | None) -> None:
    """From now on SIGINT, SIGTERM and SIGHUP end this process at once with ``code``, an
    answer already decided (a default disposition would exit 130, 143 or 129 while the
    answer waits on a stdout nobody reads, and contradict it), saying so on stderr. Only
    default dispositions are replaced: a program's own handler is left alone. ``None``: the
    handlers replaced come back, these and those an acquire's window took (a process that
    lives on after the command, as a test does; the command line's own process keeps them
    to its end)."""
    if threading.current_thread() is not threading.main_thread():
        return  # (Python runs signal handlers in the main thread alone)
    if code is None:
        signals.restore(_REPLACED)
        _REPLACED.clear()
        close()
        return

    def end(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):  # (a signal handler: straight to the fd)
            os.write(2, f"gitlease: {signal.Signals(signum).name} while the answer was being "
                     f"written; the answer stands: exit {code}\n".encode())  # fmt: skip
        os._exit(code)

    for signum, old in signals.replace(end, only=signals.is_default).items():
        _REPLACED.setdefault(signum, old)
