"""The claim record: a small signed text blob that a person can read (docs/reference/record.md).

A record is one ``field value`` pair a line, in a fixed order, ending with an
Ed25519 signature over every byte before the signature line. Free text
(resource, owner, note, checkpoint) is written as a JSON string so that a
newline or a quote in it cannot forge another field. Parsing is strict: a
record must re-serialise to exactly the bytes it was read from, so any changed
byte fails either the parse, the canonical check, or the signature.

Parsing is also total: anyone who can write to the repository can write a
validly self-signed record with any values, so every value is checked
(:mod:`gitlease.model.fields`: times are times, numbers fit in 63 bits, object ids are hex)
and any bytes at all give either a record or :class:`CorruptRecordError`, never another
exception in the code that reads the record afterwards. Free text from a
record may still hold control characters: :func:`gitlease._util.text.printable` escapes
them for people; :func:`~gitlease.model.fields.check_text` keeps them (and pasted tokens)
out of new records.

``cryptography`` is imported only when a key is made or a signature checked,
so the commit hook's path stays lean.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from .._util import TYPE_CHECKING
from .._util.digest import sha1, sha256
from .._util.value import Factory, Value
from ..errors import CorruptRecordError
from .fields import MAX_INT as MAX_INT  # (every number's bound; callers read it from here too)
from .fields import PATTERNS, format_paths, format_value, parse_paths, parse_value, real_time

if TYPE_CHECKING:
    from typing import Any, ClassVar


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
_OPTIONAL = {"bundle_id", "released_at", "note", "checkpoint", "previous"}
#: The optional ``paths`` line (path scopes, docs/reference/record.md): written right after
#: ``checkpoint``, and only when the claim has scopes, so a record without any is byte for
#: byte what earlier versions wrote (and their signatures stay valid).
_PATHS_LINE = b"\npaths "
_AFTER_PATHS = b"\npublic-key "


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
            lines.append(f"{name} {format_value(getattr(self, attr), kind)}")
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
    paths = parse_paths(data[at + len(_PATHS_LINE) : end])
    record = _parse_plain(rest)
    return record.replace(paths=paths, raw=bytes(data))


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
            ok = ok and (values[i] is None or real_time(values[i]))
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
        values.append(parse_value(line[len(prefix) :], kind, name))
    sig_line = lines[-2]
    if not sig_line.startswith("signature "):
        raise CorruptRecordError("the record has no signature line")
    signature = parse_value(sig_line[len("signature ") :], "hex", "signature")
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
        + "".join(re.escape(name) + " " + PATTERNS[kind] + "\n" for name, _, kind in _LAYOUT)
        + "signature ([0-9a-f]+)\n",
        re.DOTALL,
    )


_PREFIXES = tuple(name + " " for name, _, _ in _LAYOUT)


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
    digest = sha256 if length == 64 else sha1
    return digest(b"blob %d\0" % len(data) + data).hexdigest()


def _random_hex(size: int) -> str:
    return os.urandom(size).hex()


def new_token() -> str:
    """A fresh 256-bit bearer token, in a form secret scanners recognise."""
    import base64  # (writes only: the reads and the commit check never load it)

    return TOKEN_PREFIX + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


class SigningKey:
    """The claim's Ed25519 key, derived from its token so only the receipt is secret."""

    def __new__(cls, token: str) -> SigningKey:
        return _signing_key(token)

    def _init(self, token: str) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        seed = sha256(_KEY_CONTEXT + token.encode("utf-8")).digest()
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
