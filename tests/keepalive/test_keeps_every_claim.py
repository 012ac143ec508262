"""A keepalive keeps every claim it is registered for (issue 29.13): through a bundle member
released on its own, and through a heartbeat that changes the TTL."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import run_cli


def _show(resource: str, cwd: Path) -> dict:
    return run_cli("show", resource, "--json", cwd=cwd).json


def _renewed_twice_or_lapsed(resource: str, cwd: Path, since: str) -> dict:
    """Wait for the keepalive's second renewal after the one at ``since`` (a
    ``renewed_at``), or for the claim to lapse first (the failure); the last document seen.
    Events only: the bound turns a hang into a failure."""
    deadline = time.monotonic() + 120
    seen = {since}
    while True:
        doc = _show(resource, cwd)
        seen.add(doc["renewed_at"])
        if doc["state"] != "active" or len(seen) >= 3:
            return doc
        assert time.monotonic() < deadline, doc
        time.sleep(0.05)


def test_releasing_one_member_of_a_kept_bundle_keeps_the_others(repo: Path) -> None:
    """Releasing one member stopped the bundle's keepalive: the others expired with the
    agent alive."""
    got = run_cli("bundle", "acquire", "kb/a", "kb/b", "--ttl", "3s", "--keepalive", cwd=repo)
    assert got.code == 0, got
    assert run_cli("release", "kb/a", cwd=repo).code == 0
    since = _show("kb/b", repo)["renewed_at"]
    doc = _renewed_twice_or_lapsed("kb/b", repo, since)
    assert doc["state"] == "active", f"the other member lapsed while kept: {doc}"
    assert doc["keepalive"] is not None, doc
    assert run_cli("release", "kb/b", cwd=repo).code == 0
    assert _show("kb/b", repo)["keepalive"] is None


def test_a_heartbeat_that_shortens_the_ttl_of_a_kept_claim_changes_the_cadence(
    repo: Path,
) -> None:
    """`heartbeat --ttl 3s` on a claim kept at 30 s: the keepalive kept renewing every 10 s,
    and the claim lapsed after 3."""
    got = run_cli("acquire", "kc/1", "--ttl", "30s", "--keepalive", cwd=repo)
    assert got.code == 0, got
    beat = run_cli("heartbeat", "kc/1", "--ttl", "3s", "--json", cwd=repo)
    assert beat.code == 0, beat
    doc = _renewed_twice_or_lapsed("kc/1", repo, beat.json["renewed_at"])
    assert doc["state"] == "active", f"the kept claim lapsed: {doc}"
    assert run_cli("release", "kc/1", cwd=repo).code == 0
