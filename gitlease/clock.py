"""Time: the boot clock that judges expiry, wall times for people, durations.

Expiry is decided on ``CLOCK_BOOTTIME`` (milliseconds since boot, counting
suspend) together with the kernel's boot id, so a wall-clock jump never expires
a live claim nor revives a dead one, and a claim written before a reboot is
expired. Wall-clock times are recorded only for people to read.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import dataclass
from functools import cache

from .errors import UsageError

_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


@cache
def boot_id() -> str:
    """The kernel's id for this boot; a record from another boot is expired."""
    try:
        with open(_BOOT_ID_PATH, encoding="ascii") as f:
            return f.read().strip()
    except OSError:  # not Linux: fall back to the boot time as seen now (to the second)
        return "boot-" + str(int(time.time() - _boot_seconds()))


def _boot_seconds() -> float:
    clock = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
    return time.clock_gettime(clock)


@dataclass(frozen=True)
class Now:
    """One reading of both clocks, so a decision and what it records agree."""

    boot_ms: int
    wall_ms: int
    boot: str

    @classmethod
    def read(cls) -> Now:
        return cls(int(_boot_seconds() * 1000), time.time_ns() // 1_000_000, boot_id())


def rfc3339(wall_ms: int) -> str:
    """RFC 3339 UTC with milliseconds, the form every record and JSON document uses."""
    moment = _dt.datetime.fromtimestamp(wall_ms / 1000, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{wall_ms % 1000:03d}Z"


_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z$")


def parse_rfc3339(text: str) -> int:
    """Milliseconds since the epoch from :func:`rfc3339`'s exact form."""
    match = _RFC3339.match(text)
    if not match:
        raise ValueError(f"not an RFC 3339 UTC time with milliseconds: {text!r}")
    y, mo, d, h, mi, s, ms = (int(g) for g in match.groups())
    moment = _dt.datetime(y, mo, d, h, mi, s, tzinfo=_dt.UTC)
    return int(moment.timestamp()) * 1000 + ms


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
MAX_DURATION_MS = 366 * 86_400_000


def parse_duration_ms(text: str | int | float, *, name: str = "duration") -> int:
    """Read ``90``, ``90s``, ``15m``, ``2h``, ``1d`` (and ``500ms``) as milliseconds."""
    if isinstance(text, bool):
        raise UsageError(f"bad {name} {text!r}")
    if isinstance(text, (int, float)):
        text = str(text)
    match = _DURATION.match(text) if isinstance(text, str) else None
    if not match:
        raise UsageError(
            f"bad {name} {text!r}: use a number with an optional unit, e.g. 90, 90s, 15m, 2h, 1d"
        )
    value = float(match.group(1)) * _UNITS_MS[match.group(2) or "s"]
    if value > MAX_DURATION_MS:
        raise UsageError(f"bad {name} {text!r}: at most 366 days")
    return round(value)


def format_duration(ms: int) -> str:
    """A short human duration such as ``4m 12s`` or ``1h 3m``."""
    seconds = max(0, ms) // 1000
    if seconds < 60:
        return f"{seconds}s" if ms >= 1000 or ms <= 0 else f"{ms}ms"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s" if seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h" if hours else f"{days}d"
