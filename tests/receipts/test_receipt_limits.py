"""A bundle's receipt can always be read back (issue 29.5)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from gitlease.claims.request import MAX_BUNDLE_MEMBERS
from gitlease.receipts.receipt import MAX_RECEIPT_BYTES


def _names(count: int, char: str) -> list[str]:
    """``count`` distinct resource names of 512 UTF-8 bytes, escaped in JSON as much as any."""
    width = len(char.encode("utf-8"))
    return [f"{i:04d}" + char * ((512 - 4) // width) for i in range(count)]


def test_a_bundle_too_large_for_its_receipt_is_refused_before_the_write(repo: Path) -> None:
    """440 members of 512-byte names made a 1.1 MB receipt, read with a 1 MiB cap: exit 0,
    and every member held until its TTL by a receipt nobody could read."""
    names = _names(440, "a")
    got = run_cli("bundle", "acquire", *names, "--json", cwd=repo)
    assert got.code == 2, got
    assert str(MAX_BUNDLE_MEMBERS) in got.json["error"]["message"], got
    listed = run_cli("list", "--json", cwd=repo)
    assert listed.code == 0 and listed.json["claims"] == [], listed


def test_the_largest_bundle_allowed_reads_back_and_releases(repo: Path) -> None:
    """The largest bundle allowed, with the names that escape most: its receipt is under the
    cap, and heartbeat and release read it back."""
    names = _names(MAX_BUNDLE_MEMBERS, "\u00e9")
    got = run_cli("bundle", "acquire", *names, "--no-bind", "--json", cwd=repo)
    assert got.code == 0, got
    receipt = Path(got.json["receipt"])
    assert receipt.stat().st_size <= MAX_RECEIPT_BYTES
    assert len(json.loads(receipt.read_text())["claims"]) == MAX_BUNDLE_MEMBERS
    bundle = got.json["bundle_id"]
    assert run_cli("bundle", "heartbeat", bundle, cwd=repo).code == 0
    assert run_cli("bundle", "release", bundle, cwd=repo).code == 0
