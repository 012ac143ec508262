"""The values of a record, one kind at a time: how each is written, and how it is read back.

A record (:mod:`gitlease.model.record`) lays out its fields in a fixed order; each field has
a kind, and this module knows the kinds: ``text`` (a JSON string, or ``-``), ``word`` (no
spaces), ``int`` (decimal, below 2**63), ``time`` (RFC 3339 UTC with milliseconds), ``hex``
(lower-case hex digits: an object id, a key), and the optional ``paths`` line (a compact JSON
list of path scopes). Each value is written one canonical way, and read back only in that
way: a value is checked so that whatever reads the record later cannot fail on it, and any
other spelling is :class:`~gitlease.errors.CorruptRecordError`.

It also says what free text a new record may carry (:func:`check_text`): records are shared
and kept for good, so control characters and pasted tokens are refused before anything is
written.
"""

from __future__ import annotations

import json
import re

from .._util import TYPE_CHECKING, lazy
from .._util.text import first_unprintable
from ..errors import CorruptRecordError, UsageError

if TYPE_CHECKING:
    from typing import Any


_WORD = lazy(r"[!-~]+")  # printable ASCII, no spaces
_HEX = lazy(r"[0-9a-f]+")
_TIME = lazy(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{3}Z", re.ASCII)
_INT_DIGITS = 19  # 2**63 - 1 has 19 digits: no value gets near Python's int-parsing limit
MAX_INT = 2**63 - 1
#: What a pasted bearer token looks like: the prefix and a run of base64url characters.
#: (A real token has 43; a shorter run is refused too, since part of a token is a leak.)
TOKEN_LIKE = lazy(r"glt_[A-Za-z0-9_-]{16,}")
MAX_SCOPES = 64
MAX_SCOPE_CHARS = 1024
#: Each kind's value as the whole-record expression matches it (written the canonical way).
PATTERNS = {
    "text": r'(-|"[^"\\\x00-\x1f]*")',  # a string that needs no escape, or none
    "word": r"([!-~]+)",
    "int": r"(-|0|[1-9][0-9]{0,18})",
    "time": r"(-|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z)",
    "hex": r"(-|[0-9a-f]+)",
}
#: What ``json.dumps(..., ensure_ascii=False)`` escapes in a string: a quoted string without
#: these is written the one canonical way.
_JSON_ESCAPED = lazy(r'["\\\x00-\x1f]')


def format_value(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "text":
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def format_paths(paths: tuple[str, ...]) -> str:
    """The ``paths`` value: a JSON list of strings, compact, non-ASCII kept as is."""
    return json.dumps(list(paths), ensure_ascii=False, separators=(",", ":"))


def parse_paths(value: bytes) -> tuple[str, ...]:
    text = ""
    try:
        text = value.decode("utf-8")
        paths = json.loads(text) if len(text) <= MAX_SCOPES * (MAX_SCOPE_CHARS + 8) else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        paths = None
    if (
        not isinstance(paths, list)
        or not paths
        or len(paths) > MAX_SCOPES
        or not all(isinstance(p, str) and 0 < len(p) <= MAX_SCOPE_CHARS for p in paths)
    ):
        raise CorruptRecordError("the record's paths are not a list of 1 to 64 patterns")
    if any(first_unprintable(p) for p in paths):
        raise CorruptRecordError("the record's paths hold a control character")
    out = tuple(paths)
    if format_paths(out) != text:
        raise CorruptRecordError("the record is not in canonical form")
    return out


def parse_value(text: str, kind: str, name: str) -> Any:
    """One value, checked so that whatever reads the record later cannot fail on it, and
    written the canonical way (:class:`CorruptRecordError` otherwise)."""
    if text == "-":
        return None
    if kind == "text":
        if len(text) >= 2 and text[0] == text[-1] == '"':
            inner = text[1:-1]
            if not _JSON_ESCAPED.search(inner):
                return inner  # (decoded UTF-8 holds no lone surrogate)
        value = None
        if len(text) >= 2 and text[0] == text[-1] == '"':  # a string: no nesting to recurse on
            try:
                value = json.loads(text)
            except ValueError:
                value = None
        if not isinstance(value, str):
            raise CorruptRecordError(f"the record's {name} is not a quoted string")
        if _has_surrogate(value):
            raise CorruptRecordError(f"the record's {name} is not valid Unicode")
        if json.dumps(value, ensure_ascii=False) != text:
            raise CorruptRecordError("the record is not in canonical form")
        return value
    if kind == "int":
        if not text.isascii() or not text.isdigit() or len(text) > _INT_DIGITS:
            raise CorruptRecordError(f"the record's {name} is not a number below 2**63")
        number = int(text)
        if number > MAX_INT:
            raise CorruptRecordError(f"the record's {name} is not a number below 2**63")
        if text[0] == "0" and len(text) > 1:
            raise CorruptRecordError("the record is not in canonical form")
        return number
    if not _WORD.fullmatch(text):
        raise CorruptRecordError(f"the record's {name} is malformed")
    if kind == "time" and not _is_time(text):
        raise CorruptRecordError(f"the record's {name} is not an RFC 3339 UTC time")
    if kind == "hex" and not _HEX.fullmatch(text):
        raise CorruptRecordError(f"the record's {name} is not lower-case hex")
    return text


def _is_time(text: str) -> bool:
    """The form ``clock.rfc3339`` writes, on a real date: what ``clock.parse_rfc3339``
    accepts (repeated here, since the two modules do not import each other)."""
    return _TIME.fullmatch(text) is not None and real_time(text)


def real_time(text: str) -> bool:
    """Whether a time of the form ``clock.rfc3339`` writes names a real date and time."""
    date = _DATES.get(text[:10])
    if date is None:
        y, mo, d = int(text[:4]), int(text[5:7]), int(text[8:10])
        leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
        days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
        date = 1 <= mo <= 12 and 1 <= d <= days[mo - 1]
        if len(_DATES) < 4096:
            _DATES[text[:10]] = date
    # two ASCII digits each (the pattern says so): compared as text, they compare as numbers
    return date and text[11:13] < "24" and text[14:16] < "60" and text[17:19] < "60"


_DATES: dict[str, bool] = {}


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def looks_like_token(text: str) -> bool:
    """Whether ``text`` contains something that looks like a bearer token (or part of one)."""
    return TOKEN_LIKE.search(text) is not None


def check_text(text: object, what: str, *, max_chars: int | None = None) -> str:
    """Refuse free text for a new record (owner, note, checkpoint) before anything is written.

    Records are shared and their history is never expired, so a control character
    (C0, DEL, C1: a newline, an escape sequence) or a pasted token would be there for
    good. The message never repeats the text: it may be a secret.
    """
    if not isinstance(text, str):
        raise UsageError(f"{what} must be text, not {type(text).__name__}")
    if max_chars is not None and len(text) > max_chars:
        raise UsageError(f"{what} is {len(text)} characters long; at most {max_chars} are allowed")
    bad = first_unprintable(text)
    if bad is not None:
        code = ord(bad.group())
        if 0xD800 <= code <= 0xDFFF:
            raise UsageError(f"{what} is not valid UTF-8 text")
        raise UsageError(
            f"{what} contains the control character U+{code:04X} at position {bad.start()}; "
            "control characters (newlines and tabs included) are not allowed"
        )
    if looks_like_token(text):
        raise UsageError(
            f"{what} contains text that looks like a gitlease bearer token (glt_...); "
            "a record is shared and kept forever, so tokens are refused. Keep tokens in "
            "their receipts only"
        )
    return text
