"""What ``verify`` reports: each problem it found, and whether ``--repair`` fixed it.

A module of its own because every check that finds a problem (:mod:`.chains`,
:mod:`.leftovers`) and the repairs that fix one (:mod:`.repair`) make and amend these,
and the retention pass counts the receipts it removed through them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Problem:
    """One thing ``verify`` found wrong, and whether ``--repair`` fixed it."""

    #: invalid-record, bad-ref-name, illegal-transition, rolled-back, stale-lock,
    #: orphan-receipt, partial-bundle
    kind: str
    ref: str
    message: str
    resource: str | None = None
    repaired: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The problem as a JSON object."""
        return dict(self.__dict__)


@dataclass
class Report:
    """What ``verify`` checked and found."""

    checked: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong (or everything found was repaired)."""
        return all(p.repaired for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        """The report as ``verify --json`` prints it."""
        return {
            "ok": self.ok,
            "checked": self.checked,
            "problems": [p.to_dict() for p in self.problems],
        }
