"""The answers, in each harness's own published format (standard library only).

* Deny an edit. Claude Code and Codex: ``hookSpecificOutput`` with ``hookEventName``
  ``PreToolUse``, ``permissionDecision: "deny"`` and ``permissionDecisionReason`` (what the
  model reads). Gemini CLI: ``decision: "deny"`` with ``reason`` (sent to the agent as the
  tool's error). Each with a ``systemMessage`` line for the person watching.
* Context at session start, all three: ``hookSpecificOutput`` with ``hookEventName``
  ``SessionStart`` and ``additionalContext``.

Never ``allow``: that would skip the person's own permission rules. Saying nothing (no
output, exit 0) lets the harness go on as it would without gitlease.
"""

from __future__ import annotations

from .._util import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


def deny(harness: str, reason: str) -> dict[str, Any]:
    """The answer that denies the edit, with ``reason`` for the model."""
    notice = reason.splitlines()[0]
    if harness == "gemini":
        return {"decision": "deny", "reason": reason, "systemMessage": notice}
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        },
        "systemMessage": notice,
    }


def context(harness: str, text: str) -> dict[str, Any]:
    """The answer that adds ``text`` to the model's context at session start."""
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
