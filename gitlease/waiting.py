"""Waiting for a held resource: ``--wait`` retries with backoff and jitter.

A caller that asked to wait retries its whole attempt (read, decide, write)
while the answer is HELD, until its deadline; between attempts it reports a
:class:`Waiting` (the CLI's live status line shows it).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from .claim import Claim
from .errors import CompareAndSwapFailed, HeldError
from .value import Value

T = TypeVar("T")


class Waiting(Value):
    """What ``--wait`` reports between attempts (for a live status line)."""

    __slots__ = ("attempt", "waited_ms", "holder")
    attempt: int
    waited_ms: int
    holder: Claim | None


def retry_until(
    deadline_ms: int | None,
    attempt: Callable[[], T],
    on_wait: Callable[[Waiting], None] | None = None,
) -> T:
    """Run ``attempt``; while it answers HELD, retry with backoff and jitter until the deadline."""
    started = time.monotonic()
    delay = 0.05
    tries = 0
    while True:
        tries += 1
        try:
            return attempt()
        except (HeldError, CompareAndSwapFailed) as exc:
            waited = int((time.monotonic() - started) * 1000)
            if deadline_ms is None or waited >= deadline_ms:
                raise
            if on_wait is not None:
                holder = exc.holder if isinstance(exc, HeldError) else None
                on_wait(Waiting(tries, waited, holder if isinstance(holder, Claim) else None))
            sleep = min(delay, (deadline_ms - waited) / 1000) * random.uniform(0.5, 1.0)
            time.sleep(max(sleep, 0.005))
            delay = min(delay * 1.6, 2.0)
