"""The claim record: a small signed text blob that a person can read (SPEC §2).

A record is one ``field value`` pair a line, in a fixed order, ending with an
Ed25519 signature over every byte before the signature line. Free text
(resource, owner, note, checkpoint) is written as a JSON string so that a
newline or a quote in it cannot forge another field. Parsing is strict: a
record must re-serialise to exactly the bytes it was read from, so any changed
byte fails either the parse, the canonical check, or the signature.

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

from .errors import CorruptRecordError
from .value import Factory, Value

MAGIC = "gitlease-claim v1"
HELD = "held"
RELEASED = "released"
GUARDED = "guarded"
COORDINATION_ONLY = "coordination-only"
TOKEN_PREFIX = "glt_"
_KEY_CONTEXT = b"gitlease/v1/claim-key\0"

# (field name in the text, attribute, kind). Kinds: text (JSON string or -),
# word (no spaces), int.
_LAYOUT: tuple[tuple[str, str, str], ...] = (
    ("resource", "resource", "text"),
    ("state", "state", "word"),
    ("claim-id", "claim_id", "word"),
    ("owner", "owner", "text"),
    ("revision", "revision", "int"),
    ("bundle-id", "bundle_id", "word"),
    ("mode", "mode", "word"),
    ("acquired-at", "acquired_at", "word"),
    ("renewed-at", "renewed_at", "word"),
    ("released-at", "released_at", "word"),
    ("expires-at", "expires_at", "word"),
    ("renew-by", "renew_by", "word"),
    ("ttl-ms", "ttl_ms", "int"),
    ("boot-id", "boot_id", "word"),
    ("boot-expires-ms", "boot_expires_ms", "int"),
    ("note", "note", "text"),
    ("checkpoint", "checkpoint", "text"),
    ("public-key", "public_key", "word"),
    ("previous", "previous", "word"),
    ("nonce", "nonce", "word"),
)
_WORD = re.compile(r"[!-~]+")  # printable ASCII, no spaces
_OPTIONAL = {"bundle_id", "released_at", "note", "checkpoint", "previous"}


class Record(Value):
    """One version of a claim. ``signature`` and ``raw`` are set on signed/parsed records."""

    __slots__ = (*(attr for _, attr, _ in _LAYOUT), "signature", "raw")
    _defaults: ClassVar[dict[str, Any]] = {
        "nonce": Factory(lambda: _random_hex(16)),
        "signature": None,
        "raw": None,
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

    @property
    def held(self) -> bool:
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
        return ("\n".join(lines) + "\n").encode("utf-8")

    def signed(self, signing_key: SigningKey) -> Record:
        """This record signed by the claim's key, with its blob bytes in ``raw``."""
        if signing_key.public_hex != self.public_key:
            raise ValueError("the signing key does not belong to this claim")
        payload = self.payload()
        signature = signing_key.sign(payload).hex()
        raw = payload + f"signature {signature}\n".encode("ascii")
        return self.replace(signature=signature, raw=raw)


def _format_value(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "text":
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def parse(data: bytes) -> Record:
    """Parse a record strictly; :class:`CorruptRecordError` on anything off."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptRecordError("the record is not UTF-8 text") from None
    lines = text.split("\n")
    expected = len(_LAYOUT) + 3  # magic, fields, signature, final empty string
    if len(lines) != expected or lines[0] != MAGIC or lines[-1] != "":
        raise CorruptRecordError("the record does not have the gitlease-claim v1 layout")
    values: dict[str, Any] = {}
    for (name, attr, kind), line in zip(_LAYOUT, lines[1:], strict=False):
        prefix = name + " "
        if not line.startswith(prefix):
            raise CorruptRecordError(f"the record has {line[:40]!r} where {name!r} belongs")
        values[attr] = _parse_value(line[len(prefix) :], kind, name)
    sig_line = lines[-2]
    if not sig_line.startswith("signature "):
        raise CorruptRecordError("the record has no signature line")
    values["signature"] = sig_line[len("signature ") :]
    for attr in set(values) - _OPTIONAL - {"signature"}:
        if values[attr] is None:
            raise CorruptRecordError(f"the record has no value for {attr.replace('_', '-')}")
    record = Record(**values, raw=bytes(data))
    if record.state not in (HELD, RELEASED) or record.mode not in (GUARDED, COORDINATION_ONLY):
        raise CorruptRecordError("the record has an unknown state or mode")
    if record.payload() + f"signature {record.signature}\n".encode() != data:
        raise CorruptRecordError("the record is not in canonical form")
    return record


def _parse_value(text: str, kind: str, name: str) -> Any:
    if text == "-":
        return None
    if kind == "text":
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, str):
            raise CorruptRecordError(f"the record's {name} is not a quoted string")
        return value
    if kind == "int":
        if not text.isascii() or not text.isdigit():
            raise CorruptRecordError(f"the record's {name} is not a number")
        return int(text)
    if not _WORD.fullmatch(text):
        raise CorruptRecordError(f"the record's {name} is malformed")
    return text


def verify(record: Record) -> None:
    """Check the signature against the record's own public key (STORE on failure)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(record.public_key))
        key.verify(bytes.fromhex(record.signature or ""), record.payload())
    except (InvalidSignature, ValueError):
        raise CorruptRecordError(
            f"the record of {record.resource!r} fails signature verification"
        ) from None


@lru_cache(maxsize=4096)
def parse_and_verify(data: bytes) -> Record:
    """Parse and verify, remembering records already verified (a blob never changes)."""
    record = parse(data)
    verify(record)
    return record


def _random_hex(size: int) -> str:
    return os.urandom(size).hex()


def new_token() -> str:
    """A fresh 256-bit bearer token, in a form secret scanners recognise."""
    return TOKEN_PREFIX + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


def is_token(text: object) -> bool:
    if not isinstance(text, str) or not text.startswith(TOKEN_PREFIX):
        return False
    body = text[len(TOKEN_PREFIX) :]
    try:
        return len(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))) == 32
    except ValueError:
        return False


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
    return "c-" + _random_hex(8)


def new_bundle_id() -> str:
    return "b-" + _random_hex(8)
