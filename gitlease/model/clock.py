"""Time: the boot clock that judges expiry, wall times for people, durations.

Expiry is decided on ``CLOCK_BOOTTIME`` (milliseconds since boot, counting
suspend) together with the kernel's boot id, so a wall-clock jump never expires
a live claim nor revives a dead one, and a claim written before a reboot is
expired. Wall-clock times are recorded only for people to read.
"""

from __future__ import annotations

import re
import time
from functools import cache, lru_cache

from .._util import lazy
from .._util import testing as _testing
from .._util.value import Value
from ..errors import UsageError

_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
_TEST_BOOT_ID: str | None = None
_TEST_BOOT_OFFSET_MS = 0


def load_test_switches() -> None:
    """Test-only: play another host on this machine (another boot id, a boot clock set far
    off), so that the tests of a remote store can run two "hosts" side by side. Read at
    import (and again by in-process test racers); honoured only inside gitlease's tests
    (:mod:`gitlease._util.testing`)."""
    global _TEST_BOOT_ID, _TEST_BOOT_OFFSET_MS
    _TEST_BOOT_ID = _testing.switch("GITLEASE_TESTING_BOOT_ID") or None
    offset = (_testing.switch("GITLEASE_TESTING_BOOT_OFFSET_MS") or "0").strip()
    # (Anything but a plain integer is ignored: an environment variable must never crash.)
    _TEST_BOOT_OFFSET_MS = int(offset) if re.fullmatch(r"-?[0-9]{1,18}", offset) else 0
    boot_id.cache_clear()


@cache
def boot_id() -> str:
    """The kernel's id for this boot, qualified by the boot clock's offset in a time
    namespace that moves it (``<boot id>~boottime+3600000ms``): such a namespace runs
    ``CLOCK_BOOTTIME`` at that offset under the same boot id, so its records must not be
    read on this clock as they stand (:mod:`gitlease.bootclock`). Outside one (or with a
    zero offset) it is the kernel's boot id, byte for byte as every earlier version wrote."""
    if _TEST_BOOT_ID:
        return _TEST_BOOT_ID
    try:
        with open(_BOOT_ID_PATH, encoding="ascii") as f:
            kernel = f.read().strip()
    except OSError:  # not Linux: fall back to the boot time as seen now (to the second)
        return "boot-" + str(int(time.time() - _boot_seconds()))
    offset = boot_clock_offset_ms()
    return kernel if not offset else f"{kernel}~boottime{offset:+d}ms"


_OFFSET_LINE = lazy(r"boottime\s+(-?[0-9]{1,19})\s+([0-9]{1,9})", re.ASCII)


def boot_clock_offset_ms() -> int:
    """How far this process's time namespace moves ``CLOCK_BOOTTIME`` (milliseconds; 0 in
    the initial namespace, or where the kernel has no time namespaces)."""
    try:
        with open("/proc/self/timens_offsets", encoding="ascii") as f:
            text = f.read()
    except OSError:
        return 0
    match = _OFFSET_LINE.search(text)
    if match is None:
        return 0
    return int(match[1]) * 1000 + int(match[2]) // 1_000_000


load_test_switches()


def _boot_seconds() -> float:
    clock = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
    return time.clock_gettime(clock)


class Now(Value):
    """One reading of both clocks, so a decision and what it records agree."""

    __slots__ = ("boot_ms", "wall_ms", "boot")
    boot_ms: int  # CLOCK_BOOTTIME: never jumps, and decides every expiry
    wall_ms: int  # for people, and for another host's records (sightings)
    boot: str  # the boot id the boot clock counts from

    @classmethod
    def read(cls) -> Now:
        """The clocks now: the boot clock (which decides expiry), the wall clock, the boot."""
        boot_ms = int(_boot_seconds() * 1000) + _TEST_BOOT_OFFSET_MS
        return cls(boot_ms, time.time_ns() // 1_000_000, boot_id())


def rfc3339(wall_ms: int) -> str:
    """RFC 3339 UTC with milliseconds, the form every record and JSON document uses."""
    t = time.gmtime(wall_ms // 1000)
    return (
        f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{wall_ms % 1000:03d}Z"
    )


# re.ASCII: \d is 0-9 only (not every Unicode digit); fullmatch: no trailing newline.
_RFC3339 = lazy(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z", re.ASCII)


def parse_rfc3339(text: str) -> int:
    """Milliseconds since the epoch from :func:`rfc3339`'s exact form (ValueError otherwise)."""
    match = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"not an RFC 3339 UTC time with milliseconds: {text!r}")
    y, mo, d, h, mi, s, ms = map(int, match.groups())
    day = _day_ms(y, mo, d)
    if day is None or not (h < 24 and mi < 60 and s < 60):
        raise ValueError(f"not a valid time: {text!r}")
    return day + ((h * 60 + mi) * 60 + s) * 1000 + ms


@lru_cache(maxsize=64)
def _day_ms(y: int, mo: int, d: int) -> int | None:
    """Milliseconds from the epoch to the start of a day, or None if there is no such day
    (kept for the few days a store's records name: ``list`` reads every record's times)."""
    if not (1 <= mo <= 12 and 1 <= d <= _days_in_month(y, mo)):
        return None
    return _days_from_civil(y, mo, d) * 86_400_000


def _days_in_month(y: int, m: int) -> int:
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    return (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[m - 1]


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# re.ASCII: ASCII digits and spaces only (float() would read "٥" as 5); fullmatch: no "\n".
_DURATION = lazy(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", re.ASCII)
MAX_DURATION_MS = 366 * 86_400_000


def parse_duration_ms(text: str | int | float, *, name: str = "duration") -> int:
    """Read ``90``, ``90s``, ``15m``, ``2h``, ``1d`` (and ``500ms``) as milliseconds."""
    if isinstance(text, bool):
        raise UsageError(f"bad {name} {text!r}")
    if isinstance(text, (int, float)):
        text = str(text)
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    shown = repr(text) if len(repr(text)) <= 42 else repr(text)[:40] + "…"
    if not match:
        raise UsageError(f"bad {name} {shown}: use a number and a unit, e.g. 90s, 15m, 2h, 1d")
    value = float(match.group(1)) * _UNITS_MS[match.group(2) or "s"]
    if value > MAX_DURATION_MS:
        raise UsageError(f"bad {name} {shown}: at most 366 days")
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
