"""Two resident `gitlease mcp` servers, one on each of two hosts, racing through one git
remote (``file://``). Each keeps its remote store warm between calls (gitlease/mcp/warm.py):
its mirror is whatever its own last call left, often behind the other host's writes. Every
grant is still the push's compare-and-swap at the remote, so in every round exactly one
host wins, the loser answers HELD from a fresh look (never from the last call's fetch), and
the remote's history holds each winner's claim once, with revisions one apart.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from conftest import run_cli
from hosts import HOST_B_ENV, make_host, make_server
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROUNDS = 12


@contextlib.asynccontextmanager
async def server_on(host: Path, env: dict[str, str], errlog: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gitlease", "mcp"],
        cwd=str(host),
        env={**os.environ, **env},
    )
    with errlog.open("w") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def _call(session: ClientSession, name: str, resource: str) -> tuple[bool, Any]:
    result = await session.call_tool(name, {"resource": resource, "ttl": "5m"}
                                     if name == "acquire" else {"resource": resource})  # fmt: skip
    return result.is_error, result.structured_content


def test_two_warm_servers_racing_through_a_remote_grant_once_a_round(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    resource = "race/warm"
    winners: list[dict[str, Any]] = []

    async def scenario() -> None:
        async with (
            server_on(a, {}, tmp_path / "a.err") as on_a,
            server_on(b, HOST_B_ENV, tmp_path / "b.err") as on_b,
        ):
            hosts = {"a": on_a, "b": on_b}
            for _ in range(ROUNDS):
                answers: dict[str, tuple[bool, Any]] = {}

                async def take(name: str, into: dict[str, tuple[bool, Any]]) -> None:
                    into[name] = await _call(hosts[name], "acquire", resource)

                async with anyio.create_task_group() as tasks:
                    for name in hosts:
                        tasks.start_soon(take, name, answers)
                won = [n for n, (failed, _) in answers.items() if not failed]
                assert len(won) == 1, answers
                (loser,) = set(hosts) - set(won)
                failed, doc = answers[loser]
                assert doc["error"]["code"] == "HELD", answers  # a fresh look: held, by the winner
                winners.append(answers[won[0]][1])
                failed, done = await _call(hosts[won[0]], "release", resource)
                assert not failed, done

    anyio.run(scenario)
    # read at the remote itself: its repository is the store there
    at_remote = run_cli("log", resource, "--json", "--store", str(server), "--remote", "",
                        cwd=tmp_path)  # fmt: skip
    assert at_remote.code == 0, at_remote
    acquired = [r for r in at_remote.json["records"] if r["state"] != "released"]
    assert [r["claim_id"] for r in acquired] == [w["claim_id"] for w in winners]
    assert [r["revision"] for r in acquired] == list(range(1, ROUNDS + 1))
