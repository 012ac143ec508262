"""`acquire --first-free`: exactly one claim, the first candidate that can be taken, in order.

Races run real processes through the CLI's entry point (as in ``test_races.py``); the rest
run the installed CLI in a subprocess, as an agent would.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import history
import pytest
from conftest import store_git, store_path, wait_renewed

CTX = multiprocessing.get_context("fork")


def refs(repo: Path) -> str:
    return store_git("for-each-ref", "--format=%(refname)", "refs/worklease/", cwd=repo).stdout


def receipt_of(resource: str) -> str:
    """Where ``hold`` keeps a holder's receipt (beside the repository)."""
    return f"../{resource.replace('/', '_')}.receipt.json"


def hold(cli, resource: str, *, ttl: str = "10m", owner: str = "holder") -> dict:
    got = cli("acquire", resource, "--ttl", ttl, "--owner", owner, "--no-bind", "--json",
              "--receipt", receipt_of(resource))  # fmt: skip
    assert got.code == 0, got
    return got.json


def write_blob(repo: Path, ref: str, data: str) -> None:
    """Point ``ref`` in the store at a blob of ``data``, behind gitlease's back."""
    oid = subprocess.run(["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
                         cwd=repo, input=data, text=True, capture_output=True,
                         check=True).stdout.strip()  # fmt: skip
    store_git("update-ref", ref, oid, cwd=repo)


# ------------------------------------------------------------------ order and states


def test_takes_the_first_that_can_be_taken_in_the_order_given(cli, repo: Path) -> None:
    hold(cli, "u/1")
    hold(cli, "u/3")
    got = cli("acquire", "--first-free", "u/1", "u/3", "u/2", "u/4", "--json")
    assert got.code == 0, got
    doc = got.json
    assert doc["resource"] == "u/2" and doc["state"] == "active" and doc["skipped"] == []
    assert Path(doc["receipt"]).is_file() and doc["bound"] is True
    assert cli("show", "u/4", "--json").json["state"] == "free", "exactly one claim"
    again = cli("acquire", "--first-free", "u/4", "u/2", "--json").json
    assert again["resource"] == "u/4", "order is the caller's, not the store's"


def test_each_state_behaves_as_acquire_does(cli, repo: Path) -> None:
    """held, expired, released and never-claimed: the same exit code, revision and state as a
    plain acquire of a twin resource in the same state."""
    for twin in ("plain", "first"):
        hold(cli, f"{twin}/held")
        hold(cli, f"{twin}/expired", ttl="1s")
        hold(cli, f"{twin}/released")
        released = f"{twin}/released"
        assert cli("release", released, "--receipt", receipt_of(released)).code == 0
    time.sleep(1.2)
    for state in ("held", "expired", "released", "never"):
        plain = cli("acquire", f"plain/{state}", "--ttl", "1m", "--json")
        first = cli("acquire", "--first-free", f"first/{state}", "--ttl", "1m", "--json")
        assert plain.code == first.code, (state, plain, first)
        if plain.code == 0:
            p, f = plain.json, first.json
            assert (p["state"], p["revision"]) == (f["state"], f["revision"]), state
        else:
            assert plain.code == 3
            assert first.json["error"]["claims"][0]["state"] == "active"
    got = cli("acquire", "--first-free", "first/held", "first/expired", "--json").json
    assert got["error"]["code"] == "HELD", "the expired one was taken above"


def test_held_names_every_candidate_in_order(cli, repo: Path) -> None:
    hold(cli, "h/2", owner="agent-b")
    hold(cli, "h/1", owner="agent-a")
    got = cli("acquire", "--first-free", "h/2", "h/1", "--json")
    assert got.code == 3
    error = got.json["error"]
    assert error["code"] == "HELD" and error["claim"] is None
    assert [(c["resource"], c["owner"], c["state"]) for c in error["claims"]] == [
        ("h/2", "agent-b", "active"),
        ("h/1", "agent-a", "active"),
    ]
    assert "h/2 held by agent-b" in error["message"] and "h/1 held by agent-a" in error["message"]
    text = cli("acquire", "--first-free", "h/2", "h/1")
    assert text.code == 3 and "HELD" in text.err and "agent-b" in text.err


# ------------------------------------------------------------------ input


def test_candidates_on_stdin(cli, repo: Path) -> None:
    hold(cli, "s/1")
    got = cli("acquire", "--first-free", "-", "--json", input="s/1\n\n  \ns/2\ns/3\n")
    assert got.code == 0 and got.json["resource"] == "s/2", got
    empty = cli("acquire", "--first-free", "-", "--json", input="\n")
    assert empty.code == 2 and "candidate" in empty.json["error"]["message"]


def test_provider_references_with_key(cli, repo: Path) -> None:
    hold(cli, "github/acme/api/42")
    listing = (
        "https://github.com/Acme/API/issues/42\nacme/api#043\nhttps://github.com/acme/api/pull/44\n"
    )
    got = cli("acquire", "--first-free", "-", "--key", "github", "--json", input=listing)
    assert got.code == 0 and got.json["resource"] == "github/acme/api/43", got
    bad = cli("acquire", "--first-free", "acme/api#45", "not a reference", "--key", "github",
              "--json")  # fmt: skip
    assert bad.code == 2 and "candidate 2" in bad.json["error"]["message"]
    assert "github/acme/api/45" not in refs(repo), "nothing acquired"


@pytest.mark.parametrize("bad", ["", "tab\there", "x" * 513, "\x7f"])
def test_a_bad_candidate_is_refused_before_anything_is_taken(cli, repo: Path, bad: str) -> None:
    got = cli("acquire", "--first-free", "ok/1", bad, "ok/2", "--json")
    assert got.code == 2, got
    assert got.json["error"]["code"] == "USAGE" and "candidate 2" in got.json["error"]["message"]
    assert refs(repo) == ""


def test_plain_acquire_keeps_its_shape(cli, repo: Path) -> None:
    assert cli("acquire", "a/1", "a/2").code == 2, "one RESOURCE without --first-free"
    assert cli("acquire").code == 2
    assert refs(repo) == ""
    assert cli("acquire", "a/1", "--json").json["resource"] == "a/1"


# ------------------------------------------------------------------ invalid records


def test_an_invalid_record_is_skipped_and_reported(cli, repo: Path) -> None:
    write_blob(repo, "refs/worklease/bad/1.lease", "not a claim record\n")
    hold(cli, "bad/2")
    got = cli("acquire", "--first-free", "bad/1", "bad/2", "bad/3", "--json")
    assert got.code == 0 and got.json["resource"] == "bad/3", got
    [skipped] = got.json["skipped"]
    assert skipped["resource"] == "bad/1" and skipped["state"] == "invalid" and skipped["problem"]
    assert "skipped bad/1" in got.err and "invalid" in got.err and "verify" in got.err
    after = store_git("cat-file", "blob", "refs/worklease/bad/1.lease", cwd=repo).stdout
    assert after == "not a claim record\n", "never granted over"


def test_a_tampered_record_that_looks_held_is_reported_invalid_when_nothing_is_free(
    cli, repo: Path
) -> None:
    doc = hold(cli, "t/1")
    raw = store_git("cat-file", "blob", doc["oid"], cwd=repo).stdout
    write_blob(repo, doc["ref"], raw.replace('owner "holder"', 'owner "mallory"'))
    hold(cli, "t/2")
    got = cli("acquire", "--first-free", "t/1", "t/2", "--json")
    assert got.code == 3, got
    states = [(c["resource"], c["state"]) for c in got.json["error"]["claims"]]
    assert states == [("t/1", "invalid"), ("t/2", "active")]
    assert "t/1 has an invalid record" in got.json["error"]["message"]


# ------------------------------------------------------------------ waiting


def test_wait_takes_whichever_candidate_frees_first(cli, repo: Path) -> None:
    hold(cli, "w/1")
    hold(cli, "w/2")
    waiter = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "acquire", "--first-free", "w/1", "w/2",
         "--wait", "30s", "--json"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for_waiters(repo, 1)
        assert cli("release", "w/2", "--receipt", receipt_of("w/2")).code == 0
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    doc = json.loads(out)
    assert (doc["resource"], doc["revision"]) == ("w/2", 2)


def test_wait_shows_a_live_status_line_on_a_terminal(cli, repo: Path) -> None:
    from terminal import tty_run_while_waiting

    hold(cli, "l/1", ttl="5m", owner="agent-b")  # held while it waits, then lapses
    hold(cli, "l/2", ttl="1h")
    out = tty_run_while_waiting(["acquire", "--first-free", "l/1", "l/2", "--wait", "60s"],
                                repo, {"l/1": receipt_of("l/1")})  # fmt: skip
    assert "waiting for any of 2 candidates" in out and "agent-b" in out
    assert "acquired l/1" in out


def _wait_for_waiters(repo: Path, count: int) -> None:
    from waitline import waiters_dir

    directory = waiters_dir(repo)
    for _ in range(600):
        if directory.is_dir() and len([n for n in os.listdir(directory) if n[0] != "."]) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} waiter(s) never joined the queue")


# ------------------------------------------------------------------ races


def _racer(cwd: str, me: int, candidates: list[str], rounds: int, barrier, results) -> None:
    """Imports done, then each round: wait at the barrier, take the first free candidate,
    wait for everyone, release it, report both exit codes."""
    os.chdir(cwd)
    import pygit2  # noqa: F401

    from gitlease.cli import claims  # noqa: F401  (registers the commands: imports done here)
    from gitlease.cli.app import main

    receipt = f"{cwd}/../receipts/r{me}.json"
    quiet = io.StringIO()
    for round_ in range(rounds):
        barrier.wait(timeout=120)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(quiet):
            code = main(["acquire", "--first-free", *candidates, "--ttl", "1m", "--owner",
                         f"racer-{me}", "--receipt", receipt, "--no-bind", "--json"])  # fmt: skip
        resource = json.loads(out.getvalue()).get("resource")
        barrier.wait(timeout=120)
        released = 0
        if code == 0:  # LOST here would mean that someone else was granted our claim
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                released = main(["release", "--receipt", receipt])
        results.put((round_, me, code, resource, released))


def _race(repo: Path, candidates: list[str], racers: int, rounds: int) -> dict[int, list]:
    (repo.parent / "receipts").mkdir(mode=0o700)
    barrier = CTX.Barrier(racers)
    results = CTX.Queue()
    procs = [
        CTX.Process(target=_racer, args=(str(repo), i, candidates, rounds, barrier, results))
        for i in range(racers)
    ]
    for p in procs:
        p.start()
    by_round: dict[int, list] = {r: [] for r in range(rounds)}
    try:
        for _ in range(racers * rounds):
            round_, me, code, resource, released = results.get(timeout=180)
            by_round[round_].append((me, code, resource))
            assert released == 0, f"round {round_}: racer {me} could not release {resource}"
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.exitcode is None:
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    return by_round


def _check_history(repo: Path, candidates: list[str]) -> int:
    """Per candidate, no two holders at once; per racer, never two claims at once."""
    from gitlease.api.history import log
    from gitlease.store.location import open_store

    store = open_store(cwd=repo)
    by_owner: dict[str, list[tuple[int, int, str]]] = {}
    grants = 0
    for resource in candidates:
        chain = log(store, resource)
        history.assert_no_two_holders(chain)
        owners = {c.record.claim_id: c.record.owner for c in chain if c.record}
        for claim_id, _rev, start, end in history.claim_intervals(chain):
            by_owner.setdefault(owners[claim_id], []).append((start, end, resource))
            grants += 1
    for owner, spans in by_owner.items():
        spans.sort()
        for (_s, end_a, res_a), (start_b, _e, res_b) in itertools.pairwise(spans):
            assert start_b >= end_a, f"{owner} held {res_a} and {res_b} at once"
    return grants


@pytest.mark.slow
def test_eight_racers_over_eight_candidates_all_get_different_units(repo: Path) -> None:
    candidates = [f"unit/{i}" for i in range(8)]
    rounds = 30
    by_round = _race(repo, candidates, racers=8, rounds=rounds)
    for round_, outcomes in by_round.items():
        assert sorted(code for _, code, _ in outcomes) == [0] * 8, (round_, outcomes)
        assert sorted(r for _, _, r in outcomes) == candidates, (round_, outcomes)
    assert _check_history(repo, candidates) == 8 * rounds


@pytest.mark.slow
def test_eight_racers_over_three_candidates_three_win_five_held(repo: Path) -> None:
    candidates = ["few/a", "few/b", "few/c"]
    rounds = 30
    by_round = _race(repo, candidates, racers=8, rounds=rounds)
    for round_, outcomes in by_round.items():
        assert sorted(code for _, code, _ in outcomes) == [0] * 3 + [3] * 5, (round_, outcomes)
        won = sorted(r for _, code, r in outcomes if code == 0)
        assert won == candidates, (round_, outcomes)
    assert _check_history(repo, candidates) == 3 * rounds


def test_through_a_remote_a_stale_mirror_moves_on_to_the_next(tmp_path: Path) -> None:
    """Host B's mirror still shows u/1 free when A takes it: B's push is refused, and B
    moves on, from a fresh fetch, to u/2."""
    from conftest import run_cli
    from hosts import HOST_B_ENV, make_host, make_server

    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    assert run_cli("free", "u/1", "u/2", cwd=b, env=HOST_B_ENV).out.split() == ["u/1", "u/2"]
    assert run_cli("acquire", "u/1", cwd=a).code == 0
    got = run_cli("acquire", "--first-free", "u/1", "u/2", "--json", cwd=b, env=HOST_B_ENV)
    assert got.code == 0 and got.json["resource"] == "u/2", got
    held = run_cli("acquire", "--first-free", "u/1", "u/2", "--json", cwd=a)
    assert held.code == 3
    assert [c["state"] for c in held.json["error"]["claims"]] == ["active", "active"]


def test_keepalive_keeps_the_candidate_taken(cli, repo: Path) -> None:
    hold(cli, "k/1")
    got = cli("acquire", "--first-free", "k/1", "k/2", "--ttl", "12s", "--keepalive", "--json")
    assert got.code == 0 and got.json["resource"] == "k/2", got
    pid = got.json["keepalive"]["pid"]
    shown = wait_renewed(cli, "k/2", got.json)  # by nobody but the keepalive
    assert shown["state"] == "active" and shown["keepalive"]["pid"] == pid, "renewed past its TTL"
    assert cli("release", "k/2").code == 0
