"""Durations take ASCII digits only (``--ttl ٥`` is USAGE), for every option that takes one."""

from __future__ import annotations

from pathlib import Path

import pytest
from observe import refs

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
