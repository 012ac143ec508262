"""The retention policy: how much history a store keeps, read from git config.

Every write adds a record (a blob) and a reflog line that names it; without a policy
they are kept forever. The policy, applied by the retention pass
(:func:`gitlease.maintenance.prune.retain`, ``gitlease prune``), keeps for each resource:

* its last ``gitlease.historyRecords`` records (default 20),
* every record written in the last ``gitlease.historyAge`` (default 7 days),
* while its claim is active, every record back to that claim's acquire,

and removes a tombstone (a released resource's last record) once it is older than
``gitlease.tombstoneAge`` (default 7 days), leaving a revision floor. The pass runs by
itself about once a day (``gitlease.autoPrune``, default true). The keys are read from the
store's own configuration and the global and system ones, since the store is shared by
every clone of a project (docs/howto/cleanup.md gives the sizes that follow).

This module only decides; it reads no store. The reflog's timestamps are the writers'
wall clocks: a clock that was wrong only keeps more or less history, never changes an
ownership decision, and never lowers a revision (the refs and floors carry those).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from .._util.value import Value
from ..errors import StoreError, UsageError
from ..gitio.gitread import ReflogLine, git_env
from ..model.clock import parse_duration_ms

DAY_MS = 86_400_000
#: Config keys, lower-cased as git reports them, and the defaults (docs/howto/cleanup.md).
RECORDS_KEY = "gitlease.historyrecords"
AGE_KEY = "gitlease.historyage"
TOMBSTONE_KEY = "gitlease.tombstoneage"
AUTO_KEY = "gitlease.autoprune"
_SPELLED = {
    RECORDS_KEY: "gitlease.historyRecords",
    AGE_KEY: "gitlease.historyAge",
    TOMBSTONE_KEY: "gitlease.tombstoneAge",
    AUTO_KEY: "gitlease.autoPrune",
}
_KEYS = r"^gitlease\.(historyrecords|historyage|tombstoneage|autoprune)$"
#: A duration setting that turns its expiry off.
NEVER = "never"
#: How long the pass waits for a resource's guard before it leaves that resource for the
#: next pass: a write holds it for milliseconds, an ``exec`` for as long as its command runs.
GUARD_WAIT_SECONDS = 0.5
_MAX_RECORDS = 1_000_000


class Policy(Value):
    """What the retention pass keeps (None for an age: never expire on age)."""

    __slots__ = ("records", "age_ms", "tombstone_ms", "auto")
    records: int  # at least this many of each resource's latest records
    age_ms: int | None  # and every record younger than this
    tombstone_ms: int | None  # a tombstone older than this is removed (a floor stays)
    auto: bool  # whether writes start the pass by themselves, daily

    def to_dict(self) -> dict[str, Any]:
        """The policy as ``prune --json`` prints it (ages in milliseconds, null: never)."""
        return {
            "history_records": self.records,
            "history_age_ms": self.age_ms,
            "tombstone_age_ms": self.tombstone_ms,
            "auto": self.auto,
        }


DEFAULT = Policy(records=20, age_ms=7 * DAY_MS, tombstone_ms=7 * DAY_MS, auto=True)


def read_policy(git_dir: Path) -> Policy:
    """The policy of the store at ``git_dir``: its config, then global and system (one git
    call). A value that cannot be read is USAGE, naming the key: a typo must not silently
    keep everything, nor drop everything."""
    try:
        result = subprocess.run(
            ["git", "--git-dir", str(git_dir), "config", "--null", "--get-regexp", _KEYS],
            capture_output=True,
            env=git_env(),
        )
    except OSError as exc:
        raise StoreError(f"cannot run git: {exc}") from None
    if result.returncode not in (0, 1):  # 1: none is set
        why = result.stderr.decode("utf-8", "replace").strip()
        raise StoreError(f"cannot read the git configuration of {git_dir}: {why}")
    values: dict[str, str] = {}
    for entry in result.stdout.decode("utf-8", "replace").split("\0"):
        key, _, value = entry.partition("\n")
        if key:
            values[key.lower()] = value.strip()  # the last one wins, as git's own --get does
    return Policy(
        records=_records(values.get(RECORDS_KEY), DEFAULT.records),
        age_ms=_age(values, AGE_KEY, DEFAULT.age_ms),
        tombstone_ms=_age(values, TOMBSTONE_KEY, DEFAULT.tombstone_ms),
        auto=_bool(values.get(AUTO_KEY), DEFAULT.auto),
    )


def _records(text: str | None, default: int) -> int:
    if text is None:
        return default
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= _MAX_RECORDS:
        raise UsageError(
            f"bad {_SPELLED[RECORDS_KEY]} {text[:40]!r}: a whole number from 1 to {_MAX_RECORDS}"
        )
    return int(text)


def _age(values: dict[str, str], key: str, default: int | None) -> int | None:
    text = values.get(key)
    if text is None:
        return default
    if text.lower() == NEVER:
        return None
    return parse_duration_ms(text, name=f"{_SPELLED[key]} (or 'never')")


def _bool(text: str | None, default: bool) -> bool:
    if text is None:
        return default
    lowered = text.lower()
    if lowered in ("true", "yes", "on", "1", ""):  # a bare key is true, as git reads it
        return True
    if lowered in ("false", "no", "off", "0"):
        return False
    raise UsageError(f"bad {_SPELLED[AUTO_KEY]} {text[:40]!r}: true or false")


def first_kept(
    lines: list[ReflogLine], policy: Policy, now_s: float, protected: frozenset[str]
) -> int:
    """The index of the first line to keep: every line from it on stays.

    Kept: the last ``policy.records`` lines; every line from the first one written within
    ``policy.age_ms`` (a later line with an older time, after a clock went back, stays
    too); every line from the first that wrote one of ``protected`` (the current record,
    and an active claim's records back to its acquire).
    """
    start = max(0, len(lines) - policy.records)
    if policy.age_ms is None:
        return 0
    cutoff = now_s - policy.age_ms / 1000
    for i, line in enumerate(lines[:start]):
        if line.new in protected or (line.when is not None and line.when >= cutoff):
            return i
    return start


def rewritten(lines: list[ReflogLine], start: int) -> bytes:
    """The reflog that keeps ``lines[start:]``: the first kept line's old id is cleared, as
    ``git reflog expire --rewrite`` does, so that nothing keeps the dropped record alive."""
    kept = lines[start:]
    if not kept or start == 0:
        return b"".join(line.raw for line in kept)
    first = kept[0]
    zero = b"0" * len(first.old)
    raw = (
        zero + first.raw[len(first.old) :]
        if first.raw.startswith(first.old.encode())
        else first.raw
    )
    return raw + b"".join(line.raw for line in kept[1:])
