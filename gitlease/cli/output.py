"""How results reach people (tables, relative times, colour) and programs (one JSON document).

Records can be forged, so no text from one reaches a terminal as it is: every
field shown to people goes through :func:`gitlease.api.output.printable` (control characters become
visible escapes, so a note cannot print a fake line or an escape sequence), and
:func:`safe_text` is a last net over whole outputs. JSON stays exact JSON; DEL
and C1 controls, which JSON would carry raw, are written as ``\\u`` escapes.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
from array import array
from collections.abc import Callable, Iterable
from typing import Any

from ..api.output import escape_invisible, format_duration, is_invisible, printable, visible
from ..errors import GitleaseError

_COLOURS = {"active": "32", "expired": "33", "released": "2", "free": "36", "invalid": "31;1"}


def use_colour(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def paint(text: str, state: str, colour: bool) -> str:
    code = _COLOURS.get(state)
    return f"\033[{code}m{text}\033[0m" if colour and code else text


# Our own colour codes (from paint), or one control character / lone surrogate.
_CONTROL_OR_COLOUR = re.compile(r"(\x1b\[[0-9;]*m)|[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def safe_text(text: str) -> str:
    """Whole output for people: lines kept, colour codes from :func:`paint` kept, every
    other control character escaped (fields were escaped already; this is the net)."""
    text = _CONTROL_OR_COLOUR.sub(lambda m: m.group(1) or printable(m.group()), text)
    return escape_invisible(text)


def error_line(error: GitleaseError) -> str:
    """``gitlease: CODE: message`` on one line, whatever the message holds."""
    return f"gitlease: {error.code}: {visible(error.message)}"


# DEL, C1, and lone surrogates (a ref name that is not UTF-8 keeps its bytes as those); any
# other non-ASCII character is looked at too: invisible ones are escaped (_text.visible).
# (Everything from DEL up, spelled as a negation: the range itself takes `re` 3-10 ms to
# compile, on every command's start.)
_JSON_RAW = re.compile(r"[^\x00-\x7e]")


def _json_escape(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if code <= 0x9F or 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    if not is_invisible(ch):
        return ch
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON escape of an astral character: its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(doc: Any) -> str:
    """One JSON document; DEL, C1 controls and lone surrogates as ``\\u`` escapes (the same
    JSON value, and always valid UTF-8).

    Laid out as ``json.dumps(doc, indent=2, ensure_ascii=False)`` lays it out, but
    written by :func:`_pretty`: with ``indent``, :mod:`json` uses its pure-Python
    encoder, which took a second for ``list --json`` of 10,000 claims.
    """
    out: list[str] = []
    _pretty(doc, "\n", out)
    text = "".join(out)
    if text.isascii() and "\x7f" not in text:
        return text  # (a scan for nothing, over megabytes, skipped)
    return _JSON_RAW.sub(_json_escape, text)


_encode_str = json.encoder.encode_basestring  # ensure_ascii=False's encoder (C)
_FLAT = frozenset({str, int, float, bool, type(None)})
_FLAT_ENCODERS: dict[str, Any] = {}


def _flat_encoder(inner: str) -> Any:
    """``json.dumps`` of a dict of scalars with items separated by ``,`` and ``inner``, made
    once per indentation (``json.dumps`` with separators builds an encoder every call)."""
    encoder = _FLAT_ENCODERS.get(inner)
    if encoder is None:
        make = getattr(json.encoder, "c_make_encoder", None)
        if make is None:  # no C accelerator: the same text, slower
            encoder = json.JSONEncoder(ensure_ascii=False, separators=("," + inner, ": ")).encode
        else:  # what JSONEncoder.encode builds on every call, built once
            fallback = json.JSONEncoder().default
            chunks = make(None, fallback, _encode_str, None, ": ", "," + inner, False, False, True)
            encoder = lambda value: "".join(chunks(value, 0))  # noqa: E731
        _FLAT_ENCODERS[inner] = encoder
    return encoder


def _scalar(value: Any) -> str | None:
    """A JSON scalar as :mod:`json` writes it, or None for a container."""
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    if isinstance(value, dict | list | tuple):
        return None
    return json.dumps(value, ensure_ascii=False)  # anything else: json says what it can do


def _key(key: Any) -> str:
    """A dict key that is not a string, as :mod:`json` turns it into one."""
    text = _scalar(key)
    if text is None or isinstance(key, dict | list | tuple):
        raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
    return text


def _pretty(value: Any, newline: str, out: list[str]) -> None:
    """Append ``value`` as JSON with an indent of two to ``out``; ``newline`` is the line
    break and indentation of the value's own line."""
    text = _scalar(value)
    if text is not None:
        out.append(text)
        return
    inner = newline + "  "
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        if _FLAT.issuperset(map(type, value.values())):
            # scalars only (a claim document): json's C encoder lays the items out itself
            flat = _flat_encoder(inner)(value)
            out.append("{" + inner + flat[1:-1] + newline + "}")
            return
        sep = "{" + inner
        for key, item in value.items():
            name = _encode_str(key) if type(key) is str else _encode_str(_key(key))
            text = _scalar(item)
            if text is not None:
                out.append(sep + name + ": " + text)
            else:
                out.append(sep + name + ": ")
                _pretty(item, inner, out)
            sep = "," + inner
        out.append(newline + "}")
        return
    if not value:
        out.append("[]")
        return
    sep = "[" + inner
    for item in value:
        out.append(sep)
        _pretty(item, inner, out)
        sep = "," + inner
    out.append(newline + "]")


def print_json(doc: Any) -> None:
    write_stdout(json_text(doc) + "\n")


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
    data = text.encode(stream.encoding or "utf-8", stream.errors or "strict")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def print_claims_json(docs: Iterable[dict[str, Any]], batch: int = 500) -> None:
    """``print_json({"claims": list(docs)})``, byte for byte, written as the documents come:
    ``list --json`` of 100,000 claims holds a batch of their text at a time, not the whole
    document and its text at once (docs/performance.md, figure 5)."""
    write = sys.stdout.write
    write('{\n  "claims": ')
    sep = "[\n    "
    out: list[str] = []
    count = 0
    for doc in docs:
        out.append(sep)
        _pretty(doc, "\n    ", out)
        sep = ",\n    "
        count += 1
        if count % batch == 0:
            write(_escaped("".join(out)))
            out.clear()
    write(_escaped("".join(out)) + ("[]" if count == 0 else "\n  ]") + "\n}\n")
    sys.stdout.flush()


_ITEM_SEP = b",\n    "


def print_sorted_claims_json(batches: Iterable[list[dict[str, Any]]], key: str) -> None:
    """``print_json({"claims": sorted(every doc, key=doc[key])})``, byte for byte (a stable
    sort), holding one batch of documents at a time: each document's text goes to an
    unnamed temporary file as it is made, and the file is copied out in order at the end
    (straight through when the documents came in order, as they nearly always do: the
    store lists refs by name, ``list`` sorts by resource). What is held whole is each
    document's key and where its text lies (docs/performance.md, 5b)."""
    keys: list[Any] = []
    starts = array("q")
    in_order = True
    with tempfile.TemporaryFile() as spill:
        size = 0
        last: Any = None
        for docs in batches:
            out: list[bytes] = []
            for doc in docs:
                pieces: list[str] = []
                _pretty(doc, "\n    ", pieces)
                text = _escaped("".join(pieces)).encode("utf-8")
                value = doc[key]
                starts.append(size)  # (where this document's separator and text begin)
                if keys:
                    out.append(_ITEM_SEP)
                    size += len(_ITEM_SEP)
                    in_order = in_order and not value < last
                keys.append(value)
                out.append(text)
                size += len(text)
                last = value
            spill.write(b"".join(out))
        spill.flush()
        emit = _byte_writer()
        if not keys:
            emit(b'{\n  "claims": []\n}\n')
            return
        emit(b'{\n  "claims": [\n    ')
        fd = spill.fileno()
        if in_order:
            pos = 0
            while pos < size:
                chunk = os.pread(fd, min(1 << 20, size - pos), pos)
                if not chunk:
                    break
                emit(chunk)
                pos += len(chunk)
        else:
            starts.append(size)
            order = sorted(range(len(keys)), key=keys.__getitem__)
            pending: list[bytes] = []
            for n, i in enumerate(order):
                begin = starts[i] + (len(_ITEM_SEP) if i else 0)
                pending.append(_ITEM_SEP if n else b"")
                pending.append(os.pread(fd, starts[i + 1] - begin, begin))
                if len(pending) >= 1000:
                    emit(b"".join(pending))
                    pending.clear()
            emit(b"".join(pending))
        emit(b"\n  ]\n}\n")


def _byte_writer() -> Callable[[bytes], None]:
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

    def to_fd(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    return to_fd


def _escaped(text: str) -> str:
    """``text`` with what :func:`json_text` escapes escaped (one character at a time, so
    the text may come in any pieces)."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _JSON_RAW.sub(_json_escape, text)


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
