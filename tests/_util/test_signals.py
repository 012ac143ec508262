"""Signals held off while git writes (gitlease/_util/signals.py): each one that came is
delivered afterwards, in order, to the handler in place (docs/reference/exit-codes.md)."""

from __future__ import annotations

import os
import signal

from gitlease._util import signals


def test_every_signal_held_off_is_delivered_afterwards_in_order() -> None:
    """Two Ctrl-C during a slow ``git update-ref`` counted as one (they were merged), so the
    hold of an owned write never saw the second, which is to stop the command at once."""
    came: list[int] = []
    both = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.signal(s, lambda n, _f: came.append(n)) for s in both}
    try:
        with signals.after():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            assert came == [], "delivered while git still wrote"
        assert came == [signal.SIGINT, signal.SIGTERM, signal.SIGINT]
    finally:
        signals.restore(before)


def test_a_signal_after_one_whose_handler_raised_is_still_delivered() -> None:
    """INT, INT, TERM during ``git update-ref``: the second INT raised out of the delivery
    (the hold of an owned write stops at once), and the TERM was never delivered: a program
    that caught the KeyboardInterrupt and went on survived a SIGTERM (third review)."""
    came: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        came.append(signum)
        raise KeyboardInterrupt

    before = {
        signal.SIGINT: signal.signal(signal.SIGINT, interrupt),
        signal.SIGTERM: signal.signal(signal.SIGTERM, lambda n, _f: came.append(n)),
    }
    try:
        try:
            with signals.after():
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            pass
        assert came == [signal.SIGINT, signal.SIGTERM]
    finally:
        signals.restore(before)
