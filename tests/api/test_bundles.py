"""Bundles: every resource or none, under real process races and kill -9."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import store_git, wait_for
from forged import put
from history import assert_no_two_holders

CTX = multiprocessing.get_context("fork")


def test_all_or_nothing(cli) -> None:
    assert cli("acquire", "r/2").code == 0
    got = cli("bundle", "acquire", "r/1", "r/2", "r/3", "--json")
    assert got.code == 3 and got.json["error"]["claim"]["resource"] == "r/2"
    listed = {c["resource"] for c in cli("list", "--json").json["claims"]}
    assert listed == {"r/2"}, "no other member was claimed"
    assert cli("bundle", "acquire", "r/1", "r/1").code == 2


def test_bundle_lifecycle_touches_every_member(cli, repo: Path) -> None:
    got = cli("bundle", "acquire", "m/1", "m/2", "m/3", "--ttl", "1m", "--json")
    assert got.code == 0
    bid = got.json["bundle_id"]
    assert {c["bundle_id"] for c in got.json["claims"]} == {bid}
    contender = cli("acquire", "m/2", "--json")
    assert contender.code == 3 and bid in contender.json["error"]["message"]

    oids = [c["oid"] for c in got.json["claims"]]
    beat = cli("bundle", "heartbeat", bid, "--ttl", "2m", "--json").json["claims"]
    assert all(c["expires_in"] > 100 for c in beat)
    assert all(c["oid"] != o for c, o in zip(beat, oids, strict=True))
    assert cli("bundle", "check", bid).code == 0
    shown = cli("bundle", "show", bid, "--json").json
    assert [c["resource"] for c in shown["claims"]] == ["m/1", "m/2", "m/3"]
    rel = cli("bundle", "release", bid, "--checkpoint", "done", "--json").json["claims"]
    assert {(c["state"], c["checkpoint"]) for c in rel} == {("released", "done")}


def test_tampered_member_fails_the_whole_heartbeat(cli, repo: Path) -> None:
    got = cli("bundle", "acquire", "t/1", "t/2", "--json").json
    member = got["claims"][1]
    raw = store_git("cat-file", "blob", member["oid"], cwd=repo).stdout.replace(
        '"test-agent"', '"eve"'
    )
    put(repo, member["ref"], raw.encode())
    beat = cli("bundle", "heartbeat", got["bundle_id"], "--json")
    assert beat.code == 4 and "t/2" in beat.json["error"]["message"]
    first = cli("show", "t/1", "--json").json
    assert first["oid"] == got["claims"][0]["oid"], "no member was renewed"
    assert cli("show", "t/2").code == 7  # a contender sees STORE


def _ring_member(repo: str, k: int, n: int, barrier, results) -> None:
    os.chdir(repo)
    from gitlease.api import bundle
    from gitlease.errors import GitleaseError
    from gitlease.store.location import open_store

    store = open_store()
    store.repo  # noqa: B018
    barrier.wait()
    try:
        bundle.acquire_many(store, [f"ring/{k}", f"ring/{(k + 1) % n}"], ttl="1m", bind=False)
        results.put((k, 0))
    except GitleaseError as exc:
        results.put((k, exc.exit_code))


@pytest.mark.slow
def test_ring_of_bundles(repo: Path) -> None:
    from gitlease.api.reads import list_claims
    from gitlease.store.location import open_store

    n = 8
    for round_ in range(3):
        barrier = CTX.Barrier(n)
        results = CTX.Queue()
        procs = [
            CTX.Process(target=_ring_member, args=(str(repo), k, n, barrier, results))
            for k in range(n)
        ]
        for p in procs:
            p.start()
        outcome = dict(results.get(timeout=60) for _ in range(n))
        for p in procs:
            p.join()
        winners = [k for k, code in outcome.items() if code == 0]
        assert set(outcome.values()) <= {0, 3}
        assert winners
        held = {}
        for claim in list_claims(open_store(cwd=repo), state="active"):
            held[claim.resource] = claim.record.bundle_id
        expected = {f"ring/{k}" for w in winners for k in (w, (w + 1) % n)}
        assert set(held) == expected, "the store agrees with the winners"
        assert len(expected) == 2 * len(winners), "no resource held twice"
        for resource in held:  # free the ring for the next round
            ref = "refs/worklease/" + resource + ".lease"
            store_git("update-ref", "-d", ref, cwd=repo)
        del round_


#: Bundle acquirers killed with SIGKILL, each in the middle of its work.
KILLS = 12


@pytest.mark.slow
def test_kill_minus_nine_during_bundle_acquires(repo: Path, monkeypatch) -> None:
    from gitlease.api import bundle
    from gitlease.api.history import log
    from gitlease.store.location import open_store

    script = (
        "import random, sys\n"
        "from pathlib import Path\n"
        "from gitlease.api import bundle\n"
        "from gitlease.errors import GitleaseError\n"
        "from gitlease.store.location import open_store\n"
        "s = open_store()\n"
        "tries = Path(sys.argv[1])\n"
        "while True:\n"
        "    k = random.randrange(4)\n"
        "    try:\n"
        "        r = bundle.acquire_many(s, [f'kb/{k}', f'kb/{(k + 1) % 4}'], ttl='1s',\n"
        "                                bind=False)\n"
        "        if random.random() < 0.5: bundle.release(s, receipt=r.receipt.path)\n"
        "    except GitleaseError: pass\n"
        "    tries.touch()\n"
    )
    rng = random.Random(3)
    tries = [repo.parent / f"tries-{i}" for i in range(3)]

    def start(i: int) -> subprocess.Popen[bytes]:
        tries[i].unlink(missing_ok=True)
        return subprocess.Popen([sys.executable, "-c", script, str(tries[i])], cwd=repo)

    procs = [start(i) for i in range(3)]
    # a count of kills, each landing at a random instant of a victim's work (it made a try
    # since it started), not a number of seconds: a loaded machine only takes longer
    for _ in range(KILLS):
        i = rng.randrange(len(procs))
        wait_for(tries[i].exists, what="the victim to work")
        time.sleep(rng.uniform(0.0, 0.1))
        procs[i].send_signal(signal.SIGKILL)
        procs[i].wait()
        procs[i] = start(i)
    for p in procs:
        p.send_signal(signal.SIGKILL)
        p.wait()
    monkeypatch.chdir(repo)
    store = open_store()
    # every member claimable within TTL + 5 s: the wait is the bound (HELD after it)
    bundle.acquire_many(store, [f"kb/{k}" for k in range(4)], ttl="30s", wait="6s", bind=False)
    for k in range(4):
        assert_no_two_holders(log(store, f"kb/{k}"))


def test_releasing_one_member_keeps_the_bundle_usable(cli) -> None:
    got = cli("bundle", "acquire", "s/1", "s/2", "--json").json
    assert all(c["bound"] for c in got["claims"])
    assert cli("release", "s/2").code == 0
    assert cli("heartbeat", "s/1").code == 0, "the other member is still yours"
    beat = cli("bundle", "heartbeat", got["bundle_id"], "--json")
    assert beat.code == 4 and "s/2" in beat.json["error"]["message"]
    assert cli("release", "s/1").code == 0
    assert cli("bundle", "release", got["bundle_id"]).code == 0, "idempotent once all are released"
