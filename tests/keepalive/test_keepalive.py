"""keepalive: a detached keeper renews a claim while the agent lives, and only then.

Real processes throughout: the watched "agent" is a real process (a ``sleep``, or
a Python parent that runs gitlease through ``bash -c``), the keeper is the real
detached process (one for every claim kept: tests/keepalive/test_keeper.py), and every verdict
comes from ``gitlease show``/``list``.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import TESTING, clock_ahead, git, run_cli, wait_for, wait_renewed
from hosts import HOST_B_ENV, make_host, make_server
from keeping import TTL, assert_lapses, gone, keep, kill_strays, show
from keeping import alive as _alive
from keeping import registered as _registered

from gitlease._util import procs as _procs
from gitlease.model.clock import parse_rfc3339


@pytest.fixture(autouse=True)
def no_stray_keepalive(repo: Path) -> Iterator[None]:
    """Whatever a test leaves running is killed: a keepalive watching pytest would live on."""
    yield
    kill_strays(repo)


@pytest.fixture
def agent() -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """``agent()``: a real process to watch (a ``sleep``), killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sleep", "600"])
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def outlived(cli, resource: str, acquired: dict) -> dict:
    """Wait until the claim ``acquired`` was renewed after the moment its own TTL ran out,
    and is active (an expired claim is never renewed: it lived on throughout). The document."""
    ran_out = parse_rfc3339(acquired["expires_at"])

    def renewed_since() -> dict | None:
        doc = show(cli, resource)
        assert doc["claim_id"] == acquired["claim_id"] and doc["state"] == "active", doc
        return doc if parse_rfc3339(doc["renewed_at"]) > ran_out else None

    return wait_for(renewed_since, what=f"{resource} renewed past its first TTL")


# ------------------------------------------------------------------ lifetime


def test_a_kept_claim_outlives_its_ttl_and_lapses_when_the_agent_dies(cli, repo, agent) -> None:
    watched = agent()
    acquired, kept = keep(cli, "ka/1", watched.pid)
    keeper = kept["keepalive"]
    assert keeper["watching"] == {"pid": watched.pid, "name": "sleep"}
    assert kept["claim_id"] == acquired["claim_id"]
    doc = outlived(cli, "ka/1", acquired)  # past its TTL: only the keepalive renews it
    assert doc["keepalive"]["pid"] == keeper["pid"]
    second = cli("keepalive", "ka/1", "--while-pid", str(watched.pid))
    assert second.code == 3 and f"keepalive process {keeper['pid']}" in second.err, second
    watched.kill()
    watched.wait()
    doc = assert_lapses(cli, "ka/1", keeper["pid"])
    assert doc["keepalive"] is None
    log = Path(keeper["log"]).read_text()
    assert f"the watched process {watched.pid} (sleep) ended" in log
    assert Path(keeper["log"]).parent == Path(acquired["receipt"]).parent
    assert Path(keeper["log"]).stat().st_mode & 0o777 == 0o600


def test_kill_9_of_the_keepalive_lets_the_claim_lapse_and_show_stops_reporting_it(
    cli, repo, agent
) -> None:
    watched = agent()
    _, kept = keep(cli, "ka/2", watched.pid)
    pid = kept["keepalive"]["pid"]
    listed = cli("list", "--json").json["claims"]
    assert [c["keepalive"]["pid"] for c in listed if c["resource"] == "ka/2"] == [pid]
    table = cli("list").out
    assert "KEPT BY" in table and f"pid {pid}" in table
    assert f"keepalive    pid {pid}, watching pid {watched.pid} (sleep)" in cli("show", "ka/2").out
    os.kill(pid, signal.SIGKILL)
    assert_lapses(cli, "ka/2", pid)
    # its entry is still in the registry (nobody removed it), but a dead pid is not reported
    assert [e["pid"] for e in _registered(repo)] == [pid]
    assert show(cli, "ka/2")["keepalive"] is None
    listed = cli("list", "--json").json["claims"]
    assert [c["keepalive"] for c in listed] == [None]
    assert "KEPT BY" not in cli("list").out


def test_release_ends_the_keepalive_process(cli, repo, agent) -> None:
    watched = agent()
    _, kept = keep(cli, "ka/3", watched.pid, ttl=60)  # no renewal for 20 s: release stops it
    pid = kept["keepalive"]["pid"]
    assert _alive(pid)
    released = cli("release", "ka/3")
    assert released.code == 0, released
    assert not _alive(pid)  # release waited for it
    assert _registered(repo) == []
    assert show(cli, "ka/3")["state"] == "released"
    assert "stopped: told to stop" in Path(kept["keepalive"]["log"]).read_text()


def test_max_stops_it(cli, repo, agent) -> None:
    watched = agent()
    _, kept = keep(cli, "ka/4", watched.pid, "--max", "3s")
    started_at = parse_rfc3339(kept["keepalive"]["started_at"]) / 1000
    assert parse_rfc3339(kept["keepalive"]["until"]) / 1000 == pytest.approx(
        started_at + 3, abs=0.01
    )
    assert_lapses(cli, "ka/4", kept["keepalive"]["pid"])
    assert "--max (3s) reached" in Path(kept["keepalive"]["log"]).read_text()
    assert _alive(watched.pid)


def test_a_replaced_claim_stops_it(cli, repo, worktrees, agent) -> None:
    a, b = worktrees
    watched = agent()
    _, kept = keep(lambda *args: cli(*args, cwd=a), "ka/5", watched.pid)
    pid = kept["keepalive"]["pid"]
    os.kill(pid, signal.SIGSTOP)  # a stalled keepalive: the claim runs out meanwhile
    try:
        # (B comes a TTL later, on a clock moved on: the claim has run out for it)
        taken = cli("acquire", "ka/5", "--ttl", "1m", "--owner", "agent-b", "--json", cwd=b,
                    env=clock_ahead(TTL + 1))  # fmt: skip
        assert taken.code == 0, taken
    finally:
        os.kill(pid, signal.SIGCONT)
    gone(pid)  # its next renewal answered LOST
    doc = show(cli, "ka/5")
    assert doc["state"] == "active" and doc["owner"] == "agent-b"
    assert doc["claim_id"] == taken.json["claim_id"] and doc["keepalive"] is None
    assert "LOST" in Path(kept["keepalive"]["log"]).read_text()


# ------------------------------------------------------------------ detached, no secrets


def test_detached_without_token_or_test_switches(cli, repo) -> None:
    # through a pipe: the command returns although the keepalive lives on (it holds no end
    # of the pipe); it watches pytest here, and the test releases the claim
    gitlease = f"{sys.executable} -m gitlease"
    piped = subprocess.run(
        ["bash", "-c", f"{gitlease} acquire ka/6 --ttl {TTL:g}s --keepalive --json | cat"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **TESTING, "GITLEASE_TESTING_BOOT_OFFSET_MS": "0"},
    )
    assert piped.returncode == 0, piped
    doc = json.loads(piped.stdout)
    pid = doc["keepalive"]["pid"]
    token = json.loads(Path(doc["receipt"]).read_text())["token"]
    assert token.startswith("glt_")
    for name in ("cmdline", "environ"):
        raw = Path(f"/proc/{pid}/{name}").read_bytes()
        assert b"glt_" not in raw and token.encode() not in raw
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert not [v for v in environ if v.startswith(b"GITLEASE_")]
    stat = _procs.inspect(pid)
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    session, tty = int(fields[3]), int(fields[4])
    assert stat is not None and session != os.getsid(0) and session != pid and tty == 0
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2")
    own_log = Path(os.readlink(f"/proc/{pid}/fd/1"))  # the keeper's own, in its private folder
    assert own_log.name.startswith("keeper-") and own_log.stat().st_mode & 0o777 == 0o600
    assert own_log.parent.stat().st_mode & 0o777 == 0o700
    open_files = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    assert doc["keepalive"]["log"] in open_files  # the claim's log, next to its receipt
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    assert doc["keepalive"]["watching"]["pid"] == os.getpid()  # pytest: the nearest non-shell
    assert token not in Path(doc["keepalive"]["log"]).read_text()
    assert cli("release", "ka/6").code == 0
    assert not _alive(pid)


def test_it_survives_the_callers_terminal_closing(cli, repo, agent) -> None:
    watched = agent()
    assert cli("acquire", "ka/10", "--ttl", "1m").code == 0  # (lasts while the shell starts)
    out = repo / "kept.json"
    master, slave = os.openpty()

    def on_the_terminal() -> None:  # in the child: the pty becomes its controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    command = (
        f"{sys.executable} -m gitlease keepalive ka/10 --while-pid {watched.pid} --json > {out}"
        "; sleep 600"
    )
    shell = subprocess.Popen(
        ["bash", "-c", command],
        cwd=repo,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=on_the_terminal,
    )
    os.close(slave)
    try:
        wait_for(lambda: out.exists() and out.stat().st_size > 0, what="the keepalive's answer")
        pid = json.loads(out.read_text())["keepalive"]["pid"]
    finally:
        os.close(master)  # the terminal goes away: its session gets SIGHUP
    assert shell.wait(timeout=60) == -signal.SIGHUP
    # a shorter TTL wakes the keepalive (it renews at once): renewed after its terminal went
    beat = cli("heartbeat", "ka/10", "--ttl", f"{TTL:g}s", "--json")
    assert beat.code == 0, beat
    wait_renewed(cli, "ka/10", beat.json)
    assert _alive(pid)
    assert show(cli, "ka/10")["keepalive"]["pid"] == pid
    assert show(cli, "ka/10")["state"] == "active"
    assert cli("release", "ka/10").code == 0


def test_the_default_watched_process_is_the_python_parent_of_the_shells(repo) -> None:
    # python -> bash -> sh -> timeout (a launcher of gitlease) -> python -m gitlease
    out = repo / "acquired.json"
    gitlease = f"{sys.executable} -m gitlease"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "inner = sys.argv[1]\n"
            "r = subprocess.run(['bash', '-c', f'sh -c {inner!r}; true'], capture_output=True)\n"
            "open(sys.argv[2], 'wb').write(r.stdout)\n"
            "time.sleep(600)\n",
            f"timeout 60 {gitlease} acquire ka/7 --ttl {TTL:g}s --keepalive --json; true",
            str(out),
        ],
        cwd=repo,
    )
    here = lambda *a, **kw: run_cli(*a, cwd=repo, **kw)  # noqa: E731
    try:
        wait_for(lambda: out.exists() and out.stat().st_size > 0, what="the acquire's answer")
        doc = json.loads(out.read_text())
        assert doc["keepalive"]["watching"]["pid"] == parent.pid
        assert doc["keepalive"]["watching"]["name"].startswith("python")
        wait_renewed(here, "ka/7", doc)  # kept: renewed
        assert here("show", "ka/7", "--json").json["state"] == "active"
    finally:
        parent.kill()
        parent.wait()
    assert_lapses(here, "ka/7", doc["keepalive"]["pid"])


def test_through_a_remote_each_renewal_is_bounded_by_the_time_left(tmp_path, agent) -> None:
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    watched = agent()
    acquired, kept = keep(lambda *args: run_cli(*args, cwd=a), "kr/1", watched.pid)
    keeper = kept["keepalive"]
    # renewed at the remote, not only in A's mirror
    wait_for(lambda: git("rev-parse", acquired["ref"], cwd=server).stdout.strip()
             != acquired["oid"], what="a renewal at the remote")  # fmt: skip
    held = run_cli("acquire", "kr/1", cwd=b, env=HOST_B_ENV)
    assert held.code == 3, held
    # from now on every push hangs for a minute: a renewal waits no longer than the claim has
    # left, so the keepalive finds the claim expired and stops long before the push returns
    marker = tmp_path / "stall"
    wrapper = tmp_path / "stalling-receive-pack"
    wrapper.write_text(f'#!/bin/sh\n[ -e "{marker}" ] && sleep 60\nexec git-receive-pack "$@"\n')
    wrapper.chmod(0o755)
    git("config", "remote.origin.receivepack", str(wrapper), cwd=a)
    marker.touch()
    gone(keeper["pid"])  # (a renewal waiting on the push would end after the minute, if ever)
    assert "the claim expired while renewing failed" in Path(keeper["log"]).read_text()


def test_through_a_remote_a_failed_renewal_is_retried_while_time_is_left(tmp_path, agent) -> None:
    """Two short flaps in a row: the first two renewals fail at once (the remote refuses two
    pushes, then takes them again). The keepalive tries again soon (half a second, doubling,
    within what the claim has left), not only a third of a TTL later, so the claim outlives
    both (before: the third try came at the TTL's end). The remote counts the refusals: no
    race between the test and the keepalive."""
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    watched = agent()
    refused = tmp_path / "refused"  # while it exists: a line per refused push, two of them
    wrapper = tmp_path / "flapping-receive-pack"
    wrapper.write_text(
        f'#!/bin/sh\nif [ -e "{refused}" ] && [ "$(wc -l < "{refused}")" -lt 2 ]; then\n'
        f'    echo refused >> "{refused}"; exit 1\nfi\nexec git-receive-pack "$@"\n'
    )
    wrapper.chmod(0o755)
    git("config", "remote.origin.receivepack", str(wrapper), cwd=a)
    # 30 s: three tries (pushes of seconds each at load 20) fit in the 20 s left after the first
    assert run_cli("acquire", "kr/flap", "--ttl", "30s", cwd=a).code == 0
    refused.touch()  # the network fails from before the first renewal (due after 10 s)
    kept = run_cli("keepalive", "kr/flap", "--while-pid", str(watched.pid), "--json", cwd=a)
    assert kept.code == 0, kept
    keeper = kept.json["keepalive"]
    log = Path(keeper["log"])
    wait_for(lambda: "renewed" in log.read_text() or not _alive(keeper["pid"]),
             what="a renewal (or the keepalive to end)")  # fmt: skip
    text = log.read_text()
    assert "renewed" in text and "stopped" not in text, text
    assert text.count("renewal failed") == 2, text
    assert run_cli("check", "kr/flap", cwd=a).code == 0


# ------------------------------------------------------------------ bundles, errors, API


def test_bundle_acquire_keepalive_and_bundle_release(cli, repo, agent) -> None:
    got = cli("bundle", "acquire", "kb/1", "kb/2", "--ttl", f"{TTL:g}s", "--keepalive",
              "--json")  # fmt: skip
    assert got.code == 0, got
    pids = {c["keepalive"]["pid"] for c in got.json["claims"]}
    assert len(pids) == 1
    (pid,) = pids
    second = cli("bundle", "keepalive", got.json["bundle_id"], "--while-pid", str(agent().pid))
    assert second.code == 3 and str(pid) in second.err
    for acquired in got.json["claims"]:  # the one keepalive renews both
        assert wait_renewed(cli, acquired["resource"], acquired)["keepalive"]["pid"] == pid
    shown = cli("bundle", "show", got.json["bundle_id"], "--json").json["claims"]
    assert [(c["state"], c["keepalive"]["pid"]) for c in shown] == [("active", pid)] * 2
    assert cli("bundle", "release", got.json["bundle_id"]).code == 0
    assert not _alive(pid)
    watched = agent()
    again = cli("bundle", "acquire", "kb/1", "kb/2", "--ttl", "1m", "--json").json
    kept = cli("bundle", "keepalive", "--while-pid", str(watched.pid), "--json").json
    assert kept["bundle_id"] == again["bundle_id"]
    assert {c["keepalive"]["watching"]["pid"] for c in kept["claims"]} == {watched.pid}


def test_refusals(cli, repo, agent) -> None:
    assert cli("keepalive", "ka/8", "--while-pid", "1").code == 4  # not held: no receipt
    assert cli("acquire", "ka/8", "--ttl", "10m").code == 0  # (at load 30 the test took 2 min)
    dead = subprocess.Popen(["true"])
    dead.wait()
    for args in (["--while-pid", str(dead.pid)], ["--while-pid", "0"], ["--max", "0s"]):
        got = cli("keepalive", "ka/8", *args)
        assert got.code == 2 and "Traceback" not in got.err, (args, got)
    assert cli("keepalive", "ka/8", "--while-pid", "x").code == 2
    assert _registered(repo) == []
    assert cli("release", "ka/8").code == 0
    assert cli("keepalive", "ka/8", "--while-pid", str(agent().pid)).code == 4  # released


def test_python_api(repo, agent, monkeypatch) -> None:
    import gitlease

    monkeypatch.chdir(repo)
    store = gitlease.open_store()
    gitlease.acquire(store, "ka/9", ttl="1m")
    watched = agent()
    claim = gitlease.keep_alive(store, "ka/9", while_pid=watched.pid, max_duration="1h")
    assert claim.keepalive is not None and claim.keepalive.watched_pid == watched.pid
    assert gitlease.show(store, "ka/9").keepalive == claim.keepalive
    with pytest.raises(gitlease.HeldError):
        gitlease.keep_alive(store, "ka/9", while_pid=watched.pid)
    gitlease.release(store, "ka/9")
    assert not _alive(claim.keepalive.pid)
    assert gitlease.show(store, "ka/9").keepalive is None
