"""The claim record: strict round trip, and any changed byte fails verification."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitlease.errors import CorruptRecordError
from gitlease.model.record import (
    GUARDED,
    HELD,
    Record,
    SigningKey,
    new_claim_id,
    new_token,
    parse,
    parse_and_verify,
)

TOKEN = new_token()
KEY = SigningKey(TOKEN)
texts = st.one_of(st.none(), st.text(max_size=80))


def make(note: str | None = None, owner: str = "agent@host:1", resource: str = "a/b") -> Record:
    return Record(
        resource=resource,
        state=HELD,
        claim_id=new_claim_id(),
        owner=owner,
        revision=3,
        bundle_id=None,
        mode=GUARDED,
        acquired_at="2026-11-29T10:00:00.000Z",
        renewed_at="2026-11-29T10:00:00.000Z",
        released_at=None,
        expires_at="2026-11-29T10:15:00.000Z",
        renew_by="2026-11-29T10:07:30.000Z",
        ttl_ms=900_000,
        boot_id="boot-1",
        boot_expires_ms=1_000_000,
        note=note,
        checkpoint=None,
        public_key=KEY.public_hex,
        previous=None,
    )


@given(
    note=texts, owner=st.text(min_size=1, max_size=40), resource=st.text(min_size=1, max_size=40)
)
@settings(max_examples=200)
def test_round_trip(note: str | None, owner: str, resource: str) -> None:
    record = make(note, owner, resource).signed(KEY)
    parsed = parse_and_verify(record.raw)
    assert parsed == record
    assert parsed.raw == record.raw


@given(st.data())
@settings(max_examples=300)
def test_any_changed_byte_fails(data: st.DataObject) -> None:
    raw = bytearray(make(note='say "hi"\nnext line').signed(KEY).raw)
    index = data.draw(st.integers(0, len(raw) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda b: b != raw[index]))
    raw[index] = value
    with pytest.raises(CorruptRecordError):
        parse_and_verify(bytes(raw))


def test_a_note_cannot_forge_a_field() -> None:
    record = make(note="x\nstate released\nrevision 99").signed(KEY)
    assert parse_and_verify(record.raw).note == "x\nstate released\nrevision 99"
    assert record.raw.count(b"\nstate ") == 1


def test_re_signing_with_another_key_is_refused() -> None:
    other = SigningKey(new_token())
    with pytest.raises(ValueError):
        make().signed(other)


def test_tokens_look_like_tokens_and_never_appear_in_records() -> None:
    body = TOKEN.removeprefix("glt_")
    assert TOKEN.startswith("glt_") and len(TOKEN) == 47
    assert len(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))) == 32  # 32 random bytes
    assert TOKEN.encode() not in make().signed(KEY).raw
    assert "glt_" not in repr(KEY)


@pytest.mark.parametrize("garbage", [b"", b"hello\n", b"\xff\xfe", b"gitlease-claim v1\n"])
def test_garbage_is_corrupt(garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        parse(garbage)
