"""A git remote as the coordinator: two hosts, one bare repository (docs/remote.md).

Every test runs the real CLI on two clones ("hosts") against a bare repository
reached over ``file://`` and through a real ``git daemon`` on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import harness
import pytest
from conftest import (
    BREAK_CAS,
    NEEDS_SHIM,
    TESTING,
    clock_ahead,
    git,
    run_cli,
    wall_clock_moved,
)
from cutpush import drop_next_push
from hosts import BOOT_OFFSETS, HOST_B_ENV, git_daemon, make_host, make_server
from racing import race


@pytest.fixture(params=["file", "daemon"])
def hosts(request: pytest.FixtureRequest, tmp_path: Path):
    server = make_server(tmp_path)
    with contextlib.ExitStack() as stack:
        if request.param == "daemon":
            url = stack.enter_context(git_daemon(tmp_path)) + "/server.git"
        else:
            url = server.as_uri()
        a = make_host(url, tmp_path / "host-a")
        b = make_host(url, tmp_path / "host-b")

        def on_a(*args: str, **kw):
            return run_cli(*args, cwd=kw.pop("cwd", a), **kw)

        def on_b(*args: str, env: dict[str, str] | None = None, **kw):
            return run_cli(*args, cwd=kw.pop("cwd", b), env={**HOST_B_ENV, **(env or {})}, **kw)

        yield SimpleNamespace(a=a, b=b, server=server, url=url, on_a=on_a, on_b=on_b)


def remote_refs(server: Path) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/worklease/", cwd=server)
    return dict(line.split(" ") for line in out.stdout.splitlines())


def test_lifecycle_across_hosts(hosts) -> None:
    got = hosts.on_a("acquire", "github/acme/api/42", "--ttl", "1m", "--json")
    assert got.code == 0, got
    claim = got.json
    assert remote_refs(hosts.server) == {claim["ref"]: claim["oid"]}  # the remote holds it

    held = hosts.on_b("acquire", "github/acme/api/42", "--json")
    assert held.code == 3, held
    assert held.json["error"]["claim"]["claim_id"] == claim["claim_id"]
    shown = hosts.on_b("show", "github/acme/api/42", "--json").json
    assert shown["state"] == "active" and shown["owner"] == claim["owner"]

    assert hosts.on_a("heartbeat", "github/acme/api/42").code == 0
    assert hosts.on_a("check", "github/acme/api/42", "--min-remaining", "30s").code == 0
    done = hosts.on_a("release", "github/acme/api/42", "--checkpoint", "PR #7", "--json")
    assert done.code == 0 and done.json["state"] == "released", done

    taken = hosts.on_b("acquire", "github/acme/api/42", "--json")
    assert taken.code == 0, taken
    assert taken.json["revision"] == 2
    assert hosts.on_a("check", "github/acme/api/42").code == 4  # A knows it holds nothing
    history = hosts.on_b("log", "github/acme/api/42", "--json").json["records"]
    assert [r["revision"] for r in history][-2:] == [1, 2]
    assert history[-2]["checkpoint"] == "PR #7"
    # each host's mirror is readable with plain git, as the store is
    listing = git("for-each-ref", "--format=%(refname) %(objecttype)", cwd=hosts.a).stdout
    assert "refs/worklease/github/acme/api/42.lease blob" in listing


def test_where_names_the_remote_and_how_it_was_chosen(hosts) -> None:
    doc = hosts.on_a("where", "--json").json
    assert doc["remote"] == "origin" and "gitlease.remote" in doc["remote_reason"]
    doc = hosts.on_a("where", "--remote", "", "--json").json
    assert doc["remote"] is None
    doc = hosts.on_a("where", "--json", env={"GITLEASE_REMOTE": hosts.url}).json
    assert doc["remote"] == hosts.url and doc["remote_reason"] == "chosen by GITLEASE_REMOTE"


def test_an_unreachable_remote_is_a_store_error_and_changes_nothing(hosts) -> None:
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        closed = f"git://127.0.0.1:{s.getsockname()[1]}/server.git"
    for gone in (closed, (hosts.server.parent / "nowhere.git").as_uri()):
        out = hosts.on_a("acquire", "x", "--remote", gone, "--json")
        assert out.code == 7, out
        assert f"cannot reach the remote {gone}" in out.json["error"]["message"]
        out = hosts.on_a("show", "x", "--remote", gone, "--json")
        assert out.code == 7 and "cannot fetch claims" in out.json["error"]["message"], out
    assert remote_refs(hosts.server) == {}
    assert not list((hosts.a / ".git" / "worklease" / "receipts").glob("*/*.json"))


def test_takeover_waits_a_whole_ttl_seen_from_the_taking_host(hosts) -> None:
    """Host B never trusts host A's clocks: A's dead claim is B's only after B saw it for a TTL.
    Time passes by moving the deciding host's boot clock (``clock_ahead``), not by sleeping."""
    ttl = 60  # (a loaded machine's slow commands take seconds: a small part of it)
    assert hosts.on_a("acquire", "r/dead", "--ttl", f"{ttl}s").code == 0
    then = ttl + 1
    shown = hosts.on_a("show", "r/dead", "--json", env=clock_ahead(then)).json
    assert shown["state"] == "expired"  # expired on A's clock a TTL later ...
    b_then = clock_ahead(then, HOST_B_ENV)
    first = hosts.on_b("acquire", "r/dead", "--json", env=b_then)  # ... but B sees it first then
    assert first.code == 3, first
    left = first.json["error"]["claim"]["expires_in"]
    assert ttl / 2 < left <= ttl * 1.01 + 0.02, left  # a TTL (+1%) from B's first sighting
    assert hosts.on_b("acquire", "r/dead", env=clock_ahead(then + ttl / 2, HOST_B_ENV)).code == 3
    b_later = clock_ahead(then + ttl * 1.01 + 1, HOST_B_ENV)
    assert hosts.on_b("acquire", "r/dead", env=b_later).code == 0
    # and the other way round: B's claim, seen by A from the start, is A's after one TTL
    assert hosts.on_b("release", "r/dead", env=b_later).code == 0
    assert hosts.on_b("acquire", "r/dead", "--ttl", f"{ttl}s", env=b_later).code == 0
    assert hosts.on_a("acquire", "r/dead").code == 3  # A's first sighting
    assert hosts.on_a("acquire", "r/dead", env=clock_ahead(ttl / 2)).code == 3
    assert hosts.on_a("acquire", "r/dead", env=clock_ahead(ttl * 1.01 + 1)).code == 0


def test_a_heartbeating_holder_is_never_taken_over(hosts) -> None:
    """A renews between any two of B's looks, and B's looks span more than a TTL of B's clock
    (moved on between them, ``clock_ahead``): B never takes it. A look a whole TTL after the
    last renewal does (the control: the looks alone would have taken it)."""
    ttl = 600  # A's claim, in real time: it never lapses between its renewals, however slow
    assert hosts.on_a("acquire", "r/live", "--ttl", f"{ttl}s").code == 0
    step = ttl / 3  # of B's clock from one look to the next: four looks span a TTL
    for look in range(5):
        assert hosts.on_b("acquire", "r/live", env=clock_ahead(look * step, HOST_B_ENV)).code == 3
        assert hosts.on_a("heartbeat", "r/live").code == 0
    assert hosts.on_a("check", "r/live").code == 0
    last = 5 * step  # B's first sighting of the last renewal, then a whole TTL later
    assert hosts.on_b("acquire", "r/live", env=clock_ahead(last, HOST_B_ENV)).code == 3
    taken = hosts.on_b("acquire", "r/live", env=clock_ahead(last + ttl * 1.01 + 1, HOST_B_ENV))
    assert taken.code == 0, taken
    assert hosts.on_a("check", "r/live").code == 4


@NEEDS_SHIM
def test_wall_clocks_an_hour_apart_change_nothing(hosts) -> None:
    """Host B's wall clock an hour ahead: its records say so, and no decision changes."""
    ahead = wall_clock_moved(3600)
    got = hosts.on_b("acquire", "r/skew", "--ttl", "30s", "--json", env=ahead)
    assert got.code == 0, got
    from gitlease.model.clock import parse_rfc3339

    assert parse_rfc3339(got.json["expires_at"]) - time.time() * 1000 > 3_000_000  # in effect
    held = hosts.on_a("acquire", "r/skew", "--json")
    assert held.code == 3 and 20 < held.json["error"]["claim"]["expires_in"] <= 30.3, held
    assert hosts.on_b("heartbeat", "r/skew", env=ahead).code == 0
    assert hosts.on_a("acquire", "r/skew").code == 3


def test_bundles_across_hosts_are_all_or_nothing(hosts) -> None:
    got = hosts.on_a("bundle", "acquire", "b/1", "b/2", "--ttl", "1m", "--json")
    assert got.code == 0, got
    bundle_id = got.json["bundle_id"]
    clash = hosts.on_b("bundle", "acquire", "b/2", "b/3", "--json")
    assert clash.code == 3, clash
    assert "b/3" not in {r.split("/worklease/")[1] for r in remote_refs(hosts.server)}
    assert hosts.on_b("bundle", "acquire", "b/3", "b/4").code == 0
    assert hosts.on_a("bundle", "heartbeat", bundle_id).code == 0
    assert hosts.on_a("bundle", "release", bundle_id).code == 0
    again = hosts.on_b("bundle", "acquire", "b/1", "b/2", "--json")
    assert again.code == 0, again
    assert {c["revision"] for c in again.json["claims"]} == {2}


def test_commit_hooks_and_exec_work_with_a_remote_store(hosts) -> None:
    from conftest import wait_for

    assert hosts.on_a("hooks", "install").code == 0
    assert hosts.on_a("acquire", "r/hook", "--ttl", "5m").code == 0  # live while A commits
    (hosts.a / "work.txt").write_text("progress\n")
    git("add", "work.txt", cwd=hosts.a)
    assert git("commit", "-qm", "held", cwd=hosts.a, check=False).returncode == 0
    assert hosts.on_a("heartbeat", "r/hook", "--ttl", "1s").code == 0  # its last: it lapses
    wait_for(lambda: hosts.on_a("check", "r/hook").code == 4, what="the claim to expire")
    (hosts.a / "work.txt").write_text("more\n")
    refused = git("commit", "-qam", "expired", cwd=hosts.a, check=False)
    assert refused.returncode != 0 and "r/hook" in refused.stderr
    # exec from host B: its command's own gitlease calls reach the same coordinator
    script = "gitlease check r/exec && gitlease show r/exec --json"
    out = hosts.on_b("exec", "r/exec", "--ttl", "1m", "--", "sh", "-c", script, env=_path_env())
    assert out.code == 0, out
    assert hosts.on_a("show", "r/exec", "--json").json["state"] == "released"


def _path_env() -> dict[str, str]:
    import sys

    return {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def test_prune_is_refused_with_a_remote(hosts) -> None:
    out = hosts.on_a("prune", "--older-than", "0s", "--json")
    assert out.code == 2 and "remote" in out.json["error"]["message"]


# ------------------------------------------------------------------ races across hosts

RACERS = 12  # six on each host


def _race(hosts, resources: list[str]) -> dict[str, list[int]]:
    return race([(hosts.a, {}), (hosts.b, HOST_B_ENV)], resources, RACERS)


def _revisions_at_the_remote(server: Path, resource: str) -> list[int]:
    from gitlease.api.history import log
    from gitlease.store.location import open_store

    return [c.record.revision for c in log(open_store(server, remote=""), resource)]


@pytest.mark.slow
def test_race_of_twelve_processes_on_two_hosts_has_one_winner(hosts) -> None:
    resources = [f"race/fresh/{i}" for i in range(6)]
    codes = _race(hosts, resources)
    for resource in resources:
        assert sorted(codes[resource]) == [0] + [3] * (RACERS - 1), (resource, codes[resource])
        assert _revisions_at_the_remote(hosts.server, resource) == [1]


@pytest.mark.slow
def test_race_for_expired_claims_on_two_hosts_has_one_winner(hosts) -> None:
    resources = [f"race/expired/{i}" for i in range(4)]
    for resource in resources:
        assert hosts.on_a("acquire", resource, "--ttl", "1s", "--no-bind").code == 0
    assert hosts.on_b("list").code == 0  # B's first sighting of A's claims
    time.sleep(1.3)
    codes = _race(hosts, resources)
    for resource in resources:
        assert sorted(codes[resource]) == [0] + [3] * (RACERS - 1), (resource, codes[resource])
        assert _revisions_at_the_remote(hosts.server, resource) == [1, 2]


# ------------------------------------------------------------------ a push that is cut off


def _stall_while(host: Path, key: str, program: str, *, seconds: int) -> Path:
    """Make ``host``'s origin run ``program`` (over file://) only after ``seconds`` while the
    returned marker file exists: a slow or hung server, switched on by touching it."""
    marker = host.parent / f"stall-{key}"
    wrapper = host.parent / f"stalling-{key}"
    wrapper.write_text(f'#!/bin/sh\n[ -e "{marker}" ] && sleep {seconds}\nexec {program} "$@"\n')
    wrapper.chmod(0o755)
    git("config", f"remote.origin.{key}", str(wrapper), cwd=host)
    return marker


def _was_dropped(server: Path) -> bool:
    return (server / "push-dropped").exists()


def test_a_push_cut_off_after_it_landed_is_settled_as_success(tmp_path) -> None:
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    drop_next_push(server, "committed")
    got = run_cli("acquire", "r/cut", "--ttl", "1m", "--json", cwd=a)
    assert got.code == 0, got
    assert _was_dropped(server), "the push was not cut off"
    assert remote_refs(server)[got.json["ref"]] == got.json["oid"]
    assert run_cli("check", "r/cut", cwd=a).code == 0
    drop_next_push(server, "committed")
    assert run_cli("heartbeat", "r/cut", cwd=a).code == 0
    assert _was_dropped(server)
    assert run_cli("release", "r/cut", cwd=a).code == 0


def test_a_push_cut_off_before_it_landed_is_ambiguous_then_settles(tmp_path) -> None:
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    drop_next_push(server, "prepared")
    cut = run_cli("acquire", "r/cut", "--ttl", "1m", "--json", cwd=a)
    assert cut.code == 5, cut  # AMBIGUOUS: the outcome was unknown when it ended
    assert _was_dropped(server)
    assert "compare" in cut.json["error"]["message"].lower()
    assert remote_refs(server) == {}  # it did not land ...
    receipts = list((a / ".git" / "worklease" / "receipts").glob("*/*.json"))
    assert len(receipts) == 1  # ... and the receipt stays, to settle it with `show`
    assert run_cli("show", "r/cut", "--json", cwd=a).json["state"] == "free"
    retried = run_cli("acquire", "r/cut", "--ttl", "1m", "--json", cwd=a)
    assert retried.code == 0, retried
    assert run_cli("acquire", "r/cut", cwd=b, env=HOST_B_ENV).code == 3
    # a heartbeat cut off before landing: ambiguous, the claim still held as before
    drop_next_push(server, "prepared")
    assert run_cli("heartbeat", "r/cut", cwd=a).code == 5
    assert _was_dropped(server)
    assert run_cli("check", "r/cut", cwd=a).code == 0
    assert run_cli("heartbeat", "r/cut", cwd=a).code == 0


def test_a_record_tampered_at_the_remote_is_refused(hosts) -> None:
    assert hosts.on_a("acquire", "r/t", "--ttl", "1m").code == 0
    blob = json.dumps({"not": "a record"}) + "\n"
    oid = _write_blob(hosts.server, blob)
    git("update-ref", "refs/worklease/r/t.lease", oid, cwd=hosts.server)
    assert hosts.on_b("acquire", "r/t").code == 7
    assert hosts.on_a("heartbeat", "r/t").code == 4


def _write_blob(repo: Path, text: str) -> str:
    return subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo, input=text, text=True,
        capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip


# ------------------------------------------------------------------ chaos across hosts


#: Bounds a chaos run that never gets what it waits for (a hang): the events end every run.
CHAOS_LIMIT = 240


def _history_on_two_hosts(
    tmp_path: Path, until: Callable[[Path, Path], Callable[[harness.Stats], bool]], **options
) -> tuple[harness.Stats, Path]:
    """A chaos run across two hosts until ``until(server, log)`` says enough."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    server = make_server(tmp_path)
    with git_daemon(tmp_path) as base:
        a = make_host(f"{base}/server.git", tmp_path / "host-a")
        b = make_host(f"{base}/server.git", tmp_path / "host-b")
        stats = harness.run(
            server,
            tmp_path / "log",
            seconds=CHAOS_LIMIT,
            ttl=1.0,
            hosts=[(a, {}), (b, HOST_B_ENV)],
            boot_offsets=BOOT_OFFSETS,
            until=until(server, tmp_path / "log"),
            **options,
        )
    print(stats.summary())
    return stats, server


@pytest.mark.slow
def test_history_across_two_hosts_under_kills_pauses_and_gc(tmp_path: Path) -> None:
    from gitlease.api.history import log as records
    from gitlease.store.location import open_store

    def enough(server: Path, log: Path) -> Callable[[harness.Stats], bool]:
        counted = harness.enough(log, kills=12, pauses=6, gcs=6, ok=40)

        def passed_between_hosts() -> bool:  # every resource's history shows both boot ids
            from gitlease.errors import GitleaseError

            try:
                store = open_store(server, remote="")
                return all(
                    len({c.record.boot_id for c in records(store, f"res/{i}")}) == 2
                    for i in range(4)
                )
            except GitleaseError:  # (read while the clients write: ask again next time)
                return False

        return lambda stats: counted(stats) and passed_between_hosts()

    stats, server = _history_on_two_hosts(tmp_path, enough, clients=8, resources=4)
    assert stats.kills > 10 and stats.pauses > 5 and stats.gcs > 5
    assert stats.ok > 40, "the clients made progress"
    for resource in ("res/0", "res/1", "res/2", "res/3"):  # claims passed between the hosts
        history = records(open_store(server, remote=""), resource)
        boots = {c.record.boot_id for c in history}
        assert len(boots) == 2, (resource, boots)
        # every claim of the run has its TTL: one left by a client killed inside `exec`
        # must not hold the others off past the run (exec once took the default 15 minutes)
        assert {c.record.ttl_ms for c in history} == {1000}, resource
    for op in harness.OPERATIONS:
        assert stats.by_op[op] > 0, op
    for prop in harness.PROPERTIES:
        assert stats.violations[prop] == [], (prop, stats.violations[prop][:5])


@pytest.mark.slow
def test_the_checker_catches_a_broken_build_across_hosts(tmp_path: Path) -> None:
    """Through a remote, a broken build loses a race only when two clients decide at the
    same moment, which a short run may not bring about: all on one resource, the run goes
    on until the checker (asked as it goes) catches it."""

    def caught(server: Path, log: Path) -> Callable[[harness.Stats], bool]:
        return harness.caught(server, log, 1, BOOT_OFFSETS, remote=True)

    stats, _ = _history_on_two_hosts(tmp_path, caught, clients=8, resources=1, env=BREAK_CAS)
    assert sum(len(stats.violations[p]) for p in harness.PROPERTIES) > 0, stats.summary()


# ------------------------------------------------------------------ found in review


def test_a_remote_set_in_any_git_config_file_is_used(hosts, tmp_path: Path) -> None:
    """Not only the repository's config: an included file, GIT_CONFIG_GLOBAL, and so on."""
    git("config", "--unset", "gitlease.remote", cwd=hosts.b)
    team = tmp_path / "team.gitconfig"
    team.write_text("[gitlease]\n\tremote = origin\n")
    glob = tmp_path / "global.gitconfig"
    glob.write_text(f"[include]\n\tpath = {team}\n")
    assert hosts.on_a("acquire", "r/cfg", "--ttl", "10m").code == 0
    env = {"GIT_CONFIG_GLOBAL": str(glob)}
    assert hosts.on_b("where", "--json", env=env).json["remote"] == "origin"
    assert hosts.on_b("acquire", "r/cfg", env=env).code == 3


def test_repair_leaves_another_hosts_record_alone_until_seen_for_its_ttl(hosts) -> None:
    assert hosts.on_a("acquire", "r/rep", "--ttl", "10m").code == 0
    ref = "refs/worklease/r/rep.lease"
    text = git("cat-file", "blob", ref, cwd=hosts.server).stdout
    forged = _write_blob(hosts.server, text.replace('"test-agent"', '"mallory"'))  # bad signature
    git("update-ref", ref, forged, cwd=hosts.server)
    out = hosts.on_b("verify", "--repair", "--json")
    assert out.code == 7 and "left alone until" in out.out, out
    assert remote_refs(hosts.server)[ref] == forged
    assert hosts.on_b("acquire", "r/rep").code == 7


def test_a_remote_error_text_does_not_make_a_landed_push_look_unsent(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    hook = server / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\ncat >/dev/null\necho 'fatal: Could not read from remote repository.' >&2\n"
    )
    hook.chmod(0o755)
    drop_next_push(server, "committed")
    got = run_cli("acquire", "r/noisy", "--ttl", "1m", "--json", cwd=a)
    assert _was_dropped(server)
    assert got.code == 0, got
    assert run_cli("check", "r/noisy", cwd=a).code == 0


def test_a_bundle_refused_by_server_policy_is_a_store_error(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    hook = server / "hooks" / "update"
    hook.write_text('#!/bin/sh\ncase "$1" in *deny*) echo "no: $1" >&2; exit 1;; esac\n')
    hook.chmod(0o755)
    out = run_cli("bundle", "acquire", "r/ok", "r/deny", "--wait", "5s", "--json", cwd=a)
    assert out.code == 7, out
    assert "refused the update" in out.json["error"]["message"]
    assert remote_refs(server) == {}
    assert run_cli("bundle", "acquire", "r/ok", "r/fine", cwd=a).code == 0


def test_a_release_that_landed_before_another_host_took_over_is_settled(tmp_path: Path) -> None:
    """The push lands, its client dies, and another host acquires before we look."""
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    slow = _stall_while(a, "uploadpack", "git-upload-pack", seconds=5)
    assert run_cli("acquire", "r/rel", "--ttl", "1m", cwd=a).code == 0
    drop_next_push(server, "committed")
    slow.touch()
    release = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "release", "r/rel", "--json"],
        cwd=a, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not _was_dropped(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _was_dropped(server)  # A's release landed; A now waits 5 s for its settling fetch
    assert run_cli("acquire", "r/rel", cwd=b, env=HOST_B_ENV).code == 0
    out, _ = release.communicate(timeout=60)
    assert release.returncode == 0, out
    receipts = list((a / ".git" / "worklease" / "receipts").glob("*/*.json"))
    assert all(json.loads(p.read_text())["token"] is None for p in receipts)


def _hold_while(host: Path, key: str, program: str) -> Path:
    """Make ``host``'s origin run ``program`` (over file://) only once the returned marker
    file is gone, while it exists: a partition that heals when the test says so."""
    marker = host.parent / f"hold-{key}"
    wrapper = host.parent / f"holding-{key}"
    wrapper.write_text(
        f'#!/bin/sh\nn=0\nwhile [ -e "{marker}" ] && [ $n -lt 1200 ]; do sleep 0.05; '
        f'n=$((n+1)); done\nexec {program} "$@"\n'
    )
    wrapper.chmod(0o755)
    git("config", f"remote.origin.{key}", str(wrapper), cwd=host)
    return marker


def test_a_heartbeat_cut_off_while_others_took_over_twice_is_lost(tmp_path: Path) -> None:
    """The heartbeat did not land; before its settling fetch, host B took the claim over,
    released it and took it again. The chain back to the heartbeat's base runs through
    records host A never fetched: it fetches them and answers LOST, not AMBIGUOUS."""
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    assert run_cli("acquire", "r/chain", "--ttl", "2s", cwd=a).code == 0
    assert run_cli("acquire", "r/chain", cwd=b, env=HOST_B_ENV).code == 3  # B's first sighting
    held = _hold_while(a, "uploadpack", "git-upload-pack")
    held.touch()
    drop_next_push(server, "prepared")
    # A's heartbeat reads its clock a minute behind: as if it had stalled (SIGSTOP) for a
    # minute after it decided, its claim is live as far as it knows, and its wait for the
    # remote is bounded by that (a claim's remaining time bounds a heartbeat's network calls)
    stalled = {**TESTING, "GITLEASE_TESTING_BOOT_OFFSET_MS": "-60000"}
    beat = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "heartbeat", "r/chain", "--json"],
        cwd=a, stdout=subprocess.PIPE, text=True, env={**os.environ, **stalled},
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not _was_dropped(server):
        assert time.monotonic() < deadline and beat.poll() is None, "the push was not cut"
        time.sleep(0.05)
    while run_cli("acquire", "r/chain", "--ttl", "1m", cwd=b, env=HOST_B_ENV).code != 0:
        assert time.monotonic() < deadline + 30, "B never took the claim over"
        time.sleep(0.1)
    assert run_cli("release", "r/chain", cwd=b, env=HOST_B_ENV).code == 0
    assert run_cli("acquire", "r/chain", "--ttl", "1m", cwd=b, env=HOST_B_ENV).code == 0
    held.unlink()  # the partition heals: A's settling fetch goes through
    out, _ = beat.communicate(timeout=120)
    assert beat.returncode == 4, out  # LOST: it did not land and never can
    assert json.loads(out)["error"]["code"] == "LOST"
    assert _revisions_at_the_remote(server, "r/chain") == [1, 2, 2, 3]  # B: take, release, take


def test_a_server_without_atomic_push_is_a_store_error_and_leaves_no_receipt(hosts) -> None:
    """receive.advertiseAtomic false: nothing is ever sent, and every write says why."""
    receipts = hosts.a / ".git" / "worklease" / "receipts"
    assert hosts.on_a("acquire", "r/kept", "--ttl", "1m").code == 0
    before = sorted(receipts.glob("*/*.json"))
    git("config", "receive.advertiseAtomic", "false", cwd=hosts.server)
    for args in (("acquire", "r/new"), ("heartbeat", "r/kept"), ("release", "r/kept"),
                 ("bundle", "acquire", "r/b1", "r/b2")):  # fmt: skip
        out = hosts.on_a(*args, "--json")
        assert out.code == 7, (args, out)
        message = out.json["error"]["message"]
        assert "does not support atomic push" in message and "receive.advertiseAtomic" in message
    assert sorted(receipts.glob("*/*.json")) == before  # no receipt left behind
    assert list(remote_refs(hosts.server)) == ["refs/worklease/r/kept.lease"]
    git("config", "receive.advertiseAtomic", "true", cwd=hosts.server)
    assert hosts.on_a("release", "r/kept").code == 0  # the claim was kept all along


def test_a_heartbeat_in_a_silent_partition_answers_within_the_claims_time(tmp_path) -> None:
    """A server that accepts the connection and never answers (git daemon under SIGSTOP):
    the heartbeat waits for it no longer than the claim has left, plus its short settle,
    and says so; then, healed, the claim is known lost. GITLEASE_REMOTE_TIMEOUT is two
    minutes here, so a heartbeat bound only by it would outlast the test's own limit."""
    make_server(tmp_path)
    slow = {**TESTING, "GITLEASE_REMOTE_TIMEOUT": "120"}
    with git_daemon(tmp_path, keep_pid=True) as url:
        daemon_pid = int((tmp_path / "git-daemon.pid").read_text())
        a = make_host(url + "/server.git", tmp_path / "host-a")
        assert run_cli("acquire", "r/silent", "--ttl", "60s", cwd=a, env=slow).code == 0
        os.kill(daemon_pid, signal.SIGSTOP)  # connections are accepted, nothing answers
        try:
            # its clock 45 s on (clock_ahead): 15 s left of the claim, of which the command's
            # start takes a few at load 30 (3 s were all gone before it looked, at times)
            late = {**slow, **clock_ahead(45)}
            beat = run_cli("heartbeat", "r/silent", "--json", cwd=a, env=late, timeout=40)
        finally:
            os.kill(daemon_pid, signal.SIGCONT)
        assert beat.code == 5, beat  # the push may yet land: AMBIGUOUS, and it says why
        message = beat.json["error"]["message"]
        assert "no answer within the time the claim had left" in message, message
        ran_out = {**slow, **clock_ahead(61)}
        assert run_cli("heartbeat", "r/silent", cwd=a, env=ran_out).code == 4  # healed: lost


# A stand-in for ssh (GIT_SSH_VARIANT=ssh): it runs the remote command here, except that
# while MARKER exists a receive-pack connection fails the way FAILURE says: "kill" (the ssh
# process killed on this host, as by an OOM killer or a watchdog) or "reset" (the connection
# reset during the ssh handshake: ssh's own words, exit 255).
FAKE_SSH = r"""#!/bin/sh
for last; do :; done
case "$last" in *receive-pack*)
    if [ -e "MARKER" ]; then
        if [ "$(cat "MARKER")" = kill ]; then kill -9 $$; fi
        echo "kex_exchange_identification: read: Connection reset by peer" >&2
        echo "Connection reset by 127.0.0.1 port 22" >&2
        exit 255
    fi;;
esac
exec sh -c "$last"
"""


@pytest.mark.parametrize("failure", ["kill", "reset"])
def test_an_ssh_transport_that_fails_is_not_called_a_refusal(tmp_path: Path, failure) -> None:
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    marker = tmp_path / "ssh-fails"
    fake = tmp_path / "fake-ssh"
    fake.write_text(FAKE_SSH.replace("MARKER", str(marker)))
    fake.chmod(0o755)
    git("config", "core.sshCommand", str(fake), cwd=a)
    git("remote", "set-url", "origin", f"ssh://git@127.0.0.1{server}", cwd=a)
    env = {**TESTING, "GIT_SSH_VARIANT": "ssh"}
    receipts = a / ".git" / "worklease" / "receipts"
    assert run_cli("acquire", "r/ssh", "--ttl", "1m", cwd=a, env=env).code == 0
    held = sorted(receipts.glob("*/*.json"))
    marker.write_text(failure)
    for args in (("acquire", "r/other"), ("heartbeat", "r/ssh"), ("release", "r/ssh")):
        out = run_cli(*args, "--json", cwd=a, env=env)
        assert out.code == 7, (args, out)
        message = out.json["error"]["message"]
        assert "the transport failed" in message and "refused" not in message, message
        assert "nothing of this write is at the remote" in message, message
    assert sorted(receipts.glob("*/*.json")) == held
    assert list(remote_refs(server)) == ["refs/worklease/r/ssh.lease"]
    marker.unlink()
    assert run_cli("check", "r/ssh", cwd=a, env=env).code == 0
    assert run_cli("release", "r/ssh", cwd=a, env=env).code == 0


def test_a_password_in_a_remote_url_is_never_shown(hosts) -> None:
    url = "http://bob:s3cretPAT@127.0.0.1:1/server.git"
    where = hosts.on_a("where", "--remote", url, "--json")
    assert where.json["remote"] == "http://bob:***@127.0.0.1:1/server.git"
    for args in (("acquire", "r/pw"), ("show", "r/pw"), ("list",)):
        out = hosts.on_a(*args, "--remote", url, "--json")
        assert out.code == 7, out
        assert "s3cretPAT" not in out.out + out.err


def test_replace_file_checks_the_claim_at_the_remote(hosts) -> None:
    from conftest import taken_over

    target = hosts.b / "plan.txt"
    assert hosts.on_b("acquire", "r/file", "--ttl", "5m").code == 0  # live while B writes
    out = hosts.on_b("replace-file", str(target), "r/file", "--expect-absent", "--from", "-",
                     input="v1\n")  # fmt: skip
    assert out.code == 0 and target.read_text() == "v1\n", out
    assert hosts.on_a("acquire", "r/file").code == 3  # (a look at the 5-minute record: held)
    assert hosts.on_b("heartbeat", "r/file", "--ttl", "2s").code == 0  # B's last: it lapses
    # B's claim expires on B's clock; A takes it after watching it a TTL
    taken_over(lambda: hosts.on_a("acquire", "r/file", "--ttl", "1m"))
    sha = hashlib.sha256(b"v1\n").hexdigest()
    late = hosts.on_b("replace-file", str(target), "r/file", "--expect-sha256", sha,
                      "--from", "-", input="v2\n")  # fmt: skip
    assert late.code == 4, late
    assert target.read_text() == "v1\n"


def test_a_remote_that_looks_like_an_option_is_refused(hosts) -> None:
    out = hosts.on_a("acquire", "r/opt", "--remote=--upload-pack=touch /tmp/x", "--json")
    assert out.code == 2 and "cannot start with -" in out.json["error"]["message"], out
    assert remote_refs(hosts.server) == {}


def test_a_claim_counts_only_on_the_clock_of_the_boot_that_took_it(hosts, tmp_path) -> None:
    receipt = tmp_path / "receipt.json"
    got = hosts.on_a("acquire", "r/carried", "--ttl", "1m", "--receipt", str(receipt))
    assert got.code == 0, got
    rebooted = {**TESTING, "GITLEASE_TESTING_BOOT_ID": "a-after-a-reboot"}  # A, booted again
    out = hosts.on_a("check", "r/carried", "--receipt", str(receipt), "--json", env=rebooted)
    assert out.code == 4 and "before this host last booted" in out.json["error"]["message"], out
    assert hosts.on_a("heartbeat", "r/carried", "--receipt", str(receipt), env=rebooted).code == 4
    assert hosts.on_a("check", "r/carried", "--receipt", str(receipt)).code == 0
    carried = hosts.on_b("check", "r/carried", "--receipt", str(receipt), "--json")
    assert carried.code == 2 and "belongs to the store" in carried.json["error"]["message"]


def test_exec_stops_its_command_in_time_when_the_remote_hangs(tmp_path: Path) -> None:
    """A heartbeat push that gets no answer may not take longer than the claim has left."""
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    hang = _stall_while(a, "receivepack", "git-receive-pack", seconds=120)
    finished = tmp_path / "finished"  # the command's last act, a minute on
    command = ["sh", "-c", f'sleep 60 && touch "{finished}"']
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "exec", "r/hang", "--ttl", "3s", "--", *command],
        cwd=a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while run_cli("show", "r/hang", "--json", cwd=a).json["state"] != "active":
        assert time.monotonic() < deadline, "exec did not acquire"
    hang.touch()  # from now on every push hangs (the first heartbeat is due after 1 s)
    _out, err = proc.communicate(timeout=90)
    assert proc.returncode == 4, err
    assert "stopped" in err
    # stopped after the 3 s the claim had left and the grace, not after the 60 s a push may
    # take by default: the command never got to its end
    assert not finished.exists()


# ------------------------------------------------------------------ what docs/remote.md says


def test_exec_gives_its_command_the_remote_it_was_given(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    git("config", "--unset", "gitlease.remote", cwd=a)  # only --remote names it
    relative = os.path.relpath(server, a)
    where = run_cli("where", "--remote", relative, "--json", cwd=a).json
    assert where["remote"] == str(server)  # a path is made absolute
    script = 'echo "remote=$GITLEASE_REMOTE"; gitlease check r/env'
    out = run_cli("exec", "--remote", relative, "r/env", "--", "sh", "-c", script, cwd=a,
                  env=_path_env())  # fmt: skip
    assert out.code == 0, out
    assert f"remote={server}" in out.out
    assert "refs/worklease/r/env.lease" in remote_refs(server)


def test_an_unparseable_record_is_not_repaired_through_a_remote(hosts) -> None:
    ref = "refs/worklease/r/garbage.lease"
    git("update-ref", ref, _write_blob(hosts.server, "not a record\n"), cwd=hosts.server)
    before = remote_refs(hosts.server)[ref]
    out = hosts.on_b("verify", "--repair", "--json")
    assert out.code == 7 and "cannot be repaired through a remote" in out.out, out
    assert remote_refs(hosts.server)[ref] == before


def test_push_refusals_are_told_apart_per_ref() -> None:
    from gitlease.store.pushreply import rejection as _rejection

    assert _rejection([]) is None
    assert _rejection(["stale info", "atomic push failed"]) == "race"
    assert _rejection(["atomic transaction failed", "atomic transaction failed"]) == "race"
    assert _rejection(["hook declined", "atomic push failure"]) == "policy"
    assert _rejection(["deny updating a hidden ref"]) == "policy"
    assert _rejection(["remote failed to report status", "stale info"]) == "unknown"
    assert _rejection(["atomic push failed"]) == "race"  # only siblings: nothing was written
