"""A self-signed record with values no writer makes (a 5,000-digit revision, impossible times,
huge numbers, an option as ``previous``) is invalid for every command, and repairable
(docs/reliability.md, "At the edges", item 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from forged import forge, put
from observe import CONTROL, no_crash, ref_of

R = "edge/1"


def _store_wide(cli, resource: str) -> dict[str, int]:
    """Every store-wide command once; none may crash."""
    codes = {}
    for args in (
        ["list"],
        ["list", "--json"],
        ["show", resource],
        ["free", resource],
        ["log", resource],
        ["prune", "--older-than", "0s"],
        ["verify"],
        ["acquire", resource, "--no-bind"],
    ):
        got = cli(*args)
        no_crash(got)
        assert not CONTROL.search(got.out + got.err), got
        codes[" ".join(args)] = got.code
    return codes


def test_a_revision_of_5000_digits_is_invalid_and_repairable(cli, repo: Path) -> None:
    put(repo, ref_of(R), forge(R, revision="7" * 5000))
    codes = _store_wide(cli, R)
    assert (
        codes["list"] == 0 and codes["show " + R] == 7 and codes["acquire " + R + " --no-bind"] == 7
    )
    assert cli("list", "--json").json["claims"][0]["state"] == "invalid"
    assert cli("free", R).out.strip() == "", "an invalid record is never offered"
    repaired = cli("verify", "--repair", "--json")
    no_crash(repaired)
    assert repaired.code == 0, repaired
    assert cli("acquire", R, "--no-bind").code == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"expires_at": "not-a-time", "boot_id": "another-boot"},
        {"boot_expires_ms": str(10**400)},
        {"state": "released", "released_at": "yesterday"},
        {"ttl_ms": "99999999999999999999"},
        {"acquired_at": "2026-02-30T10:00:00.000Z"},
        {"previous": "--batch-all-objects"},
    ],
    ids=["bad-time-foreign-boot", "huge-boot-expiry", "released-yesterday", "huge-ttl",
         "no-such-day", "option-as-previous"],
)  # fmt: skip
def test_a_self_signed_record_with_impossible_values_is_invalid_everywhere(
    cli, repo: Path, fields: dict[str, str]
) -> None:
    put(repo, ref_of(R), forge(R, **fields))
    codes = _store_wide(cli, R)
    assert codes["list"] == 0 and codes[f"show {R}"] == 7, codes
    assert codes[f"acquire {R} --no-bind"] == 7, codes
    assert cli("list", "--json").json["claims"][0]["state"] == "invalid"
