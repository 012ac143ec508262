"""The hold over an owned write (heartbeat, release), in this process: what a signal that
meets it does, and that nothing of it outlives the write (docs/reference/exit-codes.md).

The end-to-end cases, a real CLI process stopped right after its write while a test sends
the signal, are in tests/system/test_stalls.py; these pin the rules each of them relies on.
"""

from __future__ import annotations

import os
import signal

import pytest

from gitlease.claims import interrupts


def _sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_a_signal_during_the_hold_acts_once_the_hold_ends() -> None:
    before = signal.getsignal(signal.SIGINT)
    interrupts.hold()
    _sigint()  # (recorded: no KeyboardInterrupt here, half way through the bookkeeping)
    with pytest.raises(KeyboardInterrupt):
        interrupts.unhold()
    assert signal.getsignal(signal.SIGINT) is before


def test_a_refused_write_lets_the_signal_act_even_for_a_command_that_answers() -> None:
    with pytest.raises(KeyboardInterrupt), interrupts.answering_owned():
        interrupts.hold()
        _sigint()
        interrupts.unhold(written=False)  # nothing written: 130 is the truth
    assert interrupts.owned_came() is None


def test_a_command_that_answers_holds_the_signal_until_its_answer_then_names_it() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.answering_owned():
        interrupts.hold()
        os.kill(os.getpid(), signal.SIGTERM)
        interrupts.unhold()  # (the write landed: still held, through the answer)
        assert signal.getsignal(signal.SIGTERM) is not before
    assert interrupts.owned_came() == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before, "the hold outlived the command"
    # a later write in this process is not answered for: its signal acts again
    interrupts.hold()
    _sigint()
    with pytest.raises(KeyboardInterrupt):
        interrupts.unhold()


def test_an_ignored_signal_stays_ignored() -> None:
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        interrupts.hold()
        os.kill(os.getpid(), signal.SIGHUP)
        interrupts.unhold()  # (nothing recorded, nothing raised)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
