"""Waiting for a held resource: ``--wait`` retries, in turn with the other waiters.

A caller that asked to wait stands in this host's queue of waiters
(:mod:`gitlease.state.waitqueue`) and retries its whole attempt (read, decide,
write) while the answer is HELD, until its deadline. Only a caller that nobody
waits ahead of tries to take the resource; it looks often (the resource goes
to it within milliseconds of being released), the others look less often,
to notice their turn and to show the queue that they are still there. Between
attempts it reports a :class:`Waiting` (the CLI's live status line shows it).

Without a queue (one that cannot be joined) the retries back off with jitter,
as before: safe, but not fair.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import ClassVar, TypeVar

from .._util.value import Value
from ..errors import CompareAndSwapFailed, HeldError
from ..model.claim import Claim
from ..state.waitqueue import Line

T = TypeVar("T")

#: The first pause of a caller that is first in line; it grows to the store's longest pause.
FIRST_PAUSE_SECONDS = 0.005
#: The pause of a caller with waiters ahead of it (it only looks at the queue).
QUEUED_PAUSE_SECONDS = 0.05


class Waiting(Value):
    """What ``--wait`` reports between attempts (for a live status line)."""

    __slots__ = ("attempt", "waited_ms", "holder", "ahead", "candidates")
    _defaults: ClassVar[dict[str, object]] = {"ahead": None, "candidates": 1}
    attempt: int
    waited_ms: int
    holder: Claim | None  # the claim in the way (for several candidates: the soonest to end)
    ahead: int | None  # callers queued ahead of this one (None: not queued)
    candidates: int  # how many resources it waits for any of (acquire --first-free)


def retry_until(
    deadline_ms: int | None,
    attempt: Callable[[], T],
    on_wait: Callable[[Waiting], None] | None = None,
    *,
    line: Line | None = None,
    longest_pause: float = 2.0,
) -> T:
    """Run ``attempt``; while it answers HELD, retry until the deadline.

    ``line``: the caller's place among this host's waiters for the refs it
    wants (``attempt`` itself refuses while someone waits ahead). ``longest_pause``:
    how long the first in line may leave between looks (a store that must be
    fetched from the network looks less often).
    """
    if deadline_ms is None:
        return attempt()
    with line.joined() if line is not None else nullcontext():
        return _retry(deadline_ms, attempt, on_wait, line, longest_pause)


def _retry(
    deadline_ms: int,
    attempt: Callable[[], T],
    on_wait: Callable[[Waiting], None] | None,
    line: Line | None,
    longest_pause: float,
) -> T:
    started = time.monotonic()
    queued = line is not None and line.ticket is not None
    candidates = len(line.refs) if line is not None else 1
    backoff = 0.05
    first_pause = FIRST_PAUSE_SECONDS
    tries = 0
    while True:
        tries += 1
        began = time.monotonic()
        try:
            return attempt()
        except (HeldError, CompareAndSwapFailed) as exc:
            if isinstance(exc, HeldError) and _hopeless(exc, deadline_ms - _ms_since(started)):
                raise  # (the caller's own claim outlasts the wait: it would end the same way)
            error = exc
        waited = int((time.monotonic() - started) * 1000)
        if waited >= deadline_ms:
            raise error
        took = time.monotonic() - began
        holder = error.holder if isinstance(error, HeldError) else None
        ahead = _ahead(line) if queued and line is not None else None
        while True:  # pause; with waiters ahead, only watch the queue until it is our turn
            if on_wait is not None:
                shown = holder if isinstance(holder, Claim) else None
                on_wait(Waiting(tries, waited, shown, ahead, candidates))
            if ahead is None:
                pause = backoff * random.uniform(0.5, 1.0)
                backoff = min(backoff * 1.6, 2.0)
            elif ahead == 0:
                pause = max(first_pause, took)  # a long list of candidates: half the time
                first_pause = min(first_pause * 1.5, longest_pause)
            else:
                pause = QUEUED_PAUSE_SECONDS
                first_pause = FIRST_PAUSE_SECONDS
            time.sleep(max(min(pause, (deadline_ms - waited) / 1000), 0.002))
            waited = int((time.monotonic() - started) * 1000)
            if line is None or not queued:
                break
            line.touch()
            if waited >= deadline_ms:
                break  # one last attempt: it answers with what is in the way now
            ahead = _ahead(line)
            if ahead == 0:
                break


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _hopeless(error: HeldError, left_ms: int) -> bool:
    """Whether waiting ``left_ms`` more cannot change ``error``: the active claim is the
    caller's own, bound to its worktree (:attr:`HeldError.retryable` False), and lasts
    longer than the wait (one that expires within it: wait then). An unbound claim of the
    same worktree may be another process's, released any time: waited for as any other."""
    if error.retryable:
        return False
    holder = error.holder
    expires_in = holder.expires_in_ms if isinstance(holder, Claim) else None
    return expires_in is None or expires_in >= left_ms


def _ahead(line: Line) -> int:
    """Waiters ahead of this caller in its shortest line (0: it is first for some ref)."""
    counts = line.ahead()
    return min((counts.get(ref, 0) for ref in line.refs), default=0)
