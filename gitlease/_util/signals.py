"""The signals that end a command, and holding them off while a child finishes its write.

SIGINT, SIGTERM and SIGHUP are what a person (Ctrl-C, a closed terminal) or a supervisor
ends a command with. The claims engine defers them over a whole claim write
(:mod:`gitlease.claims.interrupts`), ``exec`` forwards them to its command
(:mod:`gitlease.api.guarded`), and a store that writes through ``git update-ref`` holds them
off while git runs (:func:`after`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: The signals a person or a supervisor ends a command with.
ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Their dispositions that end the process (or raise KeyboardInterrupt), which gitlease may
#: take over; a handler of the program's own, or an ignored signal, is the program's to keep.
DEFAULTS = (signal.SIG_DFL, signal.default_int_handler)


def is_default(handler: object) -> bool:
    """Whether ``handler`` is one of :data:`DEFAULTS` (for :func:`replace`'s ``only``)."""
    return handler in DEFAULTS


def replace(
    handler: Callable[[int, FrameType | None], Any],
    signums: Iterable[int] = ENDING,
    *,
    only: Callable[[Any], bool] | None = None,
) -> dict[int, Any]:
    """Put ``handler`` in place for each of ``signums`` (for those whose current handler
    ``only`` accepts, when given); the handlers it replaced, for :func:`restore`."""
    saved: dict[int, Any] = {}
    for signum in signums:
        if only is None or only(signal.getsignal(signum)):
            saved[signum] = signal.signal(signum, handler)
    return saved


def restore(saved: Mapping[int, Any]) -> None:
    """Put back the handlers :func:`replace` replaced."""
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@contextmanager
def after() -> Iterator[None]:
    """For the block: :data:`ENDING` recorded, and acted on once the block is done.

    For a child that must not be stopped half way (``git update-ref`` of a bundle's refs,
    :mod:`gitlease.store.plumbing`): a KeyboardInterrupt raised in ``subprocess.run``'s wait
    kills the child (it is given a quarter of a second), and a SIGTERM's default ends this
    process while the child still writes. A command that defers these signals over its
    whole write (:mod:`gitlease.claims.interrupts`) gets them from here as it would have; one
    that does not ends as it would have, after the block. Main thread only (Python runs
    signal handlers there); an ignored signal stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def record(signum: int, _frame: FrameType | None) -> None:
        caught.append(signum)

    saved = replace(record, only=lambda current: current is not signal.SIG_IGN)
    try:
        yield
    finally:
        restore(saved)
        _deliver(caught)  # (each, in order: two Ctrl-C are two, never merged into one)


def _deliver(caught: list[int]) -> None:
    """Raise each signal in turn, the next even when the handler of one raised (a SIGTERM
    after a SIGINT whose KeyboardInterrupt a program catches must still end it)."""
    if caught:
        try:
            signal.raise_signal(caught[0])
        finally:
            _deliver(caught[1:])
