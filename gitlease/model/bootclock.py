"""Reading a record's boot-clock expiry on this process's clock, or knowing it cannot be.

Two signs that a record was written on another boot clock under this kernel boot id:

- the boot id gitlease records carries the time namespace's boot-clock offset when it
  is not zero (``<boot id>~boottime+3600000ms``; without one it is the boot id byte for
  byte, as before). The offset is exact, so such a record is *translated*: its expiry
  less its writer's offset, plus this process's, is its expiry on this clock (a time
  namespace runs the host's boot clock moved by its offset, for its whole life);
- the writer's boot-clock start in wall time (a record's ``expires-at`` less its
  ``boot-expires-ms``, translated as above) differs from this process's (wall now less
  boot clock now) by more than :data:`START_TOLERANCE_MS`: VM clones restored from one
  memory snapshot share a boot id and a namespace, not a boot clock. The tolerance is
  wide because the wall clock may be stepped (an hour either way changes no decision);
  a VM clone's clock days apart is far outside it. A false alarm only makes a takeover
  wait the sightings rule's TTL.

A record of this kernel boot on a clock that cannot be translated cannot be a claim from
before a reboot, so it is never simply expired: it is timed by when this host first saw
it (sightings, docs/remote.md), in a local store too (:func:`stamp_foreign`).
"""

from __future__ import annotations

import re
from pathlib import Path

from .._util import lazy
from ..gitio import layout
from ..gitio.gitread import Snapshot
from .clock import Now, parse_rfc3339
from .sightings import Sightings

#: How far two boot-clock starts (in wall time) may lie apart and still be one clock.
START_TOLERANCE_MS = 6 * 3_600_000

_QUALIFIER = lazy(r"boottime([+-][0-9]{1,18})ms", re.ASCII)
_FIELDS = lazy(
    rb"\nexpires-at (?P<exp>[0-9T:.Z-]{1,40})\n(?:.*\n)*?boot-id (?P<boot>[!-~]{1,200})\n"
    rb"boot-expires-ms (?P<ms>-?[0-9]{1,19})\n"
)


def kernel_boot(boot: str) -> str:
    """The kernel's boot id within a recorded boot id (without the clock's qualifier)."""
    return boot.partition("~")[0]


def clock_offset_ms(boot: str) -> int | None:
    """The boot-clock offset a recorded boot id names (0 without one; None: unreadable)."""
    _, tilde, qualifier = boot.partition("~")
    if not tilde:
        return 0
    match = _QUALIFIER.fullmatch(qualifier)
    return int(match[1]) if match else None


def on_this_clock_ms(
    boot: str, expires_at: str, boot_expires_ms: int, now: Now, *, check_start: bool = True
) -> int | None:
    """The record's boot expiry on this process's boot clock, or None when its clock is not
    this one translated (another boot, an unreadable qualifier, or, with ``check_start``, a
    boot clock that started more than :data:`START_TOLERANCE_MS` away in wall time).

    A holder judging its own claim passes ``check_start=False``: its receipt says the claim
    was written here, and a wall clock stepped by days must not cost it the claim."""
    if kernel_boot(boot) != kernel_boot(now.boot):
        return None
    theirs, ours = clock_offset_ms(boot), clock_offset_ms(now.boot)
    if theirs is None or ours is None:
        return None
    translated = boot_expires_ms - theirs + ours
    if not check_start:
        return translated
    try:
        start = parse_rfc3339(expires_at) - translated
    except ValueError:
        return translated
    if abs(start - (now.wall_ms - now.boot_ms)) > START_TOLERANCE_MS:
        return None
    return translated


def writer_start_ms(expires_at: str, boot_expires_ms: int) -> int | None:
    """A record's boot-clock start in wall milliseconds (on its writer's clock), or None."""
    try:
        return parse_rfc3339(expires_at) - boot_expires_ms
    except ValueError:
        return None


def foreign_on_this_boot(data: bytes | None, now: Now) -> bool:
    """Whether raw record bytes were written under this kernel boot on a clock that cannot
    be translated to this one (they then need a sighting)."""
    if not data:
        return False
    match = _FIELDS.search(data)
    if match is None:
        return False
    boot = match["boot"].decode("ascii", "replace")
    if kernel_boot(boot) != kernel_boot(now.boot):
        return False
    exp = match["exp"].decode("ascii")
    return on_this_clock_ms(boot, exp, int(match["ms"]), now) is None


def stamp_foreign(git_dir: Path, snaps: list[Snapshot], now: Now | None = None) -> list[Snapshot]:
    """``snaps`` with when this host first saw each record written under this kernel boot on
    a foreign clock (the others unchanged, and no file touched when there is none)."""
    if not any(s.first_seen_ms is None and s.data for s in snaps):
        return snaps
    now = now or Now.read()
    picks = [
        i
        for i, s in enumerate(snaps)
        if s.first_seen_ms is None and foreign_on_this_boot(s.data, now)
    ]
    if not picks:
        return snaps
    sightings = Sightings(layout.sightings(git_dir))
    stamped = sightings.stamp([snaps[i] for i in picks], now, complete=False)
    out = list(snaps)
    for i, snap in zip(picks, stamped, strict=True):
        out[i] = snap
    return out
