"""Git's wildmatch syntax for path scopes: a pattern's text read into tokens, and every rule
that refuses one.

A pattern is relative to the repository's top folder and follows git's ``:(glob)``
pathspec rules (docs/reference/path-scopes.md):

* ``*`` matches any run of characters within one path segment (never ``/``), ``?`` one
  character of a segment, ``[...]`` one character of a segment from a class (``[!...]`` or
  ``[^...]`` negated, ``a-z`` ranges, ``]`` first is literal, ``\\`` escapes), ``\\x`` the
  character ``x`` itself.
* ``**`` as a whole segment crosses segments: ``**/x`` (``x`` in any folder, the top one
  too), ``a/**/b`` (``a/b``, ``a/x/b``, ...), ``x/**`` (everything below ``x``), ``**``
  (everything).
* A pattern ending in ``/`` means every path below a folder it names (``src/`` is
  ``src/**``). A pattern without any of ``*?[\\`` also covers everything below it, as a
  git pathspec does (``docs/auth`` covers ``docs/auth/x.md``).

Validation is total (USAGE, :class:`~gitlease.errors.UsageError`): an empty pattern, one
starting with ``/``, an empty segment (``a//b``), a ``.`` or ``..`` segment, a control
character, a trailing lone ``\\``, an unterminated ``[``, an empty or reversed range, a
POSIX class ``[[:alpha:]]`` (not supported), ``**`` not a whole segment (``a**``), a pattern
longer than 1,024 characters.

The tokens are what :mod:`gitlease.scopes.wildmatch` builds its automata from. Standard
library only: the commit hook imports this module.
"""

from __future__ import annotations

from functools import lru_cache

from .._util import lazy
from ..errors import UsageError

MAX_PATTERN_CHARS = 1024
#: What a pattern (or a path a person gives) may not hold.
CONTROL = lazy(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

# tokens: ("lit", char) | ("any",) | ("star",) | ("class", negated, ranges)
#       | ("dstar-lead",) "**/" at the start | ("dstar-mid",) "/**/" | ("dstar-end",) "/**"
#       | ("all",) the whole pattern "**" | ("below",) the end of a folder pattern
Token = tuple[object, ...]


def _bad(text: str, why: str) -> UsageError:
    shown = CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text[:80])
    return UsageError(f"bad path scope {shown!r}: {why} (see docs/reference/path-scopes.md)")


def tokenize(text: object) -> list[Token]:
    if not isinstance(text, str):
        raise UsageError(f"a path scope must be text, not {type(text).__name__}")
    if not text:
        raise UsageError("a path scope must not be empty (see docs/reference/path-scopes.md)")
    if len(text) > MAX_PATTERN_CHARS:
        raise _bad(text, f"longer than {MAX_PATTERN_CHARS} characters")
    bad = CONTROL.search(text)
    if bad is not None:
        raise _bad(text, f"control character U+{ord(bad.group()):04X} (or a lone surrogate)")
    if text.startswith("/"):
        raise _bad(text, "an absolute path; scopes are relative to the repository's top folder")
    folder = text.endswith("/")
    body = text[:-1] if folder else text
    if not body:
        raise _bad(text, "an empty folder name")
    segments = _split_segments(text, body)
    # "**/**" means what "**" means: one is kept
    segments = [
        s for i, s in enumerate(segments) if not (s == "**" and i and segments[i - 1] == "**")
    ]
    tokens: list[Token] = []
    last = len(segments) - 1
    for i, segment in enumerate(segments):
        if segment == "":
            raise _bad(text, "an empty segment (two slashes in a row)")
        if segment in (".", ".."):
            raise _bad(text, f"a {segment!r} segment; name paths from the repository's top")
        if segment == "**":
            if len(segments) == 1:
                tokens.append(("all",))
            elif i == 0:
                tokens.append(("dstar-lead",))
            elif i == last:
                tokens.append(("dstar-end",))
            else:
                tokens.append(("dstar-mid",))
            continue
        if i > 0 and segments[i - 1] != "**":
            tokens.append(("lit", "/"))
        tokens.extend(_segment_tokens(text, segment))
    if folder:
        if tokens[-1] in (("all",), ("dstar-end",)):
            pass  # "**/" and "a/**/" are already everything below
        else:
            tokens.append(("below",))
    elif not any(c in text for c in "*?[\\"):
        tokens.append(("below-or-self",))
    return tokens


def _split_segments(text: str, body: str) -> list[str]:
    """Split at ``/`` outside a class (a class never holds ``/``, so any ``/`` splits; an
    escaped ``\\/`` is refused: a segment cannot hold a slash)."""
    segments = body.split("/")
    for segment in segments:
        if segment.endswith("\\") and not _escaped_backslash_end(segment):
            raise _bad(text, "a trailing backslash (escape nothing, or a slash)")
    return segments


def _escaped_backslash_end(segment: str) -> bool:
    run = len(segment) - len(segment.rstrip("\\"))
    return run % 2 == 0


def _segment_tokens(text: str, segment: str) -> list[Token]:
    out: list[Token] = []
    i = 0
    n = len(segment)
    while i < n:
        c = segment[i]
        if c == "\\":
            if i + 1 >= n:
                raise _bad(text, "a trailing backslash")
            out.append(("lit", segment[i + 1]))
            i += 2
        elif c == "*":
            if i + 1 < n and segment[i + 1] == "*":
                raise _bad(text, "'**' must be a whole segment ('a/**/b', '**/x', 'x/**')")
            out.append(("star",))
            i += 1
        elif c == "?":
            out.append(("any",))
            i += 1
        elif c == "[":
            token, i = _class(text, segment, i)
            out.append(token)
        else:
            out.append(("lit", c))
            i += 1
    return out


def _class(text: str, segment: str, start: int) -> tuple[Token, int]:
    """A ``[...]`` class starting at ``segment[start]``: (token, index after ``]``)."""
    i = start + 1
    n = len(segment)
    negated = i < n and segment[i] in "!^"
    if negated:
        i += 1
    items: list[tuple[int, int]] = []
    first = True
    while True:
        if i >= n:
            raise _bad(text, "an unterminated '[' class")
        c = segment[i]
        if c == "]" and not first:
            i += 1
            break
        first = False
        if c == "[" and i + 1 < n and segment[i + 1] == ":":
            raise _bad(text, "POSIX character classes ('[[:alpha:]]') are not supported")
        if c == "\\":
            if i + 1 >= n:
                raise _bad(text, "an unterminated '[' class")
            c = segment[i + 1]
            i += 2
        else:
            i += 1
        lo = ord(c)
        hi = lo
        if i + 1 < n and segment[i] == "-" and segment[i + 1] != "]":
            h = segment[i + 1]
            i += 2
            if h == "\\":
                if i >= n:
                    raise _bad(text, "an unterminated '[' class")
                h = segment[i]
                i += 1
            hi = ord(h)
            if hi < lo:
                raise _bad(text, f"the range {chr(lo)}-{chr(hi)} is reversed")
        items.append((lo, hi))
    return ("class", negated, tuple(sorted(items))), i


@lru_cache(maxsize=8192)
def prefix_of(text: str) -> str:
    """The literal prefix of a pattern's text, checked to be a valid pattern first only when
    it is compiled (an invalid one is refused there: see :func:`overlap`)."""
    if not isinstance(text, str):
        raise UsageError(f"a path scope must be text, not {type(text).__name__}")
    return literal_prefix(text)


def literal_prefix(text: str) -> str:
    """The pattern's leading characters that every match starts with (a cheap first test)."""
    out = []
    for c in text:
        if c in "*?[\\":
            break
        out.append(c)
    prefix = "".join(out)
    return prefix
