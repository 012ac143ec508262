"""Fuzzing the parsers: any input gives a result or a documented error, never a traceback."""

from __future__ import annotations

import contextlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitlease.errors import CorruptRecordError, GitleaseError, ReceiptError, UsageError
from gitlease.model.clock import parse_duration_ms, parse_rfc3339
from gitlease.model.record import parse_and_verify
from gitlease.model.refname import decode, validate_resource
from gitlease.providers import canonical_key, provider_names
from gitlease.receipts.receipt import parse as parse_receipt

FUZZ = settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
record_like = st.one_of(
    st.binary(max_size=600),
    st.lists(
        st.sampled_from(
            [
                b"gitlease-claim v1\n",
                b'resource "a"\n',
                b"state held\n",
                b"revision 1\n",
                b"signature ab\n",
                b"-\n",
                b"\xff",
                b"\n",
            ]
        ),
        max_size=30,
    ).map(b"".join),
)


@given(record_like)
@FUZZ
def test_record_parser(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        parse_and_verify(data)


@given(st.one_of(st.text(max_size=200), st.text(max_size=60).map(lambda s: "refs/worklease/" + s)))
@FUZZ
def test_ref_decoder(ref: str) -> None:
    try:
        resource = decode(ref)
    except UsageError:
        return
    assert validate_resource(resource) == resource


@given(st.one_of(st.text(max_size=20), st.integers(), st.floats(allow_nan=True)))
@FUZZ
def test_durations(text: str | int | float) -> None:
    with contextlib.suppress(UsageError):
        assert parse_duration_ms(text) >= 0


@given(st.text(max_size=40))
@FUZZ
def test_timestamps(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_rfc3339(text)


@given(
    st.sampled_from(["github", "gitlab", "jira", "linear", "beads", "taskmaster", "raw"]),
    st.one_of(
        st.text(max_size=80),
        st.text(alphabet="abcAB09-_./#!:?=&%", max_size=60).map(lambda s: "https://" + s),
        st.text(alphabet="abc09-/#!", max_size=30),
    ),
)
@FUZZ
def test_providers(provider: str, item: str) -> None:
    assert provider in provider_names()
    try:
        resource = canonical_key(provider, item, cwd=Path.cwd())
    except UsageError:
        return
    assert validate_resource(resource) == resource


@given(st.binary(max_size=400))
@FUZZ
def test_receipt_parser(data: bytes) -> None:
    with contextlib.suppress(ReceiptError):
        parse_receipt(Path("r.json"), data)


@given(st.text(max_size=30))
@FUZZ
def test_path_provider_never_crashes(item: str) -> None:
    try:
        canonical_key("path", item, cwd=Path(__file__).parent)
    except GitleaseError as exc:
        assert exc.exit_code in (1, 2)
