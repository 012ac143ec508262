#!/usr/bin/env python3
"""The cost of an acquire and a release through a resident `gitlease mcp`, in one run beside
the CLI's `gitlease acquire` + `gitlease release` (two processes) and the bare library calls
(`gitlease.api.lease.acquire` + `release` in this process), the baseline.

The server is spawned once, as a harness does, and spoken to through the MCP SDK's own
stdio client; its calls run the CLI's own commands in its process (docs/design.md, the MCP
server), so it costs the library's work plus a command's parsing and the protocol's round
trip, without a process per command. Cases take turns round by round, so the machine's
noise hits them alike. Needs the extra: pip install 'gitlease[mcp]'.

    python bench/mcp.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

# This file's name is the SDK's: its folder leaves the path while the SDK is imported.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

sys.path.insert(0, str(HERE))
from common import ENV, GITLEASE, PYTHON, load_line, make_repo, report, run_process  # noqa: E402


async def bench(repeat: int) -> None:
    repo = make_repo()
    os.chdir(repo)
    from gitlease.api.lease import acquire, release
    from gitlease.store.location import open_store

    store = open_store()

    def library() -> None:
        acquire(store, "bench/library", bind=True)
        release(store, "bench/library")

    cli_acquire = run_process([*GITLEASE, "acquire", "bench/cli"], repo, check=True)
    cli_release = run_process([*GITLEASE, "release", "bench/cli"], repo, check=True)

    def cli() -> None:
        cli_acquire()
        cli_release()

    params = StdioServerParameters(
        command=PYTHON, args=["-m", "gitlease", "mcp"], cwd=str(repo), env=dict(ENV)
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def server() -> None:
                for name, args in (
                    ("acquire", {"resource": "bench/mcp"}),
                    ("release", {"resource": "bench/mcp"}),
                ):
                    result = await session.call_tool(name, args)
                    if result.is_error:
                        raise SystemExit(f"{name}: {result.content}")

            samples: dict[str, list[float]] = {"library": [], "cli": [], "mcp": []}
            for i in range(repeat + 1):  # round 0 warms up
                for name in samples:
                    start = time.perf_counter()
                    if name == "mcp":
                        await server()
                    else:
                        (library if name == "library" else cli)()
                    if i:
                        samples[name].append(time.perf_counter() - start)
    print("acquire + release, per pair;", load_line())
    report("library: lease.acquire + release", samples["library"])
    report(
        "resident gitlease mcp: acquire + release",
        samples["mcp"],
        samples["library"],
        "the library",
    )
    report(
        "CLI: gitlease acquire + gitlease release",
        samples["cli"],
        samples["library"],
        "the library",
    )
    speedup = statistics.median(samples["cli"]) / statistics.median(samples["mcp"])
    print(f"{'the CLI against the resident server':<44} {speedup:5.2f}x slower", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    anyio.run(bench, args.repeat)


if __name__ == "__main__":
    main()
