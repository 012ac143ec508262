"""Several hosts on a network: a git daemon in one network namespace, clients in others
(tests/support/netns.py; on 127.0.0.1 through forwarders where namespaces cannot be made here).

Each client is a host of its own: its own namespace, clone, store and (for all but the
first) boot id and boot clock. What is checked is docs/remote.md's promise across hosts:
one winner when clients on two hosts race for one resource, and, with one client cut off
silently during a heartbeat, an answer within the claim's time that the healed network
confirms.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTING, Result, clock_ahead, git
from hosts import HOST_B_ENV, make_server
from netns import Network, network

RACERS = 3  # per host


def _host(net: Network, client: int, server: Path, base: Path) -> Path:
    """A clone of the server as host ``client`` sees it: its own store, the network URL."""
    path = base / f"host-{client}"
    git("clone", "-q", server.as_uri(), str(path), cwd=base)
    git("remote", "set-url", "origin", net.url(client, "server.git"), cwd=path)
    git("config", "gitlease.remote", "origin", cwd=path)
    git("config", "gitlease.store", str(path / ".git"), cwd=path)
    return path


def _env(client: int, **more: str) -> dict[str, str]:
    env = {**os.environ, **TESTING, **more}
    if client:  # another machine: another boot id, a boot clock a week off
        env.update(HOST_B_ENV)
        env["GITLEASE_TESTING_BOOT_ID"] = f"b000000{client}-0000-4000-8000-00000000000b"
        env["XDG_STATE_HOME"] = str(Path(os.environ["HOME"]) / f"host-{client}" / "state")
    return env


def _cli(net: Network, client: int, repo: Path, *args: str, timeout: float = 60, **env: str):
    proc = subprocess.run(
        net.command(client, [sys.executable, "-m", "gitlease", *args]),
        cwd=repo, env=_env(client, **env), text=True, capture_output=True, timeout=timeout,
    )  # fmt: skip
    return Result(proc)


@pytest.fixture
def net(tmp_path: Path):
    make_server(tmp_path)
    with network(tmp_path, clients=2) as net:
        print(f"hosts: {net.how}")
        yield net


def test_clients_on_two_hosts_race_for_one_resource_and_one_wins(net, tmp_path) -> None:
    hosts = [_host(net, i, tmp_path / "server.git", tmp_path) for i in range(2)]
    for round_ in range(3):
        resource = f"net/race/{round_}"
        args = [sys.executable, "-m", "gitlease", "acquire", resource, "--ttl", "1m"]
        procs = [
            subprocess.Popen(
                net.command(i, args),
                cwd=hosts[i],
                env=_env(i),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for i in range(2)
            for _ in range(RACERS)
        ]
        codes = sorted(p.wait(timeout=120) for p in procs)
        assert codes == [0] + [3] * (2 * RACERS - 1), (net.how, resource, codes)


def test_a_client_cut_off_during_a_heartbeat_answers_within_the_claims_time(net, tmp_path) -> None:
    a, b = (_host(net, i, tmp_path / "server.git", tmp_path) for i in range(2))
    slow = {"GITLEASE_REMOTE_TIMEOUT": "120"}  # bound by it alone, a heartbeat would hang on
    assert _cli(net, 0, a, "acquire", "net/cut", "--ttl", "60s", **slow).code == 0
    net.partition(0)
    try:
        # its clock 45 s on (clock_ahead): 15 s left of the claim, of which the command's
        # start takes a few at load 30 (3 s were all gone before it looked, at times)
        late = {**slow, **clock_ahead(45)}
        beat = _cli(net, 0, a, "heartbeat", "net/cut", "--json", timeout=40, **late)
        assert beat.code == 5, (net.how, beat)
        assert "no answer within the time the claim had left" in beat.json["error"]["message"]
        seen = _cli(net, 1, b, "show", "net/cut", "--json")  # the other host is not cut off
        assert seen.code == 0 and seen.json["state"] in ("active", "expired"), seen
    finally:
        net.heal(0)
    ran_out = {**slow, **clock_ahead(61)}
    assert _cli(net, 0, a, "heartbeat", "net/cut", **ran_out).code == 4  # healed: it ran out
    assert _cli(net, 0, a, "acquire", "net/cut", "--ttl", "1m", **ran_out).code == 0  # expired
