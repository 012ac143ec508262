"""The claim record: a small signed text blob that a person can read (docs/reference/record.md).

A record is one ``field value`` pair a line, in a fixed order, ending with an
Ed25519 signature over every byte before the signature line. Free text
(resource, owner, note, checkpoint) is written as a JSON string so that a
newline or a quote in it cannot forge another field. Parsing is strict: a
record must re-serialise to exactly the bytes it was read from, so any changed
byte fails either the parse, the canonical check, or the signature.

Parsing is also total: anyone who can write to the repository can write a
validly self-signed record with any values, so every value is checked here
(times are times, numbers fit in 63 bits, object ids are hex) and any bytes
at all give either a record or :class:`CorruptRecordError`, never another
exception in the code that reads the record afterwards. Free text from a
record may still hold control characters: :func:`gitlease._util.text.printable` escapes
them for people; :func:`check_text` keeps them (and pasted tokens) out of new records.

``cryptography`` is imported only when a key is made or a signature checked,
so the commit hook's path stays lean.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from functools import lru_cache
from typing import Any, ClassVar

from .._util.text import UNPRINTABLE
from .._util.value import Factory, Value
from ..errors import CorruptRecordError, UsageError

MAGIC = "gitlease-claim v1"
HELD = "held"
RELEASED = "released"
GUARDED = "guarded"
COORDINATION_ONLY = "coordination-only"
TOKEN_PREFIX = "glt_"
_KEY_CONTEXT = b"gitlease/v1/claim-key\0"

# (field name in the text, attribute, kind). Kinds: text (JSON string or -),
# word (no spaces), int (decimal, below 2**63), time (RFC 3339 UTC with milliseconds),
# hex (lower-case hex digits; an object id, a key).
_LAYOUT: tuple[tuple[str, str, str], ...] = (
    ("resource", "resource", "text"),
    ("state", "state", "word"),
    ("claim-id", "claim_id", "word"),
    ("owner", "owner", "text"),
    ("revision", "revision", "int"),
    ("bundle-id", "bundle_id", "word"),
    ("mode", "mode", "word"),
    ("acquired-at", "acquired_at", "time"),
    ("renewed-at", "renewed_at", "time"),
    ("released-at", "released_at", "time"),
    ("expires-at", "expires_at", "time"),
    ("renew-by", "renew_by", "time"),
    ("ttl-ms", "ttl_ms", "int"),
    ("boot-id", "boot_id", "word"),
    ("boot-expires-ms", "boot_expires_ms", "int"),
    ("note", "note", "text"),
    ("checkpoint", "checkpoint", "text"),
    ("public-key", "public_key", "hex"),
    ("previous", "previous", "hex"),
    ("nonce", "nonce", "hex"),
)
_WORD = re.compile(r"[!-~]+")  # printable ASCII, no spaces
_HEX = re.compile(r"[0-9a-f]+")
_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{3}Z", re.ASCII)
_INT_DIGITS = 19  # 2**63 - 1 has 19 digits: no value gets near Python's int-parsing limit
MAX_INT = 2**63 - 1
#: What a pasted bearer token looks like: the prefix and a run of base64url characters.
#: (A real token has 43; a shorter run is refused too, since part of a token is a leak.)
TOKEN_LIKE = re.compile(r"glt_[A-Za-z0-9_-]{16,}")
_OPTIONAL = {"bundle_id", "released_at", "note", "checkpoint", "previous"}
#: The optional ``paths`` line (path scopes, docs/reference/record.md): written right after
#: ``checkpoint``, and only when the claim has scopes, so a record without any is byte for
#: byte what earlier versions wrote (and their signatures stay valid).
_PATHS_LINE = b"\npaths "
_AFTER_PATHS = b"\npublic-key "
MAX_SCOPES = 64
MAX_SCOPE_CHARS = 1024


class Record(Value):
    """One version of a claim. ``signature`` and ``raw`` are set on signed/parsed records."""

    __slots__ = (*(attr for _, attr, _ in _LAYOUT), "signature", "raw", "paths")
    _defaults: ClassVar[dict[str, Any]] = {
        "nonce": Factory(lambda: _random_hex(16)),
        "signature": None,
        "raw": None,
        "paths": None,
    }
    _hidden = frozenset({"raw"})

    resource: str
    state: str
    claim_id: str
    owner: str
    revision: int
    bundle_id: str | None
    mode: str
    acquired_at: str
    renewed_at: str
    released_at: str | None
    expires_at: str
    renew_by: str
    ttl_ms: int
    boot_id: str
    boot_expires_ms: int
    note: str | None
    checkpoint: str | None
    public_key: str
    previous: str | None
    nonce: str
    signature: str | None
    raw: bytes | None
    paths: tuple[str, ...] | None  # path scopes (patterns), or None for none

    @property
    def held(self) -> bool:
        """The record holds its claim (not a tombstone); expiry is judged by the clock."""
        return self.state == HELD

    def evolve(self, **changes: Any) -> Record:
        """A successor draft: new nonce, unsigned, with the given fields changed."""
        changes.setdefault("nonce", _random_hex(16))
        return self.replace(signature=None, raw=None, **changes)

    def payload(self) -> bytes:
        """The signed bytes: every line but the signature line."""
        lines = [MAGIC]
        for name, attr, kind in _LAYOUT:
            lines.append(f"{name} {_format_value(getattr(self, attr), kind)}")
            if attr == "checkpoint" and self.paths is not None:
                lines.append(f"paths {format_paths(self.paths)}")
        return ("\n".join(lines) + "\n").encode("utf-8")

    def signed(self, signing_key: SigningKey) -> Record:
        """This record signed by the claim's key, with its blob bytes in ``raw``."""
        if signing_key.public_hex != self.public_key:
            raise ValueError("the signing key does not belong to this claim")
        payload = self.payload()
        signature = signing_key.sign(payload).hex()
        raw = payload + f"signature {signature}\n".encode("ascii")
        signed = self.replace(signature=signature, raw=raw)
        remember(signed)  # reading it back in this process needs no second check
        return signed


def _format_value(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "text":
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def format_paths(paths: tuple[str, ...]) -> str:
    """The ``paths`` value: a JSON list of strings, compact, non-ASCII kept as is."""
    return json.dumps(list(paths), ensure_ascii=False, separators=(",", ":"))


def parse(data: bytes) -> Record:
    """Parse a record strictly; :class:`CorruptRecordError` on anything off.

    A record with a ``paths`` line is read without it, and the line checked on its own:
    it must follow ``checkpoint``, appear once, and hold a canonical JSON list of at most
    64 strings without control characters. (Whether each is a valid pattern is for the
    scopes code to judge: this module does not know patterns.)
    """
    at = data.find(_PATHS_LINE)
    if at < 0:
        return _parse_plain(data)
    end = data.find(b"\n", at + 1)
    line_start = data.rfind(b"\n", 0, at) + 1
    if (
        end < 0
        or not data.startswith(b"checkpoint ", line_start)
        or not data.startswith(_AFTER_PATHS, end)
    ):
        raise CorruptRecordError("the record's paths line is not right after its checkpoint")
    rest = data[:at] + data[end:]
    if _PATHS_LINE in rest:
        raise CorruptRecordError("the record has more than one paths line")
    paths = _parse_paths(data[at + len(_PATHS_LINE) : end])
    record = _parse_plain(rest)
    return record.replace(paths=paths, raw=bytes(data))


def _parse_paths(value: bytes) -> tuple[str, ...]:
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
    if any(UNPRINTABLE.search(p) for p in paths):
        raise CorruptRecordError("the record's paths hold a control character")
    out = tuple(paths)
    if format_paths(out) != text:
        raise CorruptRecordError("the record is not in canonical form")
    return out


def _parse_plain(data: bytes) -> Record:
    """:func:`parse` of a record without a ``paths`` line.

    Every value must also be written the one way :meth:`Record.payload` writes
    it, so the record re-serialises to exactly ``data`` (checked value by value,
    which is what re-serialising the whole record and comparing would check).
    Records as gitlease writes them match one regular expression and are read
    in one pass; anything else is read line by line, which says what is wrong.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptRecordError("the record is not UTF-8 text") from None
    match = _whole_record(text)
    if match is not None:
        values: list[Any] = list(match.groups())  # the fields, then the signature
        if any(values[i] == "-" for i in _REQUIRED_AT):
            return _parse_lines(data)  # (which says which value is missing)
        ok = True
        for i in _NONE_AT:
            if values[i] == "-":
                values[i] = None
        for i in _TEXT_AT:
            if values[i] is not None:
                values[i] = values[i][1:-1]  # no escapes: the pattern says so
        for i in _INT_AT:
            if values[i] is not None:
                values[i] = int(values[i])
                ok = ok and values[i] <= MAX_INT
        for i in _TIME_AT:
            ok = ok and (values[i] is None or _real_time(values[i]))
        state, mode = values[_STATE_AT], values[_MODE_AT]
        if ok and state in (HELD, RELEASED) and mode in (GUARDED, COORDINATION_ONLY):
            values.append(bytes(data))
            values.append(None)  # paths: none (parse reads a paths line itself)
            return Record._of(tuple(values))
    return _parse_lines(data)


def _parse_lines(data: bytes) -> Record:
    """:func:`parse`, one line at a time: slower, and says what is wrong."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptRecordError("the record is not UTF-8 text") from None
    lines = text.split("\n")
    if len(lines) != _LINES or lines[0] != MAGIC or lines[-1] != "":
        raise CorruptRecordError("the record does not have the gitlease-claim v1 layout")
    values: list[Any] = []
    for (name, _, kind), prefix, line in zip(_LAYOUT, _PREFIXES, lines[1:], strict=False):
        if not line.startswith(prefix):
            raise CorruptRecordError(f"the record has {line[:40]!r} where {name!r} belongs")
        values.append(_parse_value(line[len(prefix) :], kind, name))
    sig_line = lines[-2]
    if not sig_line.startswith("signature "):
        raise CorruptRecordError("the record has no signature line")
    signature = _parse_value(sig_line[len("signature ") :], "hex", "signature")
    for (_, attr, _), value in zip(_LAYOUT, values, strict=True):
        if value is None and attr not in _OPTIONAL:
            raise CorruptRecordError(f"the record has no value for {attr.replace('_', '-')}")
    if signature is None:
        raise CorruptRecordError("the record has no value for signature")
    record = Record._of((*values, signature, bytes(data), None))
    if record.state not in (HELD, RELEASED) or record.mode not in (GUARDED, COORDINATION_ONLY):
        raise CorruptRecordError("the record has an unknown state or mode")
    return record


_LINES = len(_LAYOUT) + 3  # magic, fields, signature, final empty string
_PATTERNS = {
    "text": r'(-|"[^"\\\x00-\x1f]*")',  # a string that needs no escape, or none
    "word": r"([!-~]+)",
    "int": r"(-|0|[1-9][0-9]{0,18})",
    "time": r"(-|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z)",
    "hex": r"(-|[0-9a-f]+)",
}
_REQUIRED_AT = tuple(i for i, (_, attr, _) in enumerate(_LAYOUT) if attr not in _OPTIONAL)
_NONE_AT = tuple(i for i, (_, attr, _) in enumerate(_LAYOUT) if attr in _OPTIONAL)
_TEXT_AT = tuple(i for i, (_, _, kind) in enumerate(_LAYOUT) if kind == "text")
_INT_AT = tuple(i for i, (_, _, kind) in enumerate(_LAYOUT) if kind == "int")
_TIME_AT = tuple(i for i, (_, _, kind) in enumerate(_LAYOUT) if kind == "time")
_STATE_AT = next(i for i, (_, attr, _) in enumerate(_LAYOUT) if attr == "state")
_MODE_AT = next(i for i, (_, attr, _) in enumerate(_LAYOUT) if attr == "mode")
#: How many records this process parsed before the whole-record expression was compiled:
#: it costs about 2 ms to compile, which a command that reads one record never repays.
_PARSED_SLOWLY = [0]
_LINE_BY_LINE = 8


def _whole_record(text: str) -> re.Match[str] | None:
    """The whole-record expression's match, once this process has parsed a few records."""
    if _PARSED_SLOWLY[0] < _LINE_BY_LINE:
        _PARSED_SLOWLY[0] += 1
        return None
    return _record_pattern().fullmatch(text)


@lru_cache(maxsize=1)
def _record_pattern() -> re.Pattern[str]:
    """One regular expression for a whole record as gitlease writes it (compiled once)."""
    return re.compile(
        re.escape(MAGIC)
        + "\n"
        + "".join(re.escape(name) + " " + _PATTERNS[kind] + "\n" for name, _, kind in _LAYOUT)
        + "signature ([0-9a-f]+)\n",
        re.DOTALL,
    )


_PREFIXES = tuple(name + " " for name, _, _ in _LAYOUT)
#: What ``json.dumps(..., ensure_ascii=False)`` escapes in a string: a quoted string without
#: these is written the one canonical way.
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _parse_value(text: str, kind: str, name: str) -> Any:
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
    return _TIME.fullmatch(text) is not None and _real_time(text)


def _real_time(text: str) -> bool:
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


def verify(record: Record) -> None:
    """Check the signature against the record's own public key (STORE on failure)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = record.raw
    # a parsed record's payload is its bytes without the signature line (parse checked it)
    payload = raw[: raw.rindex(b"signature ")] if raw is not None else record.payload()
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(record.public_key))
        key.verify(bytes.fromhex(record.signature or ""), payload)
    except (InvalidSignature, ValueError):
        raise CorruptRecordError("the record fails signature verification") from None


#: Records verified (or signed) by this process, by their bytes: a blob never changes.
_VERIFIED: dict[bytes, Record] = {}
_VERIFIED_MAX = 4096


def parse_and_verify(data: bytes) -> Record:
    """Parse and verify, remembering records already verified (a blob never changes)."""
    record = _VERIFIED.get(data)
    if record is None:
        record = parse(data)
        verify(record)
        remember(record)
    return record


def known(data: bytes) -> Record | None:
    """The record in ``data`` if this process verified (or signed) it before."""
    return _VERIFIED.get(data)


def remember(record: Record) -> None:
    """Note a record as verified in this process: one it parsed and verified, or signed."""
    if record.raw is None:
        return
    if len(_VERIFIED) >= _VERIFIED_MAX:
        _VERIFIED.pop(next(iter(_VERIFIED)))
    _VERIFIED[record.raw] = record


def blob_oid(data: bytes, length: int = 40) -> str:
    """The git object id of a blob holding ``data`` (``length``: 40 for SHA-1, 64 for SHA-256).

    Computed here, never taken from git's word: an object file of a store can
    be replaced under its name, and git does not hash again what it reads.
    """
    digest = hashlib.sha256 if length == 64 else hashlib.sha1
    return digest(b"blob %d\0" % len(data) + data).hexdigest()


def _random_hex(size: int) -> str:
    return os.urandom(size).hex()


def new_token() -> str:
    """A fresh 256-bit bearer token, in a form secret scanners recognise."""
    return TOKEN_PREFIX + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


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
    bad = UNPRINTABLE.search(text)
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


class SigningKey:
    """The claim's Ed25519 key, derived from its token so only the receipt is secret."""

    def __new__(cls, token: str) -> SigningKey:
        return _signing_key(token)

    def _init(self, token: str) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        seed = hashlib.sha256(_KEY_CONTEXT + token.encode("utf-8")).digest()
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        # public_bytes_raw(): the serialization module would cost ~20 ms of imports
        self.public_hex = self._key.public_key().public_bytes_raw().hex()

    def sign(self, payload: bytes) -> bytes:
        """An Ed25519 signature over ``payload``."""
        return self._key.sign(payload)

    def __repr__(self) -> str:  # never show the key material
        return f"SigningKey(public={self.public_hex[:12]}…)"


@lru_cache(maxsize=64)
def _signing_key(token: str) -> SigningKey:
    """Derive once per token and process: every heartbeat of a claim signs with the same key."""
    key = object.__new__(SigningKey)
    key._init(token)
    return key


def new_claim_id() -> str:
    """A fresh claim id: random, so a claim is never mistaken for an earlier one."""
    return "c-" + _random_hex(8)


def new_bundle_id() -> str:
    """A fresh bundle id, naming the claims one bundle acquire made together."""
    return "b-" + _random_hex(8)
