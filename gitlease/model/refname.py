"""Resource names and their refs under ``refs/worklease/`` (docs/reference/store.md).

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
* Escaping can triple a name, and libgit2 refuses ref names longer than
  ``MAX_REF_CHARS``. A resource whose escaped ref would be longer is written in
  the *compact* form instead: ``refs/worklease/=/`` and the base32 (lower case,
  no padding) of its UTF-8 bytes, in ``CHUNK``-character components joined with
  ``+`` like a long segment, then ``.lease``. Any resource of at most
  ``MAX_RESOURCE_BYTES`` bytes fits (under 870 characters). ``=`` never occurs
  in the escaped form, so the two forms never meet, and since the escaped form
  is kept for every name it fits, every ref written before the compact form
  existed decodes as it did (a longer escaped ref could never be written).

Decoding is the inverse, and a ref decodes only if encoding its resource gives
it back, so the encoding is injective; the tests check the round trip,
validity, and the absence of case-fold and file/directory conflicts.
"""

from __future__ import annotations

from .._util import lazy
from ..errors import UsageError

PREFIX = "refs/worklease/"
LEAF_SUFFIX = ".lease"
CONTINUATION = "+"
CHUNK = 96
MAX_RESOURCE_BYTES = 512
#: libgit2 (1.9) refuses a longer ref name ("the provided buffer is too short").
MAX_REF_CHARS = 1023
COMPACT = "="
#: The one ref under ``PREFIX`` that is not a claim: a remote store's index of path scopes
#: (docs/reference/path-scopes.md). Under the claims' prefix, so every fetch of the claims
#: brings it and the claims' atomic push can carry it; no resource's ref is it or lies below
#: it (``@`` occurs in no resource's ref: the escaped form writes it ``%40``, and the compact
#: form is base32, ``=`` and ``+``), it does not end in ``.lease`` (:func:`decode` refuses
#: it), and ``Store.read_all``, the store's listing of claims, leaves it out. (Not ``=``:
#: gitolite refuses a ref name with a ``=`` in it.)
SCOPES_INDEX_REF = PREFIX + "@scopes"

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
_RESERVED_ENDINGS = (".lock", LEAF_SUFFIX)
_COMPONENT = lazy(r"^(?:[a-z0-9_-]|\.|%[0-9a-f]{2})+$")
_BASE32 = lazy(r"[a-z2-7]+")
#: A resource that encodes to itself: segments of ``a-z 0-9 - _`` of at most CHUNK characters.
_PLAIN = lazy(rf"[a-z0-9_-]{{1,{CHUNK}}}(?:/[a-z0-9_-]{{1,{CHUNK}}})*")


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
    ref = _escaped(resource)
    return ref if len(ref) <= MAX_REF_CHARS else _compact(resource)


def _compact(resource: str) -> str:
    import base64  # (long names only: the common path never loads it)

    body = base64.b32encode(resource.encode("utf-8")).decode("ascii").rstrip("=").lower()
    pieces = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]
    components = [COMPACT, *(piece + CONTINUATION for piece in pieces[:-1]), pieces[-1]]
    return PREFIX + "/".join(components) + LEAF_SUFFIX


def _escaped(resource: str) -> str:
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
    body = ref[len(PREFIX) : -len(LEAF_SUFFIX)]
    if len(body) <= MAX_RESOURCE_BYTES and _PLAIN.fullmatch(body):
        # Only characters written as they are, in components no longer than a chunk: the
        # resource is the text itself, and encoding it gives this ref back (no check needed).
        return body
    components = body.split("/")
    if components[0] == COMPACT:
        resource = _decode_compact(ref, components[1:])
    else:
        resource = _decode_escaped(ref, components)
    if encode_or_none(resource) != ref:
        raise UsageError(f"{ref!r} is not the canonical ref of any resource")
    return resource


def _decode_compact(ref: str, components: list[str]) -> str:
    body = []
    for i, component in enumerate(components):
        last = i == len(components) - 1
        piece = component if last else component[: -len(CONTINUATION)]
        if component.endswith(CONTINUATION) == last or not _BASE32.fullmatch(piece):
            raise UsageError(f"{ref!r} is not a gitlease ref")
        body.append(piece)
    text = "".join(body).upper()
    import base64

    try:
        return base64.b32decode(text + "=" * (-len(text) % 8)).decode("utf-8")
    except ValueError:  # a bad length (binascii.Error), or not UTF-8
        raise UsageError(f"{ref!r} is not a gitlease ref") from None


def _decode_escaped(ref: str, components: list[str]) -> str:
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
        return "/".join(_unescape(s) for s in segments)
    except UnicodeDecodeError:
        raise UsageError(f"{ref!r} is not a gitlease ref") from None


def encode_or_none(resource: str) -> str | None:
    """The ref of ``resource``, or None where it is not a valid resource name."""
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
