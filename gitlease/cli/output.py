"""How results reach people (tables, relative times, colour) and programs (one JSON document).

Records can be forged, so no text from one reaches a terminal as it is: every
field shown to people goes through :func:`escape` (control characters become
visible escapes, so a note cannot print a fake line or an escape sequence), and
:func:`safe_text` is a last net over whole outputs. JSON stays exact JSON; DEL
and C1 controls, which JSON would carry raw, are written as ``\\u`` escapes.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from ..clock import format_duration
from ..errors import GitleaseError
from ..record import printable

_COLOURS = {"active": "32", "expired": "33", "released": "2", "free": "36", "invalid": "31;1"}


def use_colour(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def paint(text: str, state: str, colour: bool) -> str:
    code = _COLOURS.get(state)
    return f"\033[{code}m{text}\033[0m" if colour and code else text


def escape(text: str) -> str:
    """A record field for people: control characters as visible escapes."""
    return printable(text)


# Our own colour codes (from paint), or one control character / lone surrogate.
_CONTROL_OR_COLOUR = re.compile(r"(\x1b\[[0-9;]*m)|[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def safe_text(text: str) -> str:
    """Whole output for people: lines kept, colour codes from :func:`paint` kept, every
    other control character escaped (fields were escaped already; this is the net)."""
    return _CONTROL_OR_COLOUR.sub(lambda m: m.group(1) or escape(m.group()), text)


def error_line(error: GitleaseError) -> str:
    """``gitlease: CODE: message`` on one line, whatever the message holds."""
    return f"gitlease: {error.code}: {escape(error.message)}"


# DEL, C1, and lone surrogates (a ref name that is not UTF-8 keeps its bytes as those)
_JSON_RAW = re.compile(r"[\x7f-\x9f\ud800-\udfff]")


def json_text(doc: Any) -> str:
    """One JSON document; DEL, C1 controls and lone surrogates as ``\\u`` escapes (the same
    JSON value, and always valid UTF-8)."""
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def print_json(doc: Any) -> None:
    sys.stdout.write(json_text(doc) + "\n")
    sys.stdout.flush()


def relative(claim: dict[str, Any]) -> str:
    """``expires in 4m 12s``, ``expired 3m ago``, ``released 2026-...``."""
    state = claim["state"]
    left = claim.get("expires_in")
    if state == "active" and left is not None:
        return f"expires in {format_duration(int(left * 1000))}"
    if state == "expired" and left is not None:
        return f"expired {format_duration(int(-left * 1000))} ago"
    if state == "released":
        return f"released {claim['released_at']}"
    if state == "invalid":
        return escape(claim.get("problem") or "invalid record")
    return ""


def claim_table(claims: list[dict[str, Any]]) -> str:
    """Aligned columns, one claim a row; ``*`` marks claims bound to this worktree."""
    if not claims:
        return "no claims"
    colour = use_colour()
    header = ["", "RESOURCE", "STATE", "OWNER", "REV", "CLAIM", "TIME", "MODE"]
    rows = [
        [
            "*" if c.get("bound") else "",
            escape(c["resource"]),
            c["state"],
            escape(c["owner"] or ""),
            "" if c["revision"] is None else str(c["revision"]),
            c["claim_id"] or "",
            relative(c),
            c["mode"] or "",
        ]
        for c in claims
    ]
    if any(c.get("keepalive") for c in claims):  # a column only when something is kept alive
        header.append("KEPT BY")
        for row, c in zip(rows, claims, strict=True):
            row.append(f"pid {c['keepalive']['pid']}" if c.get("keepalive") else "")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for row, c in zip(rows, claims, strict=True):
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=True)]
        cells[2] = paint(cells[2], c["state"], colour)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def claim_detail(claim: dict[str, Any]) -> str:
    """``show`` for people: one field a line, aligned."""
    colour = use_colour()
    order = [
        "resource",
        "state",
        "claim_id",
        "owner",
        "revision",
        "bundle_id",
        "mode",
        "acquired_at",
        "renewed_at",
        "renew_by",
        "released_at",
        "expires_at",
        "note",
        "checkpoint",
        "ref",
        "oid",
        "guarantee",
        "problem",
        "receipt",
        "keepalive",
    ]
    width = max(len(k) for k in order)
    lines = []
    for key in order:
        value = claim.get(key)
        if value is None or value is False:
            continue
        text = escape(keeper_text(value) if key == "keepalive" else str(value))
        if key == "state":
            text = paint(text, claim["state"], colour)
            rel = relative(claim)
            if rel and claim["state"] in ("active", "expired"):
                text += f" ({rel})"
            if claim.get("bound"):
                text += " [bound to this worktree]"
        lines.append(f"{key.replace('_', ' ').ljust(width)}  {text}")
    return "\n".join(lines)


def log_lines(records: list[dict[str, Any]], start: str | None = None) -> str:
    """``log`` for people: where the kept history starts (if it is not all there), then one
    line per transition, oldest first."""
    lines = [start] if start else []
    for doc in records:
        when = doc["released_at"] or doc["renewed_at"] or ""
        checkpoint = f"  checkpoint {escape(doc['checkpoint'])}" if doc["checkpoint"] else ""
        problem = f"  ({escape(doc['problem'])})" if doc.get("problem") else ""
        lines.append(
            f"{when}  rev {doc['revision']}  {doc['state']:<8}  {doc['claim_id']}  "
            f"{escape(doc['owner'] or '')}{checkpoint}{problem}"
        )
    return "\n".join(lines) or "no history"


def keeper_text(keeper: dict[str, Any]) -> str:
    """A claim's ``keepalive`` object for people."""
    watching = keeper["watching"]
    return (
        f"pid {keeper['pid']}, watching pid {watching['pid']} ({watching['name']}), "
        f"until {keeper['until']} at the latest; log {keeper['log']}"
    )


def error_document(error: GitleaseError) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "code": error.code,
        "exit": error.exit_code,
        "message": error.message,
        "claim": error.claim,
    }
    if error.claims is not None:  # acquire --first-free: one per candidate
        doc["claims"] = error.claims
    return {"error": doc}
