"""The one JSON document a command prints for programs (``--json``), exact and fast.

JSON stays exact JSON; DEL and C1 controls and lone surrogates, which JSON would carry raw,
are written as ``\\u`` escapes, and so are invisible format characters. Written by hand
rather than with ``json.dumps(indent=2)``, whose pure-Python encoder took a second for
``list --json`` of 10,000 claims, and streamed a batch at a time for 100,000
(docs/performance.md, 5 and 5b). Loaded only by a command that prints JSON.
"""

from __future__ import annotations

import json
import os
import re
import sys
from array import array
from collections.abc import Iterable
from typing import Any

from ..api.output import is_invisible
from ..errors import GitleaseError
from .output import byte_writer, write_stdout

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
    import tempfile  # (only a long listing spills)

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
        emit = byte_writer()
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


def _escaped(text: str) -> str:
    """``text`` with what :func:`json_text` escapes escaped (one character at a time, so
    the text may come in any pieces)."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _JSON_RAW.sub(_json_escape, text)


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
