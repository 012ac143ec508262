"""How results reach people (tables, relative times, colour), and how every byte reaches stdout.

Records can be forged, so no text from one reaches a terminal as it is: every
field shown to people goes through :func:`gitlease.api.output.printable` (control characters become
visible escapes, so a note cannot print a fake line or an escape sequence), and
:func:`safe_text` is a last net over whole outputs. The one JSON document for programs is
:mod:`gitlease.cli.jsonout`'s, written through :func:`write_stdout` and :func:`byte_writer`
too.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from ..api.output import escape_invisible, format_duration, printable, visible
from ..errors import GitleaseError

_COLOURS = {"active": "32", "expired": "33", "released": "2", "free": "36", "invalid": "31;1"}


def use_colour(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def paint(text: str, state: str, colour: bool) -> str:
    code = _COLOURS.get(state)
    return f"\033[{code}m{text}\033[0m" if colour and code else text


# Our own colour codes (from paint), or one control character / lone surrogate. (A string:
# ``re`` compiles it on the first call that needs it, and keeps it; compiled at import, it
# cost every command 0.2 ms, and most never need it.)
_CONTROL_OR_COLOUR = r"(\x1b\[[0-9;]*m)|[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]"


def safe_text(text: str) -> str:
    """Whole output for people: lines kept, colour codes from :func:`paint` kept, every
    other control character escaped (fields were escaped already; this is the net)."""
    if not text.replace("\n", "").isprintable():  # (the pattern matches only what is not)
        text = re.sub(_CONTROL_OR_COLOUR, lambda m: m.group(1) or printable(m.group()), text)
    return escape_invisible(text)


def error_line(error: GitleaseError) -> str:
    """``gitlease: CODE: message`` on one line, whatever the message holds."""
    return f"gitlease: {error.code}: {visible(error.message)}"


def write_stdout(text: str) -> None:
    """Write all of ``text`` to stdout, or raise (a closed pipe: :class:`BrokenPipeError`).

    An unbuffered stdout (``PYTHONUNBUFFERED``, ``python -u``, common in CI and agent
    sandboxes) is a raw file under the text layer, which drops what a short write left
    over: ``list`` into a reader that closed early wrote 64 KiB and exited 0. Bytes go
    to the descriptor here until all are written.
    """
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        stream.write(text)  # not a real file (a test's StringIO)
        stream.flush()
        return
    stream.flush()
    _write_all(fd, text.encode(stream.encoding or "utf-8", stream.errors or "strict"))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def byte_writer() -> Callable[[bytes], None]:
    """Writes UTF-8 bytes to stdout, every one (:func:`write_stdout`'s loop), or through
    the text layer when stdout is not a file or not UTF-8 (a test's StringIO)."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
        utf8 = (stream.encoding or "").lower().replace("-", "") == "utf8"
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        fd, utf8 = -1, False
    if fd < 0 or not utf8:

        def through_text(data: bytes) -> None:
            stream.write(data.decode("utf-8"))
            stream.flush()

        return through_text
    stream.flush()
    return lambda data: _write_all(fd, data)


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
        return printable(claim.get("problem") or "invalid record")
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
            printable(c["resource"]),
            c["state"],
            printable(c["owner"] or ""),
            "" if c["revision"] is None else str(c["revision"]),
            c["claim_id"] or "",
            relative(c),
            c["mode"] or "",
        ]
        for c in claims
    ]
    if any(c.get("paths") for c in claims):  # a column only when some claim has scopes
        header.append("PATHS")
        for row, c in zip(rows, claims, strict=True):
            row.append(" ".join(printable(p) for p in c.get("paths") or ()))
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
        "paths",
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
        if key == "paths":
            text = printable(" ".join(value))
        else:
            text = printable(keeper_text(value) if key == "keepalive" else str(value))
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
        checkpoint = f"  checkpoint {printable(doc['checkpoint'])}" if doc["checkpoint"] else ""
        problem = f"  ({printable(doc['problem'])})" if doc.get("problem") else ""
        lines.append(
            f"{when}  rev {doc['revision']}  {doc['state']:<8}  {doc['claim_id']}  "
            f"{printable(doc['owner'] or '')}{checkpoint}{problem}"
        )
    return "\n".join(lines) or "no history"


def keeper_text(keeper: dict[str, Any]) -> str:
    """A claim's ``keepalive`` object for people."""
    watching = keeper["watching"]
    return (
        f"pid {keeper['pid']}, watching pid {watching['pid']} ({watching['name']}), "
        f"until {keeper['until']} at the latest; log {keeper['log']}"
    )
