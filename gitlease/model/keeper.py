"""What keeps a claim alive on this host: a :class:`Keeper`, one entry of the host's registry.

A claim shows the keeper renewing it, where a command looked (the ``keepalive`` of a
:class:`~gitlease.model.claim.Claim`). The registry that writes and reads these entries is
:mod:`gitlease.state.keepers`. One keeper process serves every claim of its user, so several
entries name one pid. Nothing in one is secret: pids, claim ids, paths.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._util import procs as _procs
from .._util.value import Value


class Keeper(Value):
    """A keeper process and one claim (or bundle) it keeps alive (one registry entry;
    nothing secret)."""

    __slots__ = (
        "pid", "start", "boot", "claims", "bundle_id", "watched_pid", "watched_start",
        "watched_name", "started_at", "until", "log", "socket",
    )  # fmt: skip
    _defaults: ClassVar[dict[str, Any]] = {"socket": ""}
    pid: int
    start: int  # the process's start time: a pid alone may name a later process
    boot: str
    claims: tuple[tuple[str, str, str], ...]  # (resource, ref, claim id) of every claim renewed
    bundle_id: str | None
    watched_pid: int
    watched_start: int
    watched_name: str
    started_at: str
    until: str  # when it stops at the latest (--max)
    log: str
    #: The keeper's socket, where ``release`` asks it to stop ("": a 0.2 keepalive process).
    socket: str

    @property
    def alive(self) -> bool:
        """Whether the process still runs in this boot (not a later process with its pid)."""
        return self.boot == _procs.boot_id() and _procs.alive(self.pid, self.start)

    def keeps(self, ref: str, claim_id: str) -> bool:
        """Whether it renews the claim ``claim_id`` at ``ref``."""
        return any(r == ref and c == claim_id for _, r, c in self.claims)

    def to_dict(self) -> dict[str, Any]:
        """The ``keepalive`` object of a claim document (docs/reference/json.md)."""
        return {
            "pid": self.pid,
            "watching": {"pid": self.watched_pid, "name": self.watched_name},
            "started_at": self.started_at,
            "until": self.until,
            "log": self.log,
        }

    def describe(self) -> str:
        """One line for people: who keeps it, what it watches, until when, where it logs."""
        return (
            f"kept alive by pid {self.pid}, watching pid {self.watched_pid} "
            f"({self.watched_name}), until {self.until} at the latest; log {self.log}"
        )

    def entry(self) -> dict[str, Any]:
        """The registry's form (everything, for :func:`~gitlease.state.keepers.parse`)."""
        doc = self.as_dict()
        doc["claims"] = [list(c) for c in self.claims]
        return doc
