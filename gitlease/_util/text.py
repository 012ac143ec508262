"""Text from outside shown to people: every escaping rule of the package, in one place.

Records, commits, process names and git's own messages can hold anything (a record can be
forged, a process can give itself any name), so nothing from them reaches a terminal
unescaped. The rules differ because their texts and readers differ, and each says how:

* :func:`printable`: a record field (owner, note, resource...) on one line, as the CLI
  prints it; control characters and lone surrogates become escapes.
* :func:`visible`: the whole output of a command for people; also invisible format
  characters (bidi controls, zero-width spaces) become escapes.
* :func:`printable_strict`: a commit's trailer or a record named in a fence refusal, which a
  developer reads in a push's ``remote:`` lines; every character Python does not call
  printable (also Unicode format and separator characters) becomes an escape.
* :func:`printable_lines`: git's or a server's stderr, whose lines are kept.
* :func:`masked`: a process's name, stored in a fixed-size field of the keepalive registry:
  one ``?`` per character, cut to a length.

No imports beyond the standard library: the commit hook's path uses it.
"""

from __future__ import annotations

import re

from . import lazy

#: C0 controls (newline and tab included), DEL, C1 controls, and lone surrogates.
UNPRINTABLE = lazy(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL_BUT_NEWLINE = lazy(r"[\x00-\x09\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """``text`` for a terminal: control characters and lone surrogates written as escapes.

    Records can be forged, so every human-readable output of a record field goes
    through this: a note can then never move the cursor, set a window title, or
    print a line that looks like another field. (Not reversible: a backslash stays.)
    """
    if text.isprintable():  # (every character the pattern escapes is one Python calls not)
        return text
    return UNPRINTABLE.sub(_escape_char, text)


def first_unprintable(text: str) -> re.Match[str] | None:
    """The first control character or lone surrogate of ``text`` (what :func:`printable`
    escapes), or None; text Python calls printable is answered without the pattern."""
    return None if text.isprintable() else UNPRINTABLE.search(text)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(code)
    if named:
        return named
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: Unicode categories of characters that change how text around them looks without being
#: seen: format characters (bidi overrides and isolates, zero-width spaces and joiners, the
#: soft hyphen) and the line and paragraph separators.
INVISIBLE_CATEGORIES = frozenset({"Cf", "Zl", "Zp"})
_NON_ASCII = lazy(r"[^\x00-\x7f]")


def is_invisible(ch: str) -> bool:
    """Whether ``ch`` is a format character or a line/paragraph separator (see above)."""
    import unicodedata

    return unicodedata.category(ch) in INVISIBLE_CATEGORIES


def visible(text: str) -> str:
    """:func:`printable`, and every invisible character (:func:`is_invisible`) as its
    ``\\u`` escape: a resource spelled with U+202E or U+200B never reaches a terminal
    raw, so two names that differ only by one never print alike."""
    return escape_invisible(printable(text))


def escape_invisible(text: str) -> str:
    """Only the invisible characters of ``text`` (:func:`is_invisible`) as escapes; lines
    and everything else kept (the net over a whole output, which keeps its newlines)."""
    if text.isascii():
        return text
    return _NON_ASCII.sub(_escape_invisible, text)


def _escape_invisible(match: re.Match[str]) -> str:
    ch = match.group()
    if not is_invisible(ch):
        return ch
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable_strict(text: str) -> str:
    """Text from a commit or a record, safe to print: every character that Python does not
    call printable written as its escape (where :func:`printable` escapes only controls and
    lone surrogates, this also escapes, say, a right-to-left override)."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def printable_lines(text: str) -> str:
    """Text from git or the server with control characters (but newlines) made visible;
    a carriage return becomes a newline, so a progress line cannot overwrite another."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL_BUT_NEWLINE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def masked(text: str, limit: int = 64) -> str:
    """``text`` with every character that is not printable shown as ``?`` (a process can
    give itself any name, including terminal escapes), cut to ``limit`` characters: one
    character for one, so the cut holds for what is shown."""
    return "".join(c if c.isprintable() else "?" for c in text[:limit])
