"""Many real processes racing for one resource: exactly one winner, every loser HELD (exit 3)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from racing import RACERS, race

ROUNDS = 20


def _holders(repo: Path, resource: str) -> list[dict]:
    from gitlease.api.history import log
    from gitlease.store.location import open_store

    return [c.to_dict() for c in log(open_store(cwd=repo), resource)]


@pytest.mark.slow
def test_race_on_fresh_resources_has_exactly_one_winner(repo: Path) -> None:
    resources = [f"race/fresh/{i}" for i in range(ROUNDS)]
    codes = race([(repo, {})], resources)
    for resource in resources:
        assert sorted(codes[resource]) == [0] + [3] * (RACERS - 1), (resource, codes[resource])
        history = _holders(repo, resource)
        assert [h["revision"] for h in history] == [1]


@pytest.mark.slow
def test_race_on_expired_resources_has_exactly_one_winner(repo: Path, monkeypatch) -> None:
    from gitlease.api.lease import acquire
    from gitlease.store.location import open_store

    monkeypatch.chdir(repo)
    store = open_store()
    resources = [f"race/expired/{i}" for i in range(ROUNDS)]
    for resource in resources:
        acquire(store, resource, ttl="1s", bind=False)
    time.sleep(1.2)
    codes = race([(repo, {})], resources)
    for resource in resources:
        assert sorted(codes[resource]) == [0] + [3] * (RACERS - 1), (resource, codes[resource])
        history = _holders(repo, resource)
        assert [h["revision"] for h in history] == [1, 2]
        assert history[0]["claim_id"] != history[1]["claim_id"]
