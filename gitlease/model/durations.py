"""Durations typed on a command line: a unit always, several parts allowed.

``--ttl 90`` used to mean 90 seconds silently (a caller who meant minutes got a claim that
lapsed mid-work), and ``1h30m`` was refused. A duration given as text now needs a unit on
every number (``90s``, ``15m``, ``2h``, ``1d``, ``500ms``), and may join several
(``1h30m``, ``2m30s``); a bare number is USAGE, naming ``30s``. Numbers given through the
Python API (``ttl=90``, ``ttl=1.5``) are seconds, as documented there.
"""

from __future__ import annotations

import re

from .._util import lazy
from ..errors import UsageError
from .clock import MAX_DURATION_MS, parse_duration_ms

# re.ASCII: ASCII digits only ("٥" is no 5).
_BARE = lazy(r"\s*\d+(?:\.\d+)?\s*", re.ASCII)
_PART = lazy(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", re.ASCII)
_COMPOUND = lazy(r"\s*(?:\d+(?:\.\d+)?(?:ms|s|m|h|d)){2,}\s*", re.ASCII)


def duration_ms(text: str | int | float, *, name: str = "duration") -> int:
    """``text`` in milliseconds: ``90s``, ``15m``, ``1h30m``...; USAGE for a bare number."""
    if isinstance(text, str):
        if _BARE.fullmatch(text):
            # (the example must be a duration every option takes: never 0s)
            seconds = float(text)
            example = f"{text.strip()}s" if 1 <= seconds <= MAX_DURATION_MS / 1000 else "30s"
            raise UsageError(
                f"bad {name} {text.strip()!r}: give a unit, e.g. {example} for seconds "
                "(30s, 15m, 2h, 1d; parts may be joined: 1h30m)"
            )
        if _COMPOUND.fullmatch(text):
            total = sum(parse_duration_ms(m.group(), name=name) for m in _PART.finditer(text))
            if total > MAX_DURATION_MS:
                raise UsageError(f"bad {name} {text.strip()!r}: at most 366 days")
            return total
    return parse_duration_ms(text, name=name)
