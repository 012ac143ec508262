"""The fence's verdict on a push or a range: what each trailer was judged, and the refusal
people read (the server's ``remote:`` lines, ``gitlease fence-check``). See docs/fencing.md.
"""

from __future__ import annotations

import textwrap
from typing import Any, ClassVar

from .._util.text import printable_strict
from .._util.value import Value
from .git import REQUIRE_CONFIG, TRAILER, TRAILERS_CONFIG
from .trailer import Trailer

#: The verdict that lets a trailer's commits land.
ACCEPTED = "current"


class Finding(Value):
    """One distinct trailer value in the commits, and what the server's records say of it.

    ``verdict``: current (accepted), replaced, released, unknown, invalid (the record at
    the server cannot be trusted) or malformed (the trailer cannot be read).
    """

    __slots__ = ("value", "trailer", "verdict", "detail", "current", "count", "commits", "refs")
    _defaults: ClassVar[dict[str, Any]] = {"current": None}
    value: str
    trailer: Trailer | None
    verdict: str
    detail: str
    current: dict[str, Any] | None
    count: int
    commits: tuple[str, ...]
    refs: tuple[str, ...]

    @property
    def accepted(self) -> bool:
        """Its claim is current: the commits carrying it may land."""
        return self.verdict == ACCEPTED

    def to_dict(self) -> dict[str, Any]:
        """The finding as ``fence-check --json`` prints it."""
        t = self.trailer
        return {
            "trailer": self.value,
            "resource": t.resource if t else None,
            "claim_id": t.claim_id if t else None,
            "revision": t.revision if t else None,
            "verdict": self.verdict,
            "accepted": self.accepted,
            "detail": self.detail,
            "current": self.current,
            "commits": self.count,
            "first_commits": list(self.commits),
            "refs": list(self.refs),
        }


class Unclaimed(Value):
    """Commits without any trailer that a protected ref would receive."""

    __slots__ = ("ref", "count", "commits")
    ref: str
    count: int
    commits: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The commits as ``fence-check --json`` prints them."""
        return {"ref": self.ref, "commits": self.count, "first_commits": list(self.commits)}


class Report(Value):
    """The verdict on a push or a range: accepted only if every finding is, and nothing is
    unclaimed."""

    __slots__ = ("commits", "findings", "unclaimed", "require_claim", "protect")
    commits: int
    findings: tuple[Finding, ...]
    unclaimed: tuple[Unclaimed, ...]
    require_claim: bool
    protect: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Every trailer is accepted and no protected ref receives a commit without one."""
        return all(f.accepted for f in self.findings) and not self.unclaimed

    @property
    def untrusted(self) -> bool:
        """A record at the server could not be trusted (a store problem, exit 7)."""
        return any(f.verdict == "invalid" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The report as ``fence-check --json`` prints it (docs/reference/json.md)."""
        return {
            "ok": self.ok,
            "commits": self.commits,
            "claims": [f.to_dict() for f in self.findings],
            "unclaimed": [u.to_dict() for u in self.unclaimed],
            "require_claim": self.require_claim,
            "protect": list(self.protect),
        }

    def summary(self) -> str:
        """One line: how many commits and claims, and what was refused."""
        claims = len([f for f in self.findings if f.trailer is not None])
        head = f"{_plural(self.commits, 'commit')}, {_plural(claims, 'claim')}"
        if self.ok:
            return f"{head}: every claim is current"
        problems = []
        refused = [f for f in self.findings if not f.accepted]
        if refused:
            problems.append(f"{_plural(len(refused), 'trailer')} refused")
        bare = sum(u.count for u in self.unclaimed)
        if bare:
            problems.append(f"{_plural(bare, 'commit')} without a claim on a protected ref")
        return f"{head}: {', '.join(problems)}"

    def explain(self, what: str) -> str:
        """The refusal for people: each problem, then what to do."""
        refused = [f for f in self.findings if not f.accepted]
        lines = [f"{what} refused: {self.summary()}.", ""]
        for f in refused:
            lines.append(
                f"{', '.join(printable_strict(r) for r in f.refs) or 'the range'}: "
                f"{_plural(f.count, 'commit')} ({_commits(f.commits, f.count)}) "
                + ("carries" if f.count == 1 else "carry")
            )
            lines.append(f"    {TRAILER}: {printable_strict(f.value)[:200]}")
            lines += _wrapped(f.detail, "  ")
        for u in self.unclaimed:
            ref = printable_strict(u.ref)
            lines += _wrapped(
                f"{ref}: {_plural(u.count, 'commit')} ({_commits(u.commits, u.count)}) "
                + ("carries" if u.count == 1 else "carry")
                + f" no {TRAILER} trailer, and this repository requires a claim for "
                f"{ref} ({REQUIRE_CONFIG}; protected: {', '.join(self.protect)})",
                "",
            )
        lines.append("")
        advice: list[str] = []
        verdicts = {f.verdict for f in refused}
        if verdicts & {"replaced", "released", "unknown", "malformed"}:
            advice.append(
                "What to do: fetch (`git fetch`; `gitlease show RESOURCE` shows the claim now), "
                "re-acquire the resource (`gitlease acquire RESOURCE`), rebase the work onto the "
                "durable state (`git rebase --force-rebase origin/BRANCH`: the rebased commits "
                "carry the new claim), and push again. Where the claim was replaced, another "
                "holder worked on the unit meanwhile: check that your work still fits theirs."
            )
        if "invalid" in verdicts:
            advice.append(
                "The server's record cannot be trusted: nothing is accepted under it until it "
                "is fixed at the server (`gitlease --store REPO.git --remote '' verify`)."
            )
        if self.unclaimed:
            advice.append(
                "Commits on a protected ref must be made under a claim: acquire one "
                "(`gitlease acquire RESOURCE`), turn trailers on "
                f"(`git config {TRAILERS_CONFIG} true`), re-create the commits "
                "(`git commit --amend`, or `git rebase --force-rebase` for several), and push "
                "again."
            )
        for paragraph in advice:
            lines += _wrapped(paragraph, "")
        return "\n".join(lines).rstrip() + "\n"


def _wrapped(text: str, indent: str) -> list[str]:
    """A paragraph of a refusal, wrapped for a terminal (git prefixes ``remote: ``)."""
    return textwrap.wrap(text, 92, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False)  # fmt: skip


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _commits(shown: tuple[str, ...], count: int) -> str:
    """The commits shown, abbreviated, and how many more there are."""
    text = ", ".join(oid[:12] for oid in shown)
    return text + (f" and {count - len(shown)} more" if count > len(shown) else "")
