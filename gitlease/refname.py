"""Resource names and their refs under ``refs/worklease/`` (SPEC §2).

The encoding, in words:

* A resource is split on ``/`` into segments; each segment is written with the
  characters ``a-z 0-9 - _`` as they are, a ``.`` as it is where git allows it
  (not first, not last, never two in a row), and every other byte of its UTF-8
  form as ``%xx`` with lower-case hex. Upper-case letters are escaped too, so the
  whole ref is lower-case and two resources never fold together on a
  case-insensitive file system. A ``/`` that would make an empty segment is
  escaped as ``%2f``.
* The last segment ends in ``.lease``; no other component can end that way
  (a segment that itself ends in ``.lease`` or ``.lock`` has that dot escaped),
  so the ref of ``a`` (``a.lease``) never sits where ``a/b``'s directory
  (``a/``) must be.
* A segment longer than ``CHUNK`` characters is split into components that end
  in ``+`` (a character no encoded segment contains), which the decoder joins
  again. Every component stays far under the 255-byte file-name limit.

Decoding is the inverse, so the encoding is injective; the tests check the
round trip, validity, and the absence of case-fold and file/directory conflicts.
"""

from __future__ import annotations

import re

from .errors import UsageError

PREFIX = "refs/worklease/"
LEAF_SUFFIX = ".lease"
CONTINUATION = "+"
CHUNK = 96
MAX_RESOURCE_BYTES = 512

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
_HEX = "0123456789abcdef"
_RESERVED_ENDINGS = (".lock", LEAF_SUFFIX)
_COMPONENT = re.compile(r"^(?:[a-z0-9_-]|\.|%[0-9a-f]{2})+$")


def validate_resource(resource: object) -> str:
    """Refuse what cannot be a resource before anything touches the store."""
    if not isinstance(resource, str):
        raise UsageError(f"a resource must be a string, not {type(resource).__name__}")
    if not resource:
        raise UsageError("a resource must not be empty")
    try:
        size = len(resource.encode("utf-8"))
    except UnicodeEncodeError:
        raise UsageError(f"resource {resource!r} is not valid Unicode (lone surrogate)") from None
    if size > MAX_RESOURCE_BYTES:
        raise UsageError(
            f"resource is {size} UTF-8 bytes; at most {MAX_RESOURCE_BYTES} are allowed"
        )
    for ch in resource:
        if _is_control(ch):
            raise UsageError(
                f"resource {resource!r} contains the control character U+{ord(ch):04X}"
            )
    return resource


def _is_control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F


def _escape(ch: str) -> str:
    return "".join(f"%{b:02x}" for b in ch.encode("utf-8"))


def _encode_segment(segment: str) -> str:
    out: list[str] = []
    last = len(segment) - 1
    for i, ch in enumerate(segment):
        if ch in _SAFE or (
            ch == "." and 0 < i < last and segment[i - 1] != "." and segment[i + 1] != "."
        ):
            out.append(ch)
        else:
            out.append(_escape(ch))
    text = "".join(out)
    for ending in _RESERVED_ENDINGS:
        if text.endswith(ending):
            text = text[: -len(ending)] + "%2e" + ending[1:]
    return text


def _chunks(text: str) -> list[str]:
    """Split an encoded segment into pieces that never start with ``.`` nor cut an escape."""
    pieces: list[str] = []
    while len(text) > CHUNK:
        cut = CHUNK
        # never cut inside %xx, and never start a component with '.'
        while cut > 0 and ("%" in text[cut - 2 : cut] or text[cut] == "."):
            cut -= 1
        pieces.append(text[:cut])
        text = text[cut:]
    pieces.append(text)
    return pieces


def _split_segments(resource: str) -> list[str]:
    """Split on the slashes that separate two non-empty segments; escape the others."""
    segments: list[str] = []
    current: list[str] = []
    for i, ch in enumerate(resource):
        if ch == "/" and current and i + 1 < len(resource) and resource[i + 1] != "/":
            segments.append("".join(current))
            current = []
        elif ch == "/":
            current.append("\0")  # placeholder for an escaped slash
        else:
            current.append(ch)
    segments.append("".join(current))
    return segments


def encode(resource: str) -> str:
    """The full ref name of a resource, for example ``refs/worklease/github/acme/api/42.lease``."""
    validate_resource(resource)
    components: list[str] = []
    for segment in _split_segments(resource):
        encoded = _encode_segment(segment).replace("%00", "%2f")
        components.extend(piece + CONTINUATION for piece in _chunks(encoded)[:-1])
        components.append(_chunks(encoded)[-1])
    components[-1] += LEAF_SUFFIX
    return PREFIX + "/".join(components)


def decode(ref: str) -> str:
    """The resource behind a ref; refuses anything :func:`encode` cannot have produced."""
    if not ref.startswith(PREFIX) or not ref.endswith(LEAF_SUFFIX):
        raise UsageError(f"{ref!r} is not a gitlease ref")
    components = ref[len(PREFIX) : -len(LEAF_SUFFIX)].split("/")
    segments: list[str] = []
    current = ""
    for component in components:
        continued = component.endswith(CONTINUATION)
        body = component[:-1] if continued else component
        if not body or not _COMPONENT.match(body):
            raise UsageError(f"{ref!r} is not a gitlease ref")
        current += body
        if not continued:
            segments.append(current)
            current = ""
    if current:
        raise UsageError(f"{ref!r} is not a gitlease ref")
    try:
        resource = "/".join(_unescape(s) for s in segments)
    except UnicodeDecodeError:
        raise UsageError(f"{ref!r} is not a gitlease ref") from None
    if encode_or_none(resource) != ref:
        raise UsageError(f"{ref!r} is not the canonical ref of any resource")
    return resource


def encode_or_none(resource: str) -> str | None:
    try:
        return encode(resource)
    except UsageError:
        return None


def _unescape(text: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "%":
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.append(ord(text[i]))
            i += 1
    return raw.decode("utf-8")
