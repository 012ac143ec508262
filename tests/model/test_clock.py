"""Durations and wall-clock stamps."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitlease.errors import UsageError
from gitlease.model.clock import format_duration, parse_duration_ms, parse_rfc3339, rfc3339


@given(st.integers(0, 253402300799999))
def test_rfc3339_round_trip_agrees_with_datetime(ms: int) -> None:
    text = rfc3339(ms)
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    assert text == moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    assert parse_rfc3339(text) == ms


@pytest.mark.parametrize(
    "bad",
    [
        "2026-02-30T00:00:00.000Z",
        "2026-11-29T24:00:00.000Z",
        "2026-11-29 10:00:00.000Z",
        "2026-11-29T10:00:00Z",
    ],
)
def test_bad_stamps(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_rfc3339(bad)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("90", 90_000),
        ("90s", 90_000),
        ("15m", 900_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("500ms", 500),
        ("1.5s", 1500),
        (" 3m ", 180_000),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("bad", ["", "m", "-1s", "1w", "1.5.2s", "400d", "1 h 2", "inf"])
def test_bad_durations(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_duration_ms(bad)


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (250, "250ms"),
        (4_000, "4s"),
        (252_000, "4m 12s"),
        (3_780_000, "1h 3m"),
        (90_000_000, "1d 1h"),
    ],
)
def test_format_duration(ms: int, text: str) -> None:
    assert format_duration(ms) == text
