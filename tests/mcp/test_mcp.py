"""`gitlease mcp` through the MCP SDK's own client, spawned over stdio as a harness does.

Every server here is a real process (`python -m gitlease mcp`) in a real worktree; every
message it answers and everything it writes on stderr is kept, and no `glt_` token may
appear in any of it. Waits are on states (a renewal seen in the store, a line on
stderr, an expiry), never on sleep margins.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from conftest import clock_ahead, git, run_cli, store_git, wait_for
from mcp import ClientSession  # (the SDK: in the `test` extra, as in the `mcp` one)
from mcp.client.stdio import StdioServerParameters, stdio_client

from gitlease.model.clock import parse_rfc3339

TOKEN = "glt_"
#: Fields of a claim document that differ between two reads by time alone.
TIMELY = {"expires_in"}
PATIENCE = 120.0  # seconds: generous bounds on waits for states (the machine is loaded)
#: A renewed claim's TTL: renewed every 3 s, a loaded machine (load 20) delays one by seconds.
TTL = 9


class Server:
    """One `gitlease mcp` session: calls, and every text it answered."""

    def __init__(self, session: ClientSession, stderr: Path, pidfile: Path) -> None:
        self.session = session
        self.stderr = stderr
        self.pidfile = pidfile
        self.seen: list[str] = []

    @property
    def pid(self) -> int:
        return int(self.pidfile.read_text())

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> tuple[bool, Any]:
        result = await self.session.call_tool(name, arguments or {})
        texts = [c.text for c in result.content if c.type == "text"]
        self.seen.extend(texts)
        self.seen.append(json.dumps(result.structured_content))
        assert len(texts) == 1, result
        # the text is the same JSON document as the structured content
        assert json.loads(texts[0]) == result.structured_content
        return result.is_error, result.structured_content

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        failed, doc = await self.call(name, arguments)
        assert not failed, doc
        return doc

    async def fails(self, name: str, arguments: dict[str, Any] | None, code: str) -> Any:
        failed, doc = await self.call(name, arguments)
        assert failed, doc
        assert doc["error"]["code"] == code, doc
        return doc["error"]


def _everything(servers: list[Server]) -> str:
    return "\n".join(
        [text for s in servers for text in s.seen] + [s.stderr.read_text() for s in servers]
    )


def assert_no_token(*servers: Server) -> None:
    everything = _everything(list(servers))
    assert TOKEN not in everything
    assert "Traceback" not in everything


@contextlib.asynccontextmanager
async def mcp_server(cwd: Path, tmp: Path, name: str = "s") -> AsyncIterator[Server]:
    """`gitlease mcp` in ``cwd``, spawned through a shell that records its pid then execs it
    (the pid the SIGKILL test needs); the SDK's client speaks to it over stdio."""
    stderr, pidfile = tmp / f"{name}.stderr", tmp / f"{name}.pid"
    params = StdioServerParameters(
        command="/bin/sh",
        args=["-c", f'echo $$ > "{pidfile}"; exec "{sys.executable}" -m gitlease mcp'],
        cwd=str(cwd),
        env=dict(os.environ),  # (the SDK's default passes only a few variables: not hermetic)
    )
    notes: list[str] = []

    async def on_message(message: Any) -> None:
        notes.append(repr(message))

    with stderr.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            await session.initialize()
            server = Server(session, stderr, pidfile)
            server.seen = notes  # notifications too: every message the server sent
            yield server


def run(test: Callable[[], Any]) -> None:
    anyio.run(test)


def cli_json(*args: str, cwd: Path) -> Any:
    result = run_cli(*args, "--json", cwd=cwd)
    assert TOKEN not in result.out + result.err
    return result.json


def timeless(doc: Any) -> Any:
    """``doc`` without the fields that differ between two reads by time alone."""
    if isinstance(doc, dict):
        return {k: timeless(v) for k, v in doc.items() if k not in TIMELY}
    if isinstance(doc, list):
        return [timeless(v) for v in doc]
    return doc


def on_change(repo: Path, resource: str, probe: Callable[[], Any]) -> Callable[[], Any]:
    """``probe``, asked only when the claim's ref in the store moved since it was last asked
    (a ``git rev-parse``, not a ``gitlease show``, between renewals: the wait costs little)."""
    ref = f"refs/worklease/{resource}.lease"
    seen: list[str | None] = [None]

    def probed() -> Any:
        oid = store_git("rev-parse", "--verify", "-q", ref, cwd=repo, check=False).stdout
        if oid == seen[0]:
            return None
        seen[0] = oid
        return probe()

    return probed


async def await_for(what: str, probe: Callable[[], Any]) -> Any:
    """conftest's ``wait_for`` in a worker thread (the event loop runs on meanwhile)."""
    return await anyio.to_thread.run_sync(lambda: wait_for(probe, PATIENCE, what))


def expected_tools() -> set[str]:
    from gitlease.cli.app import LazyGroup
    from gitlease.mcp.tools import TOOLS

    return {t.name for t in TOOLS if t.name in LazyGroup.modules}


def test_tools_contention_and_the_cli_documents(worktrees: tuple[Path, Path], tmp_path: Path):
    a, b = worktrees

    async def scenario() -> None:
        async with mcp_server(a, tmp_path, "a") as one, mcp_server(b, tmp_path, "b") as two:
            listed = (await one.session.list_tools()).tools
            one.seen.append(repr(listed))  # (the tool list is a message too)
            tools = {t.name: t for t in listed}
            assert set(tools) == expected_tools()
            assert {"acquire", "check", "release", "heartbeat", "show", "list", "free", "log",
                    "key", "where"} <= set(tools)  # fmt: skip
            acquire = tools["acquire"].input_schema
            assert acquire["properties"]["first_free"]["type"] == "array"
            assert acquire["properties"]["coordination_only"]["type"] == "boolean"
            assert {"resource", "key", "ttl", "note", "wait", "paths"} <= set(acquire["properties"])
            assert tools["list"].input_schema["properties"]["state"]["enum"] == [
                "active", "expired", "released", "invalid"
            ]  # fmt: skip
            assert tools["show"].input_schema["required"] == ["resource"]
            assert "HELD" in (tools["acquire"].description or "")
            assert "check" in (tools["acquire"].description or "")

            got = await one.ok("acquire", {"resource": "issue/1", "ttl": "10m", "note": "auth"})
            assert got["state"] == "active" and got["bound"] is True
            receipt = Path(got["receipt"])
            # the receipt lives where the CLI keeps this worktree's receipts
            assert receipt.is_relative_to(cli_json("where", cwd=a)["receipts"])
            assert receipt.stat().st_mode & 0o777 == 0o600

            held = await two.fails("acquire", {"resource": "issue/1"}, "HELD")
            assert held["exit"] == 3
            assert held["claim"]["claim_id"] == got["claim_id"]

            checked = await one.ok("check", {"resource": "issue/1", "min_remaining": "1m"})
            assert checked["claim_id"] == got["claim_id"]
            lost = await two.fails("check", {"resource": "issue/1"}, "LOST")
            assert lost["exit"] == 4

            # the tool's document is the CLI's, for the same state
            assert timeless(await one.ok("show", {"resource": "issue/1"})) == timeless(
                cli_json("show", "issue/1", cwd=a)
            )
            assert timeless(await one.ok("list", {"prefix": "issue/"})) == timeless(
                cli_json("list", "--prefix", "issue/", cwd=a)
            )
            assert await one.ok("free", {"resources": ["issue/1", "issue/2"]}) == cli_json(
                "free", "issue/1", "issue/2", cwd=a
            )
            assert await one.ok("where") == cli_json("where", cwd=a)
            assert await one.ok("key", {"provider": "github", "items": ["acme/api#42"]}) == (
                cli_json("key", "github", "acme/api#42", cwd=a)
            )

            done = await one.ok("release", {"resource": "issue/1", "checkpoint": "commit abc123"})
            assert done["state"] == "released" and done["checkpoint"] == "commit abc123"
            shown = await two.ok("show", {"resource": "issue/1"})
            assert shown["state"] == "released" and shown["checkpoint"] == "commit abc123"
            assert timeless(shown) == timeless(cli_json("show", "issue/1", cwd=b))
            listed_claims = (await two.ok("list", {"state": "released"}))["claims"]
            assert [c["resource"] for c in listed_claims] == ["issue/1"]
            assert timeless(await two.ok("log", {"resource": "issue/1"})) == timeless(
                cli_json("log", "issue/1", cwd=b)
            )
            # the other worktree can take it now
            assert (await two.ok("acquire", {"resource": "issue/1"}))["state"] == "active"
            await two.ok("release", {"resource": "issue/1"})
            assert_no_token(one, two)

    run(scenario)


def test_the_server_renews_its_claims(repo: Path, tmp_path: Path):
    async def scenario() -> None:
        async with mcp_server(repo, tmp_path) as server:
            got = await server.ok("acquire", {"resource": "renew/1", "ttl": f"{TTL}s"})
            ran_out = parse_rfc3339(got["expires_at"])

            def renewed() -> Any:
                doc = cli_json("show", "renew/1", cwd=repo)
                assert doc["state"] == "active" and doc["claim_id"] == got["claim_id"], doc
                return doc if parse_rfc3339(doc["renewed_at"]) > ran_out else None

            # still ours, renewed again and again: renewed after its first TTL ran out (an
            # expired claim is never renewed), and a check then holds
            await await_for("a renewal after the first TTL", on_change(repo, "renew/1", renewed))
            assert (await server.ok("check", {"resource": "renew/1"}))["state"] == "active"
            # released through the server: no longer renewed (its record stays released)
            await server.ok("release", {"resource": "renew/1", "checkpoint": "done"})
            assert cli_json("show", "renew/1", cwd=repo)["state"] == "released"
            assert_no_token(server)

    run(scenario)


def test_a_killed_server_leaves_its_claim_to_expire(repo: Path, tmp_path: Path):
    taken: dict[str, Any] = {}
    reached: list[str] = []

    async def scenario() -> None:
        # (the client's own teardown fails once its server is gone: that is not the test)
        with contextlib.suppress(Exception, BaseExceptionGroup):
            async with mcp_server(repo, tmp_path) as server:
                got = await server.ok("acquire", {"resource": "kill/1", "ttl": f"{TTL}s"})
                taken.update(got)
                await await_for(
                    "a renewal",
                    on_change(
                        repo,
                        "kill/1",
                        lambda: (
                            cli_json("show", "kill/1", cwd=repo)["renewed_at"] != got["renewed_at"]
                        ),
                    ),
                )
                assert_no_token(server)
                reached.append("renewed")
                pid = server.pid
                os.kill(pid, signal.SIGKILL)
                await await_for("the server to end", lambda: not _running(pid))
                reached.append("killed")

    run(scenario)
    assert reached == ["renewed", "killed"]
    # held until its TTL runs out, then expired (seen a TTL later, on a clock moved on):
    # never released for the agent, never renewed again
    now = cli_json("show", "kill/1", cwd=repo)
    assert now["state"] in ("active", "expired") and now["claim_id"] == taken["claim_id"], now
    then = run_cli("show", "kill/1", "--json", cwd=repo, env=clock_ahead(TTL + 1)).json
    assert then["state"] == "expired" and then["claim_id"] == taken["claim_id"], then
    assert then["renewed_at"] == now["renewed_at"]


def _running(pid: int) -> bool:
    """Running, not a zombie (a killed server is reaped by its client, maybe not at once)."""
    from gitlease._util import procs

    proc = procs.inspect(pid)
    return proc is not None and proc.alive


def test_a_claim_the_renewal_finds_lost_is_dropped_and_says_lost(repo: Path, tmp_path: Path):
    async def scenario() -> None:
        async with mcp_server(repo, tmp_path) as server:
            await server.ok("acquire", {"resource": "lost/1", "ttl": "2s"})
            # released behind the server's back (same worktree, same receipt)
            assert run_cli("release", "lost/1", cwd=repo).code == 0
            await await_for(
                "the renewal to find it lost",
                lambda: "LOST: lost/1" in server.stderr.read_text(),
            )
            error = await server.fails("check", {"resource": "lost/1"}, "LOST")
            assert error["exit"] == 4
            await server.fails("heartbeat", {"resource": "lost/1"}, "LOST")
            # a new claim on it is taken and held again
            await server.ok("acquire", {"resource": "lost/1", "ttl": "1m"})
            assert (await server.ok("check", {"resource": "lost/1"}))["state"] == "active"
            await server.ok("release", {"resource": "lost/1"})
            assert_no_token(server)

    run(scenario)


def test_bad_arguments_are_usage_tool_errors(repo: Path, tmp_path: Path):
    async def scenario() -> None:
        async with mcp_server(repo, tmp_path) as server:
            bad: list[tuple[str, dict[str, Any]]] = [
                ("acquire", {}),
                ("acquire", {"resource": 42}),
                ("acquire", {"resource": "a", "first_free": ["b"]}),
                ("acquire", {"first_free": []}),
                ("acquire", {"first_free": "a"}),
                ("acquire", {"resource": "a", "ttl": "soon"}),
                ("acquire", {"resource": "a", "coordination_only": "yes"}),
                ("acquire", {"resource": "a", "bogus": 1}),
                ("acquire", {"resource": "a", "key": "nosuchprovider"}),
                ("list", {"state": "bogus"}),
                ("show", {}),
                ("check", {"resource": "a", "min_remaining": "forever"}),
                ("free", {"resources": [1, 2]}),
                ("key", {"provider": "github"}),
                ("nosuchtool", {}),
            ]
            for name, arguments in bad:
                error = await server.fails(name, arguments, "USAGE")
                assert error["exit"] == 2
            error = await server.fails("acquire", {"resource": "a", "paths": ["/etc/**"]}, "USAGE")
            assert "paths" in error["message"] or "/etc" in error["message"]
            assert (await server.ok("list"))["claims"] == []  # nothing was acquired
            # `-` (the items from stdin, on the command line) would read the server's stdin,
            # which carries the protocol: refused, and the session goes on
            for name, arguments in (
                ("free", {"resources": ["-"]}),
                ("key", {"provider": "github", "items": ["-"]}),
                ("acquire", {"first_free": ["-"]}),
            ):
                error = await server.fails(name, arguments, "USAGE")
                assert "standard input" in error["message"], error
            assert (await server.ok("list"))["claims"] == []
            # a value is never read as an option: this is a resource's name
            stolen = tmp_path / "stolen"
            got = await server.ok("acquire", {"resource": f"--receipt={stolen}"})
            assert got["resource"] == f"--receipt={stolen}" and not stolen.exists()
            await server.ok("release", {"resource": got["resource"]})
            assert_no_token(server)

    run(scenario)


def test_an_agents_whole_loop(worktrees: tuple[Path, Path], tmp_path: Path):
    """Select from the backlog, work, check before the durable write, release with a
    checkpoint; then the session dies holding the next claim: it expires, never released,
    and the commit hook refuses the lapsed worktree."""
    a, b = worktrees
    assert run_cli("hooks", "install", cwd=a).code == 0
    backlog = ["task/1", "task/2", "task/3"]
    assert run_cli("acquire", "task/1", cwd=b).code == 0  # another agent's

    async def scenario() -> dict[str, Any]:
        async with mcp_server(a, tmp_path) as agent:
            free = (await agent.ok("free", {"resources": backlog}))["claims"]
            mine = await agent.ok("acquire", {"first_free": [c["resource"] for c in free]})
            assert mine["resource"] == "task/2"  # task/1 is held: passed over
            (a / "work.txt").write_text("task 2 done\n")
            git("add", "work.txt", cwd=a)
            await agent.ok("check", {"min_remaining": "1m"})  # (the worktree's own claim)
            git("commit", "-qm", "task 2", cwd=a)
            sha = git("rev-parse", "HEAD", cwd=a).stdout.strip()
            done = await agent.ok("release", {"resource": "task/2", "checkpoint": sha})
            assert done["checkpoint"] == sha
            backlog.remove("task/2")  # (the backlog itself says it is done)
            nxt = await agent.ok("acquire", {"first_free": backlog, "ttl": "2s"})
            assert nxt["resource"] == "task/3"
            assert_no_token(agent)
            return nxt

    nxt = anyio.run(scenario)
    # the session ended (stdin closed) holding task/3: left to expire, never released
    states: list[str] = []

    def expired() -> bool:
        doc = cli_json("show", "task/3", cwd=a)
        states.append(doc["state"])
        assert doc["claim_id"] == nxt["claim_id"]
        return doc["state"] == "expired"

    wait_for(expired, PATIENCE, "task/3 to expire")
    assert set(states) <= {"active", "expired"}, states
    (a / "late.txt").write_text("too late\n")
    git("add", "late.txt", cwd=a)
    refused = git("commit", "-qm", "late", cwd=a, check=False)
    assert refused.returncode != 0 and "task/3" in refused.stderr
    assert (
        cli_json("show", "task/2", cwd=a)["checkpoint"]
        == git("rev-parse", "HEAD", cwd=a).stdout.strip()
    )


def test_without_the_sdk_it_says_how_to_install_it(repo: Path):
    boot = (
        "import sys; sys.modules['mcp'] = None; sys.argv[0] = 'gitlease'; "
        "from gitlease.cli import run; run()"
    )
    import subprocess

    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [sys.executable, "-c", boot, "mcp", *extra],
            cwd=repo,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert proc.returncode == 2, proc
        assert "Traceback" not in proc.stderr + proc.stdout
        said = json.loads(proc.stdout)["error"]["message"] if extra else proc.stderr
        assert "pip install 'gitlease[mcp]'" in said


def test_a_waiting_acquire_does_not_hold_up_other_calls(
    worktrees: tuple[Path, Path], tmp_path: Path
):
    """Calls run in threads of their own, each with its own stdout: while an `acquire` waits
    for a held resource, other calls answer their own documents; the release elsewhere then
    lets the waiting acquire take it."""
    a, b = worktrees
    assert run_cli("acquire", "wait/1", cwd=b).code == 0
    taken: dict[str, Any] = {}

    async def scenario() -> None:
        async with mcp_server(a, tmp_path) as server:

            async def waiter() -> None:
                taken.update(await server.ok("acquire", {"resource": "wait/1", "wait": "5m"}))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(waiter)
                for _ in range(3):  # answered while the acquire waits, each its own document
                    shown = await server.ok("show", {"resource": "wait/1"})
                    assert shown["resource"] == "wait/1" and shown["state"] == "active"
                    assert shown["owner"] == "test-agent" and not shown["bound"]
                    assert (await server.ok("list"))["claims"][0]["resource"] == "wait/1"
                assert not taken  # still waiting
                assert run_cli("release", "wait/1", cwd=b).code == 0
            assert taken["state"] == "active" and taken["bound"] is True
            await server.ok("release", {"resource": "wait/1"})
            assert_no_token(server)

    run(scenario)


def test_path_scopes_through_the_tools(worktrees: tuple[Path, Path], tmp_path: Path):
    """``acquire`` with ``paths`` reserves files; another session's overlapping scope is a
    HELD tool error naming the claim and the overlap; ``who`` names the holder of a path."""
    a, b = worktrees

    async def scenario() -> None:
        async with mcp_server(a, tmp_path, "a") as one, mcp_server(b, tmp_path, "b") as two:
            got = await one.ok("acquire", {"resource": "auth/1", "paths": ["src/auth/**"]})
            assert got["paths"] == ["src/auth/**"]
            held = await two.fails(
                "acquire", {"resource": "auth/2", "paths": ["src/auth/login.py"]}, "HELD"
            )
            assert held["exit"] == 3 and "src/auth/**" in held["message"]
            free = await two.ok("acquire", {"resource": "docs/1", "paths": ["docs/**"]})
            assert free["paths"] == ["docs/**"]
            who = await two.ok("who", {"paths": ["src/auth/login.py", "README.md"]})
            assert timeless(who) == timeless(
                cli_json("who", "src/auth/login.py", "README.md", cwd=b)
            )
            (login, readme) = who["paths"]
            assert [c["claim_id"] for c in login["claims"]] == [got["claim_id"]]
            assert readme["claims"] == []
            await one.ok("release", {"resource": "auth/1"})
            await two.ok("release", {"resource": "docs/1"})
            assert_no_token(one, two)

    run(scenario)


def test_a_change_of_store_in_the_middle_of_a_session_is_followed(repo: Path, tmp_path: Path):
    """The server keeps the store its calls opened (gitlease/mcp/warm.py) only while the
    configuration that chose it is unchanged: after `git config gitlease.store` names
    another, its next acquire is granted there, where the command line decides too, and
    never in the store it used before."""
    other = tmp_path / "other.git"
    git("init", "-q", "--bare", str(other), cwd=tmp_path)

    async def scenario() -> None:
        async with mcp_server(repo, tmp_path) as server:
            before = await server.ok("acquire", {"resource": "moved/1"})
            await server.ok("show", {"resource": "moved/1"})  # (a second call: kept)
            git("config", "gitlease.store", str(other), cwd=repo)
            after = await server.ok("acquire", {"resource": "moved/2"})
            assert cli_json("show", "moved/2", cwd=repo)["claim_id"] == after["claim_id"]
            assert cli_json("where", cwd=repo)["store"] == str(other.resolve())
            shown = await server.ok("show", {"resource": "moved/1"})
            assert shown["state"] == "free"  # moved/1 is in the old store, not this one
            git("config", "--unset", "gitlease.store", cwd=repo)
            back = await server.ok("show", {"resource": "moved/1"})
            assert back["claim_id"] == before["claim_id"] and back["state"] == "active"
            assert cli_json("show", "moved/2", cwd=repo)["state"] == "free"
            assert_no_token(server)

    run(scenario)
