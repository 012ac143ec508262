"""A keepalive keeps every claim it is registered for (issue 29.13): through a bundle member
released on its own, and through a heartbeat that changes the TTL."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli, wait_for

#: Renewed every 5 s: at load 30 a keepalive took over 6 s to start, or to renew.
TTL = "15s"


def _show(resource: str, cwd: Path) -> dict:
    return run_cli("show", resource, "--json", cwd=cwd).json


def _renewed_twice_or_lapsed(resource: str, cwd: Path, since: str) -> dict:
    """Wait for the keepalive's second renewal after the one at ``since`` (a
    ``renewed_at``), or for the claim to lapse first (the failure); the last document seen.
    Events only: the bound turns a hang into a failure."""
    seen = {since}

    def renewed_twice_or_lapsed() -> dict | None:
        doc = _show(resource, cwd)
        seen.add(doc["renewed_at"])
        return doc if doc["state"] != "active" or len(seen) >= 3 else None

    return wait_for(renewed_twice_or_lapsed, 120, f"{resource} renewed twice (or lapsed)")


def test_releasing_one_member_of_a_kept_bundle_keeps_the_others(repo: Path) -> None:
    """Releasing one member stopped the bundle's keepalive: the others expired with the
    agent alive."""
    got = run_cli("bundle", "acquire", "kb/a", "kb/b", "--ttl", TTL, "--keepalive", cwd=repo)
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
    """`heartbeat --ttl 15s` on a claim kept at 60 s: the keepalive kept renewing every 20 s,
    and the claim lapsed after 15."""
    got = run_cli("acquire", "kc/1", "--ttl", "60s", "--keepalive", cwd=repo)
    assert got.code == 0, got
    beat = run_cli("heartbeat", "kc/1", "--ttl", TTL, "--json", cwd=repo)
    assert beat.code == 0, beat
    doc = _renewed_twice_or_lapsed("kc/1", repo, beat.json["renewed_at"])
    assert doc["state"] == "active", f"the kept claim lapsed: {doc}"
    assert run_cli("release", "kc/1", cwd=repo).code == 0
