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

A write of one's own claim (``heartbeat``, ``release``, their bundle forms, a keeper's or
``exec``'s renewal) is held the same way, from just before its compare-and-swap until what
follows it is done (the bindings and the token of a release, the keepers told): :func:`hold`,
then :func:`unhold`. A signal that came meanwhile then acts, after that bookkeeping rather than
half way through it; one the command *answers* (:func:`answering_owned`: the CLI's) is held
until the answer is written and then only noted (:func:`owned_came`), since the write it met
has landed and its answer, exit 0, is true. A signal before the write acts at once, as ever;
so does one that met a compare-and-swap that failed (nothing was written), and a second one
(a push to a server that does not answer can take the network timeout: whoever sends it
again will not wait). Only the default dispositions are held, and only in the main thread: a
handler of the program's own (``exec``'s, forwarding to its command) stops nothing.

Recording handlers are Python-level: a process the command starts (a keepalive) gets the
default dispositions back at ``exec``, so nothing here leaks into it. Main thread only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from .._util import signals
from ..errors import AmbiguousError

#: SIGHUP too: a closed terminal is the usual sender, and its default ends the process.
_SIGNALS = signals.ENDING
_armed = False
_saved: dict[int, Any] | None = None
_caught: int | None = None
#: An owned write's hold: the handlers it replaced, and the first signal it recorded.
_held: dict[int, Any] | None = None
_held_caught: int | None = None
#: Whether this command answers an owned write a signal met (the CLI), and the signal.
_answers_owned = False
_owned_came: int | None = None


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
    _saved = signals.replace(_record, _SIGNALS)


def cancel() -> None:
    """Nothing was written after all: the old handlers again, and a recorded signal now."""
    global _saved, _caught
    if _saved is None or threading.current_thread() is not threading.main_thread():
        return
    signals.restore(_saved)
    caught, _saved, _caught = _caught, None, None
    if caught is not None:
        signal.raise_signal(caught)


def close() -> None:
    """The command that armed the window has answered (it asked :func:`pending` first):
    the handlers :func:`begin` replaced come back, for a process that lives on after the
    command (a program calling the CLI's ``main``, a test; the command line's own process
    ends with it). A recorded signal is forgotten: that command answered for it."""
    global _armed, _saved, _caught
    if threading.current_thread() is not threading.main_thread():
        return
    _armed, _caught = False, None
    if _saved is not None:
        signals.restore(_saved)
        _saved = None


def pending() -> int | None:
    """The signal recorded since the write (None: none came)."""
    return _caught


@contextmanager
def answering_owned() -> Iterator[None]:
    """For the block, this command answers an owned write that a signal met once it could
    land (the CLI's ``heartbeat``, ``release`` and their bundle forms): the hold then lasts
    until the block ends, the answer written, and the signal is only noted
    (:func:`owned_came`), for the command to say so; the exit is the write's. The first signal
    says on stderr that the write is being finished; a second one stops the command at once,
    AMBIGUOUS (the write may or may not have landed)."""
    global _answers_owned, _owned_came, _forced
    if threading.current_thread() is not threading.main_thread():
        yield  # (no hold there: a resident server's calls, each in a thread of its own)
        return
    _answers_owned, _owned_came, _forced = True, None, False
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        if not _forced:
            raise
        raise AmbiguousError(
            "stopped by a second signal while the write was being made: it may or may not "
            "have landed; `gitlease show` says which"
        ) from None
    finally:
        _answers_owned = False
        _owned_came = _let_go()


def owned_came() -> int | None:
    """The signal that met the owned write the last :func:`answering_owned` block answered
    (None: none did)."""
    return _owned_came


def raised_after_write(exc: BaseException) -> bool:
    """Whether ``exc`` is what :func:`unhold` raised for a signal that met a write which
    landed (its KeyboardInterrupt comes once the write and its bookkeeping are done)."""
    return exc is _raised_after_write


_forced = False
#: The exception the last unhold raised for a signal that met a landed write.
_raised_after_write: BaseException | None = None


def _record_held(signum: int, _frame: FrameType | None) -> None:
    """The first signal is recorded (and, for a command that answers, said); a second one
    acts at once, as if there were no hold: whoever sends it again will not wait. It acts as
    an exception (KeyboardInterrupt for SIGINT, ``SystemExit(128+N)`` for the others, as
    their default would end the process), so that the write's code still runs its
    ``finally`` blocks and a command that answers can say AMBIGUOUS."""
    global _held_caught, _forced
    if _held_caught is None:
        _held_caught = signum
        if _answers_owned:
            with contextlib.suppress(OSError):  # (a signal handler: straight to the fd)
                os.write(2, f"gitlease: {signal.Signals(signum).name}: finishing the write "
                         "first (send it again to stop at once)\n".encode())  # fmt: skip
        return
    _forced = True
    _let_go()
    # (an exception rather than the default: the write's own code then ends, guards and all)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def hold() -> None:
    """An owned write may land from now on: SIGINT, SIGTERM and SIGHUP are recorded until
    :func:`unhold`, where their disposition would stop the write (main thread only: Python
    runs signal handlers there; an ignored signal stays ignored, a handler of the program's
    own is left in place)."""
    global _held, _forced, _raised_after_write
    if _held is not None or threading.current_thread() is not threading.main_thread():
        return
    _forced, _raised_after_write = False, None  # (nor keep an old one's frames alive)
    # (only the dispositions that would stop a write half way: a handler of the program's own,
    # exec's forwarding or the acquire window's recording, stops nothing and is left alone)
    _held = signals.replace(_record_held, _SIGNALS, only=signals.is_default)


def unhold(*, written: bool = True) -> None:
    """The owned write and what follows it are done: the handlers :func:`hold` replaced come
    back, and a signal it recorded acts now, as it would have (a KeyboardInterrupt, the end
    of the process). Inside :func:`answering_owned`, when ``written`` (the write landed, or
    failed with an answer of its own), the hold lasts until the answer is written instead.
    ``written=False``: nothing was written (the compare-and-swap refused), so a signal acts
    now whoever answers. Only the main thread's hold, from the main thread."""
    global _raised_after_write
    if _held is None or threading.current_thread() is not threading.main_thread():
        return
    if written and _answers_owned:
        return
    caught = _let_go()
    if caught is None:
        return
    try:
        signal.raise_signal(caught)
    except BaseException as exc:
        _raised_after_write = exc if written else None
        raise


def _let_go() -> int | None:
    """End the hold: the old handlers back; the signal it recorded, if any (not acted on)."""
    global _held, _held_caught
    if _held is None or threading.current_thread() is not threading.main_thread():
        return None
    handlers, caught = _held, _held_caught
    _held, _held_caught = None, None
    signals.restore(handlers)
    return caught
