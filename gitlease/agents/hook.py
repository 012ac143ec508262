"""``python -I -m gitlease.agents.hook HARNESS``: the command the harness runs on each hook.

Installed by ``gitlease agents install HARNESS`` with the Python fixed at install time (like
the git hooks), so no PATH or environment variable swaps it; ``gitlease agent-hook HARNESS``
is the same check on the CLI. It reads the payload on stdin and answers on stdout:

* before an edit: a deny, in the harness's format, when the file's worktree lost its claim
  (:mod:`gitlease.agents.check`); otherwise nothing;
* at session start: the worktree's claims for the model (:mod:`gitlease.agents.context`);
* anything else: nothing.

Always exit 0 with a JSON answer or nothing (exit 2, a usage error, only for a bad command
line, which every harness takes as a block). A payload that cannot be read (not JSON, wrong
types, too large) denies the edit only when the worktree around the working directory is
bound to a claim (fail closed where a claim is at stake); otherwise it says nothing, as for
a file outside any git worktree. Never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .._util import TYPE_CHECKING
from .._util import testing as _testing
from .._util.text import printable_strict
from . import answers, check, payloads

if TYPE_CHECKING:
    from typing import Any, BinaryIO, TextIO


USAGE = (
    "usage: python -m gitlease.agents.hook HARNESS  (HARNESS: claude-code, codex, gemini; "
    "the hook payload on stdin)\n"
)
#: The file's path decides its worktree, never the environment of whoever started the agent.
_GIT_LOCATION = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE")


def answer(harness: str, raw: bytes, cwd: Path | None = None) -> dict[str, Any] | None:
    """The answer to the payload ``raw`` from ``harness`` (None: say nothing)."""
    event = payloads.parse(harness, raw)
    here = cwd or Path.cwd()
    base = here / event.cwd if event.cwd else here
    if event.kind == "edit":
        denied = check.edit_problems(base, event.paths)
        return answers.deny(harness, check.deny_reason(denied)) if denied else None
    if event.kind == "session":
        from .context import session_context

        text = session_context(base)
        return answers.context(harness, text) if text else None
    if event.kind == "unreadable":
        checked = check.guarded(base)
        if checked is None:
            return None
        checked.own = [
            f"the {harness} hook payload could not be read ({event.why}), and this worktree's "
            "edits are checked (it is bound to a claim, or gitlease.requireClaim is set): "
            "refusing the edit (fail closed)"
        ]
        return answers.deny(harness, check.deny_reason([checked]))
    return None


def main(
    argv: list[str] | None = None, stdin: BinaryIO | None = None, stdout: TextIO | None = None
) -> int:
    """Answer one hook call; the exit code (0, or 2 for a bad command line)."""
    args = sys.argv[1:] if argv is None else argv
    out = stdout or sys.stdout
    if len(args) != 1 or args[0] not in payloads.HARNESSES:
        sys.stderr.write(USAGE)
        return 2
    harness = args[0]
    for name in _GIT_LOCATION:
        os.environ.pop(name, None)
    for line in _testing.warnings():  # a test-only switch never changes a decision silently
        sys.stderr.write(line + "\n")
    try:
        raw = (stdin or sys.stdin.buffer).read(payloads.MAX_PAYLOAD + 1)
    except (OSError, ValueError):
        raw = b""
    try:
        doc = answer(harness, raw)
    except Exception as exc:  # fail closed for an edit, say nothing otherwise
        event = payloads.parse(harness, raw)
        if event.kind not in ("edit", "unreadable"):
            return 0
        failure = printable_strict(f"{type(exc).__name__}: {exc}")
        reason = f"gitlease's edit check failed ({failure}); refusing the edit (fail closed)"
        doc = answers.deny(harness, reason)
    if doc is not None:
        try:
            out.write(json.dumps(doc) + "\n")
            out.flush()
        except (OSError, ValueError):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
