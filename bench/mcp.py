#!/usr/bin/env python3
"""11. The cost of an acquire and a release through a resident `gitlease mcp`, in one run
beside the raw pygit2 cycle (two blob writes and two locked ref updates, fsynced as an
acquire is, and not), the bare library calls (`gitlease.api.lease.acquire` + `release` in
this process) and the CLI's `gitlease acquire` + `gitlease release` (two processes), in a
repository with gitlease's commit hooks installed.

The server is spawned once, as a harness does, and spoken to through the MCP SDK's own
stdio client; its calls run the CLI's own commands in its process (docs/design.md, the MCP
server), so it costs the library's work plus a command's parsing and the protocol's round
trip, without a process per command. Cases take turns round by round, so the machine's
noise hits them alike. Besides the wall time, the CPU time of each pair: this process's
own for the library and the raw cycles; the server's (with the git processes it ran) and
the client's for `gitlease mcp`; the two processes' (with theirs) for the CLI. Needs the
extra: pip install 'gitlease[mcp]'.

    python bench/mcp.py [--repeat 30] [--other TREE]

``--other TREE``: another gitlease source tree's server (``git archive main gitlease | tar
-x -C TREE``) takes its turn too, as "mcp A".
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

# This file's name is the SDK's: its folder leaves the path while the SDK is imported.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

sys.path.insert(0, str(HERE))
from common import ENV, GITLEASE, PYTHON, load_line, make_repo, report, store_of  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """Seconds of CPU of process ``pid`` and of the children it has waited for (the git
    processes a call runs), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + cutime + cstime) / TICK


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def raw_cycles(git_dir: Path) -> tuple[Any, Any]:
    """The floor of the design, in the store itself on refs of its own: two compare-and-swaps
    of a blob ref (a blob write, a locked ref update, twice); and the same with libgit2's
    fsync on (as gitlease's acquire writes, docs/reference/store.md, durability), on a
    handle opened with it on (the ref database reads the switch when it is made)."""
    import pygit2

    counter = itertools.count()
    plain = pygit2.Repository(str(git_dir))
    synced: list[Any] = []

    def cycle(handle: Any, prefix: str) -> None:
        ref = f"{prefix}{next(counter) % 50}"
        for payload in (b"held\n", b"released\n"):
            oid = handle.create_blob(payload + str(next(counter)).encode())
            with handle.transaction() as tx:
                tx.lock_ref(ref)
                current = handle.references.get(ref)
                _ = current.target if current is not None else None
                tx.set_target(ref, oid, message="raw")

    def raw() -> None:
        cycle(plain, "refs/raw/")

    def raw_synced() -> None:
        pygit2.settings.enable_fsync_gitdir(True)
        try:
            if not synced:
                synced.append(pygit2.Repository(str(git_dir)))
                synced[0].references.get("HEAD")
            cycle(synced[0], "refs/raw-synced/")
        finally:
            pygit2.settings.enable_fsync_gitdir(False)

    return raw, raw_synced


def _hooked(repo: Path) -> Path:
    """``repo`` with gitlease's commit hooks installed, as an agent's worktree has them: an
    acquire that binds looks at them (a repository without them answers from the folder's
    listing alone)."""
    import subprocess

    subprocess.run([*GITLEASE, "hooks", "install"], cwd=repo, env=ENV, check=True,
                   capture_output=True)  # fmt: skip
    return repo


async def bench(repeat: int, other: str | None) -> None:
    import subprocess

    repo = _hooked(make_repo())
    os.chdir(repo)
    from gitlease.api.lease import acquire, release
    from gitlease.store.location import open_store

    store = open_store()
    raw, raw_synced = raw_cycles(store_of(repo))

    def library() -> None:
        acquire(store, "bench/library", bind=True)
        release(store, "bench/library")

    def cli() -> None:
        for args in (("acquire", "bench/cli"), ("release", "bench/cli")):
            result = subprocess.run([*GITLEASE, *args], cwd=repo, env=ENV, capture_output=True)
            if result.returncode != 0:
                raise SystemExit(f"{args} exited {result.returncode}: {result.stderr!r}")

    servers = {"mcp": dict(ENV)}
    if other:  # the other tree's server, in a clone of its own (its receipts may differ)
        servers["mcp A"] = {**ENV, "PYTHONPATH": other}
    sessions: dict[str, tuple[ClientSession, int]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for name, env in servers.items():
            where = repo if name == "mcp" else _hooked(make_repo())
            pidfile = where.parent / "server.pid"
            params = StdioServerParameters(
                command="/bin/sh",
                args=["-c", f'echo $$ > "{pidfile}"; exec "{PYTHON}" -m gitlease mcp'],
                cwd=str(where),
                env=env,
            )
            errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions[name] = (session, int(pidfile.read_text()))

        async def server(session: ClientSession) -> None:
            for name, args in (
                ("acquire", {"resource": "bench/mcp"}),
                ("release", {"resource": "bench/mcp"}),
            ):
                result = await session.call_tool(name, args)
                if result.is_error:
                    raise SystemExit(f"{name}: {result.content}")

        async def pings() -> None:  # the protocol alone: two round trips, as a pair's calls
            for _ in range(2):
                await sessions["mcp"][0].send_ping()

        cases = ("raw", "synced", "library", "ping", *sessions, "cli")
        samples: dict[str, list[float]] = {k: [] for k in cases}
        cpu: dict[str, list[float]] = {k: [] for k in (*cases, "mcp client")}
        for i in range(repeat + 1):  # round 0 warms up
            for name in cases:
                start, own, kids = time.perf_counter(), time.process_time(), children_cpu()
                pid = sessions[name][1] if name in sessions else 0
                served = process_cpu(pid) if pid else 0.0
                if name in sessions:
                    await server(sessions[name][0])
                elif name == "ping":
                    await pings()
                else:
                    {"raw": raw, "synced": raw_synced, "library": library, "cli": cli}[name]()
                wall = time.perf_counter() - start
                if not i:
                    continue
                samples[name].append(wall)
                if name in sessions:
                    cpu[name].append(process_cpu(pid) - served)
                    if name == "mcp":
                        cpu["mcp client"].append(time.process_time() - own)
                elif name == "cli":
                    cpu["cli"].append(children_cpu() - kids)
                else:
                    cpu[name].append(time.process_time() - own)
    print("11. acquire + release, per pair;", load_line())
    report("raw pygit2 cycle (2 blobs, 2 ref CAS)", samples["raw"])
    report("raw cycle, fsynced by libgit2", samples["synced"], samples["raw"], "raw cycle")
    report("library: lease.acquire + release", samples["library"], samples["synced"],
           "fsynced raw cycle")  # fmt: skip
    report("two SDK round trips (ping) to the server", samples["ping"], samples["synced"],
           "fsynced raw cycle")  # fmt: skip
    report("resident gitlease mcp: acquire + release", samples["mcp"], samples["synced"],
           "fsynced raw cycle", goal=3.0)  # fmt: skip
    report("  the same", samples["mcp"], samples["library"], "the library")
    if "mcp A" in samples:
        report("the other tree's gitlease mcp (A)", samples["mcp A"], samples["synced"],
               "fsynced raw cycle", goal=3.0)  # fmt: skip
        report("  this tree's against A's", samples["mcp"], samples["mcp A"], "A")
    report("CLI: gitlease acquire + gitlease release", samples["cli"], samples["mcp"],
           "the resident server")  # fmt: skip
    # CPU (user + system): what a busy machine's waiting leaves out. The server's comes from
    # /proc in clock ticks (10 ms), so single samples are coarse: the means of many are not.
    print("  CPU per pair (means):")
    for name, label in (
        ("raw", "raw cycle"),
        ("synced", "fsynced raw cycle"),
        ("library", "library"),
        ("ping", "two pings (this process)"),
        ("mcp", "gitlease mcp server (with its git processes)"),
        ("mcp A", "the other tree's server (A)"),
        ("mcp client", "the SDK's client (this process)"),
        ("cli", "CLI, two processes (with theirs)"),
    ):
        if not cpu.get(name):
            continue
        mean = statistics.fmean(cpu[name]) * 1000
        ratio = mean / (statistics.fmean(cpu["synced"]) * 1000)
        print(f"    {label:<46} {mean:8.2f} ms  {ratio:6.2f}x fsynced raw cycle", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument(
        "--other",
        default=None,
        metavar="TREE",
        help="another gitlease source tree's server, in the same rounds (A)",
    )
    args = parser.parse_args()
    anyio.run(bench, args.repeat, args.other)


if __name__ == "__main__":
    main()
