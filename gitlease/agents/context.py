"""What the model is told at session start: the claims its worktree holds, and what next.

Not on every edit, but on every session: the same lean modules as the edit check.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .._util.text import printable
from ..gitio.gitdirs import find_git_dir
from ..hooks import check as hookcheck
from ..model.clock import format_duration
from ..receipts import bindings as bindings_mod

if TYPE_CHECKING:
    from ..model.claim import Claim


def session_context(cwd: Path) -> str | None:
    """The text for the model, or None outside a git worktree (not gitlease's business)."""
    found = find_git_dir(cwd)
    if found is None or found[1] is None:
        return None
    git_dir, top = found
    held: list[Claim] = []
    try:
        problems = hookcheck.worktree_problems(git_dir, top, held)
    except Exception as exc:
        problems = [f"the claim check failed ({type(exc).__name__}: {exc})"]
    where = printable(str(top))
    if not bindings_mod.bindings(git_dir):
        required = problems == [hookcheck.REQUIRE_PROBLEM]
        rule = (
            "this repository requires one (gitlease.requireClaim): every edit and commit is "
            "refused until you hold a claim"
            if required
            else "gitlease claims say which agent works on which unit of work"
        )
        return (
            f"gitlease: this worktree ({where}) holds no claim; {rule}. Next step: before you "
            "edit, claim the work you take on: `gitlease acquire RESOURCE --ttl 15m` (or "
            "`gitlease acquire --first-free - --ttl 15m` with candidates on stdin); "
            "`gitlease free` lists what is free."
        )
    lines = [
        f"gitlease: this worktree ({where}) holds these claims:"
        if held
        else f"gitlease: this worktree ({where}) holds no live claim now."
    ]
    for claim in held:
        left = format_duration(claim.expires_in_ms or 0)
        record = claim.record
        ident = f"claim {printable(record.claim_id)}, " if record is not None else ""
        lines.append(f"  - {printable(claim.resource)} ({ident}{left} left)")
    if problems:
        lead = "and these are" if held else "It is bound to claims that are"
        lines.append(f"{lead} NOT held any more (edits and commits here are refused):")
        lines += [f"  - {printable(p)}" for p in problems]
        lines.append(f"Next step: {hookcheck.ADVICE}")
    if held:
        name = printable(held[0].resource) if len(held) == 1 else "RESOURCE"
        lines.append(
            f"Next step: renew before the time runs out (`gitlease heartbeat {name}`, or "
            f"`gitlease keepalive {name}` for the whole session); `gitlease check {name}` "
            f"before a step you cannot undo; `gitlease release {name}` when done. Edits here "
            "are denied once a claim lapses."
        )
    return "\n".join(lines)
