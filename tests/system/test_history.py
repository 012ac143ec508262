"""The history harness, bounded for CI: clients, a nemesis, and the four checked properties."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import harness
import pytest
from conftest import BREAK_CAS, ROOT, store_git

#: Bounds a run that never gets what it waits for (a hang): the events end every run.
LIMIT = 240


@pytest.mark.slow
def test_history_under_kills_pauses_and_gc(repo: Path, tmp_path: Path) -> None:
    """Until the nemesis has killed, stalled and collected enough and the clients have done
    enough (not for a time: a loaded machine only takes longer)."""
    log = tmp_path / "log"
    until = harness.enough(log, kills=12, pauses=6, gcs=6, ok=100)
    stats = harness.run(repo, log, seconds=LIMIT, clients=8, resources=4, ttl=1.0, until=until)
    print(stats.summary())
    assert stats.kills > 10 and stats.pauses > 5 and stats.gcs > 5
    assert stats.ok > 100, "the clients made progress"
    for op in harness.OPERATIONS:
        assert stats.by_op[op] > 0, op
    for prop in harness.PROPERTIES:
        assert stats.violations[prop] == [], (prop, stats.violations[prop][:5])


@pytest.mark.slow
def test_the_checker_catches_a_broken_build(repo: Path, tmp_path: Path) -> None:
    """With compare-and-swap broken on purpose, the same harness must report violations
    (the run ends once the checker, asked as it goes, finds the first)."""
    log = tmp_path / "log"
    stats = harness.run(repo, log, seconds=LIMIT, clients=8, resources=2, ttl=1.0,
                        env=BREAK_CAS, until=harness.caught(repo, log, 2))  # fmt: skip
    print(stats.summary())
    caught = sum(len(stats.violations[p]) for p in harness.PROPERTIES)
    assert caught > 0, stats.summary()


def test_the_control_sink_loses_an_update_that_fencing_prevents(repo: Path, tmp_path: Path) -> None:
    """Deterministic: a writer paused past its TTL after `check` writes over its successor."""
    from gitlease.api import guarded, lease
    from gitlease.errors import LostError
    from gitlease.store.location import open_store

    store = open_store(cwd=repo)
    stale_receipt = tmp_path / "stale.json"
    old = lease.acquire(store, "res/0", ttl="1s", receipt=stale_receipt, bind=False)
    lease.check(store, "res/0", receipt=stale_receipt)  # "held" - then the writer stalls
    time.sleep(1.2)
    new = lease.acquire(store, "res/0", ttl="1m", receipt=tmp_path / "new.json", bind=False)
    control = tmp_path / "log" / "control-0.txt"
    control.parent.mkdir()
    control.write_text(f"{new.claim.record.claim_id} {new.claim.record.revision} 0\n")
    with open(control, "a") as f:  # the stalled writer's unfenced write lands
        f.write(f"{old.claim.record.claim_id} {old.claim.record.revision} 0\n")
    fenced = tmp_path / "log" / "fenced-0.txt"
    with pytest.raises(LostError):  # the same write through replace-file is refused
        guarded.replace_file(
            store, fenced, b"x", expect_absent=True, receipt=stale_receipt, resource="res/0"
        )
    stats = harness.check(repo, tmp_path / "log", ["res/0"], harness.Stats())
    assert len(stats.violations["control-sink (expected)"]) == 1
    assert stats.violations["fenced-sink"] == [] and not fenced.exists()


def test_soak_script_prints_its_figures(repo: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "soak"), "--seconds", "6", "--repo", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for word in (
        "operations",
        "kills",
        "pauses",
        "violations no-two-holders: 0",
        "violations fenced-sink: 0",
    ):
        assert word in out.stdout
    assert store_git("for-each-ref", "refs/worklease/", cwd=repo).stdout
