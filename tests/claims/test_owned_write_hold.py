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
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, "the hold took it over"
        os.kill(os.getpid(), signal.SIGHUP)
        interrupts.unhold()  # (nothing recorded, nothing raised)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_write_off_the_main_thread_leaves_the_main_threads_hold_alone() -> None:
    """A worker thread's heartbeat that ended while the main thread's write was held ended
    that hold from the worker: ``signal.signal`` refused there (the worker's landed write
    raised ValueError) and the main thread kept the recording handlers for good, so a later
    Ctrl-C did nothing (review of the hold, finding 1)."""
    import threading

    before = signal.getsignal(signal.SIGINT)
    interrupts.hold()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            interrupts.hold()  # (nothing off the main thread)
            interrupts.unhold()
            interrupts.unhold(written=False)
        except BaseException as exc:  # (reported below)
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert errors == []
    assert signal.getsignal(signal.SIGINT) is not before, "the worker ended the main hold"
    interrupts.unhold()
    assert signal.getsignal(signal.SIGINT) is before


def test_a_handler_of_the_programs_own_is_left_in_place() -> None:
    """``exec`` forwards a signal to its command from a handler of its own; a renewal's hold
    took it over, so a SIGTERM reached the command only once the renewal was done (seconds,
    over a remote that did not answer: review finding 3). A handler that stops nothing is
    not held."""
    came: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, _frame: came.append(signum))
    try:
        interrupts.hold()
        os.kill(os.getpid(), signal.SIGTERM)
        assert came == [signal.SIGTERM], "the program's own handler was held"
        interrupts.unhold()
        assert came == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_second_signal_acts_at_once() -> None:
    """Over a remote that does not answer, the hold can last a network timeout: whoever sends
    the signal again does not wait (review finding 2)."""
    before = signal.getsignal(signal.SIGINT)
    interrupts.hold()
    _sigint()  # (recorded)
    with pytest.raises(KeyboardInterrupt):
        _sigint()
    assert signal.getsignal(signal.SIGINT) is before
    interrupts.unhold()  # (nothing left to end)


def test_a_command_stopped_by_a_second_signal_is_ambiguous() -> None:
    from gitlease.errors import AmbiguousError

    with pytest.raises(AmbiguousError, match="may or may not"), interrupts.answering_owned():
        interrupts.hold()
        _sigint()
        _sigint()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_sigterm_ends_the_write_as_an_exit_not_a_kill() -> None:
    """A second SIGTERM killed the process where it stood (its default), the outcome unsaid:
    it now ends it as ``SystemExit(143)``, so the write's own code still runs its ``finally``
    blocks, and a command that answers says AMBIGUOUS (review, second round)."""
    from gitlease.errors import AmbiguousError

    interrupts.hold()
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(SystemExit) as ended:
        os.kill(os.getpid(), signal.SIGTERM)
    assert ended.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with pytest.raises(AmbiguousError), interrupts.answering_owned():
        interrupts.hold()
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGHUP)
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
