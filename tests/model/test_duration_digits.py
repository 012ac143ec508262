"""Durations take ASCII digits only (``--ttl ٥`` is USAGE), for every option that takes one;
the example a refusal gives is one every option takes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from observe import refs

from gitlease.errors import UsageError
from gitlease.model.durations import duration_ms

R = "edge/1"


@pytest.mark.parametrize(
    "args",
    [
        ["acquire", R, "--ttl", "٥"],
        ["acquire", R, "--ttl", "５m"],
        ["acquire", R, "--wait", "٣s"],
        ["check", R, "--min-remaining", "١m"],
        ["prune", "--older-than", "٧d"],
    ],
)
def test_durations_accept_ascii_digits_only(cli, repo: Path, args: list[str]) -> None:
    got = cli(*args, "--json")
    assert got.code == 2 and got.json["error"]["code"] == "USAGE", got
    assert refs(repo) == ""


@pytest.mark.parametrize("bad", ["90", "0", "0.5", "99999999", "abc", "15 minutes", "1x", "-5s"])
def test_a_refused_duration_suggests_one_that_is_taken(bad: str) -> None:
    with pytest.raises(UsageError) as refused:
        duration_ms(bad, name="TTL")
    example = re.search(r"e\.g\. ([^\s,]+)", str(refused.value))
    assert example is not None, refused.value
    assert duration_ms(example.group(1)) >= 1000, refused.value  # (a TTL is at least 1s)
