#!/usr/bin/env python3
"""7. Remote store: the latency of each operation through a git remote, per transport.

One process, the library; the stores take turns operation by operation: the
local store, then a remote over ``file://``, ``git daemon``, ssh (the
distribution's sshd on 127.0.0.1), ssh sharing one connection
(``ControlMaster``), smart HTTP (lighttpd + ``git http-backend``) and gitolite3,
the servers started as the tests start them (``tests/support/servers.py``). Each
transport's floor is measured in the same rounds, on the same transport: one
bare ``git fetch`` of a ref namespace and one bare ``git push
--force-with-lease``. Then the whole process over ssh, as an agent runs it:
``gitlease acquire`` + ``gitlease release`` against two bare pushes, with and
without connection sharing.

A server that is not installed is left out, and named.

``--throughput SECONDS``: instead, the rate through one server from 4 and 16
workers (processes, each in its own clone, as on separate hosts), per
transport: acquire + release cycles a second through the CLI (two processes
each) and through the library in one resident process each (what ``gitlease
mcp`` runs), beside bare ``git push --force-with-lease`` a second from as many
workers in the same run, with where a CLI cycle's time goes (``--profile``).

    python bench/remote.py [--repeat 30]
    python bench/remote.py --throughput 10 [--workers 4,16]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from common import ENV, GITLEASE, make_repo, report

# conftest.py and the support modules, as pyproject.toml puts them on the path for pytest
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
import servers  # tests/support/servers.py: the same servers as the tests

OPS = ("acquire", "check", "heartbeat", "show", "release")
FLOOR_REFSPEC = "+refs/worklease/_floor/*:refs/floor/*"


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}"]
    args += [f"--base-path={base}", "--export-all", "--enable=receive-pack", str(base)]
    proc = subprocess.Popen(args, env=ENV, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait()


def clone(url: str, path: Path, ssh: str | None = None, remote: str | None = None) -> Path:
    """A clone of ``url`` with a store of its own (clones of one project on one host would
    share one, and the transports must not share a mirror); with ``ssh``, it talks to the
    remote with that ssh command; with ``remote``, the CLI there coordinates through it."""
    extra = ["-c", f"core.sshCommand={ssh}"] if ssh else []
    subprocess.run(["git", *extra, "clone", "-q", url, str(path)], env=ENV, check=True)
    store = path.with_name(path.name + "-store.git")
    subprocess.run(["git", "init", "-q", "--bare", str(store)], env=ENV, check=True)
    settings = {"gitlease.store": str(store)}
    if ssh:
        settings["core.sshCommand"] = ssh
    if remote:
        settings["gitlease.remote"] = remote
    # the store runs git fetch and push, and reads gitlease.remote: it needs them too
    for key, value in settings.items():
        for where in (["-C", str(path)], ["--git-dir", str(store)]):
            subprocess.run(["git", *where, "config", key, value], env=ENV, check=True)
    return path


def open_in(path: Path, remote: str) -> object:
    """The store of the clone at ``path``, with its receipts in that clone (as an agent there)."""
    from gitlease.store.location import open_store

    os.chdir(path)
    return open_store(remote=remote)


class Floor:
    """One bare fetch and one bare push --force-with-lease in a clone of its own."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        # every floor its own ref (some share a server), where gitolite's RW+ line allows it
        self.ref = f"refs/worklease/_floor/{repo.name}"
        self.expected = ""
        self.fetch: list[float] = []
        self.push: list[float] = []

    def run(self, i: int, keep: bool) -> None:
        blob = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=self.repo, env=ENV, input=f"{self.ref} {i}\n", text=True, capture_output=True,
        ).stdout.strip()  # fmt: skip
        lease = f"--force-with-lease={self.ref}:{self.expected}"
        for samples, args in (
            (self.fetch, ["fetch", "-q", "--no-tags", "origin", FLOOR_REFSPEC]),
            (self.push, ["push", "-q", "--atomic", "origin", lease, f"{blob}:{self.ref}"]),
        ):
            start = time.perf_counter()
            subprocess.run(["git", *args], cwd=self.repo, env=ENV, check=True)
            if keep:
                samples.append(time.perf_counter() - start)
        self.expected = blob


def transports(stack: contextlib.ExitStack, base: Path, seed: Path) -> dict[str, tuple]:
    """name -> (url, ssh command or None) of every transport that can be had here."""
    server = base / "server.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(server)], env=ENV, check=True)
    daemon = stack.enter_context(git_daemon(base))
    found: dict[str, tuple] = {
        "file://": (server.as_uri(), None),
        "git daemon": (f"{daemon}/server.git", None),
    }
    missing = [p for p in ("sshd", "ssh", "lighttpd", "gitolite") if servers.find(p) is None]
    if servers.find("sshd") and servers.find("ssh"):
        sshd = stack.enter_context(servers.started(servers.Sshd(base / "sshd")))
        plain = sshd.ssh_command(sshd.client_key("bench"))
        shared = sshd.ssh_command(
            sshd.client_key("bench-shared"),
            *("-o", "ControlMaster=auto", "-o", f"ControlPath={base}/cm-%C"),
            *("-o", "ControlPersist=60"),
        )
        stack.callback(
            subprocess.run,
            [*shared.split(" ")[:-2], "-O", "exit", "-p", str(sshd.port), f"{sshd.user}@127.0.0.1"],
            env=ENV,
            capture_output=True,
        )
        found["ssh"] = (sshd.url(str(server)), plain)
        found["ssh, ControlMaster"] = (sshd.url(str(server)), shared)
        if servers.find("gitolite"):
            gitolite = servers.Gitolite(base / "gitolite", sshd).start()
            found["gitolite (ssh)"] = (gitolite.url("open/bench"), sshd.ssh_command(
                gitolite.user_key("bench")))  # fmt: skip
    if servers.find("lighttpd"):
        http = stack.enter_context(servers.started(servers.Lighttpd(base / "http")))
        http.repo("server.git")
        found["smart HTTP"] = (http.url("server.git"), None)
    if missing:
        print(f"left out (not installed): {', '.join(missing)}")
    return found


def library(found: dict[str, tuple], base: Path, n: int) -> dict[str, dict[str, float]]:
    from gitlease.api import lease, reads

    stores = {"local": open_in(clone(next(iter(found.values()))[0], base / "local"), "")}
    floors: dict[str, Floor] = {}
    for k, (name, (url, ssh)) in enumerate(found.items()):
        stores[name] = open_in(clone(url, base / f"store-{k}", ssh), url)
        floors[name] = Floor(clone(url, base / f"floor-{k}", ssh))
    samples = {(name, op): [] for name in stores for op in OPS}
    counter = itertools.count()
    for i in range(n + 1):  # the first round warms up
        for name, store in stores.items():
            resource = f"bench/{name.split(' ')[0]}/{next(counter) % 20}"
            for op in OPS:
                start = time.perf_counter()
                if op == "acquire":
                    lease.acquire(store, resource, ttl="5m", bind=False)
                elif op == "show":
                    reads.show(store, resource)
                else:
                    getattr(lease, op)(store, resource)
                if i:
                    samples[(name, op)].append(time.perf_counter() - start)
        for floor in floors.values():
            floor.run(i, keep=i > 0)

    print("7. remote store: latency per operation, library, one process (stores take turns)")
    table: dict[str, dict[str, float]] = {}
    for name in stores:
        local = samples[("local", "acquire")] if name != "local" else None
        for op in OPS:
            report(f"{op:<10} {name}", samples[(name, op)], local, "local acquire")
        table[name] = {op: statistics.median(samples[(name, op)]) for op in OPS}
        if name in floors:
            report(f"floor      {name}: bare git fetch", floors[name].fetch)
            report(f"floor      {name}: bare git push", floors[name].push)
            table[name]["fetch"] = statistics.median(floors[name].fetch)
            table[name]["push"] = statistics.median(floors[name].push)
    return table


def whole_process(found: dict[str, tuple], base: Path, n: int) -> None:
    """The CLI over ssh: acquire + release, two processes, against two bare pushes."""
    for name in ("ssh", "ssh, ControlMaster"):
        if name not in found:
            continue
        url, ssh = found[name]
        # the URL, not "origin": the store of its own is another repository, without remotes
        repo = clone(url, base / f"cli-{name.split(',')[0]}-{len(name)}", ssh, remote=url)
        floor = Floor(clone(url, base / f"cli-floor-{len(name)}", ssh))
        cycle: list[float] = []
        where = subprocess.run([*GITLEASE, "where", "--json"], cwd=repo, env=ENV,
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert json.loads(where)["remote"], f"the CLI does not use the remote: {where}"
        for i in range(n + 1):
            start = time.perf_counter()
            for args in (("acquire", f"cli/{i}", "--ttl", "5m"), ("release", f"cli/{i}")):
                subprocess.run([*GITLEASE, *args], cwd=repo, env=ENV, check=True,
                               capture_output=True)  # fmt: skip
            if i:
                cycle.append(time.perf_counter() - start)
            floor.run(i, keep=i > 0)
            floor.run(i + 10_000, keep=False)
        pushes = [2 * p for p in floor.push]
        print(f"whole process over {name}")
        report("gitlease acquire + gitlease release", cycle, pushes, "2 bare pushes")
        report("2 bare git push --force-with-lease", pushes)


def markdown(table: dict[str, dict[str, float]]) -> None:
    print("\n| transport | acquire | heartbeat | release | check | show | bare push | bare fetch |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in table.items():
        cells = [row[k] for k in ("acquire", "heartbeat", "release", "check", "show")]
        cells += [row.get("push"), row.get("fetch")]
        shown = " | ".join("-" if c is None else f"{c * 1000:.0f} ms" for c in cells)
        print(f"| {name} | {shown} |")


def _ready_then_start(out: Path, go: Path) -> float:
    """Say this worker is ready (imports done, store open); wait for the common start."""
    out.with_suffix(".ready").touch()
    while not go.exists():
        time.sleep(0.005)
    start_at = float(go.read_text() or 0)
    while time.time() < start_at:
        time.sleep(0.002)
    return start_at


def worker(kind: str, repo: Path, url: str, seconds: float, out: Path, go: Path) -> None:
    """One worker's loop for ``seconds`` from the common start (on the wall clock, shared by
    all, once every worker is ready): bare pushes, CLI cycles or library cycles; writes how
    many it finished."""
    done = 0
    resource = f"tp/{repo.name}"
    ref = f"refs/worklease/_floor/{repo.name}"
    expected = ""
    store = open_in(repo, url) if kind == "library" else None
    end = _ready_then_start(out, go) + seconds
    while time.time() < end:
        if kind == "push":
            blob = subprocess.run(
                ["git", "hash-object", "-w", "--stdin"], cwd=repo, env=ENV,
                input=f"{ref} {done}\n", text=True, capture_output=True, check=True,
            ).stdout.strip()  # fmt: skip
            lease = f"--force-with-lease={ref}:{expected}"
            subprocess.run(["git", "push", "-q", "--atomic", "origin", lease, f"{blob}:{ref}"],
                           cwd=repo, env=ENV, check=True, capture_output=True)  # fmt: skip
            expected = blob
        elif kind == "cli":
            for args in (("acquire", resource, "--ttl", "5m"), ("release", resource)):
                subprocess.run([*GITLEASE, *args], cwd=repo, env=ENV, check=True,
                               capture_output=True)  # fmt: skip
        else:
            from gitlease.api import lease

            lease.acquire(store, resource, ttl="5m", bind=False)  # type: ignore[arg-type]
            lease.release(store, resource)  # type: ignore[arg-type]
        if time.time() <= end:  # (a cycle that ends after the window does not count)
            done += 1
    out.write_text(str(done))


def mcp_worker(repo: Path, url: str, seconds: float, out: Path, go: Path) -> None:
    """As :func:`worker`, through a resident ``gitlease mcp`` in ``repo`` (the SDK's client)."""
    import anyio

    here = Path(__file__).resolve().parent  # bench/mcp.py would shadow the SDK
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def run() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "gitlease", "mcp"],
            cwd=str(repo),
            env={**ENV, "GITLEASE_REMOTE": url},
        )
        done = 0
        resource = f"tp/{repo.name}/{os.getpid()}"
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                end = await anyio.to_thread.run_sync(_ready_then_start, out, go) + seconds
                while time.time() < end:
                    for name in ("acquire", "release"):
                        result = await session.call_tool(name, {"resource": resource})
                        if result.is_error:
                            raise SystemExit(f"{name}: {result.content}")
                    if time.time() <= end:
                        done += 1
        out.write_text(str(done))

    anyio.run(run)


def throughput(found: dict[str, tuple], base: Path, seconds: float, counts: list[int]) -> None:
    """Rates through one server: bare pushes, CLI cycles, library cycles, same transport."""
    print(f"throughput through one server, {seconds:g} s per figure, workers in own clones")
    print(f"{'transport':<20} {'workers':>7} {'bare push/s':>12} {'CLI cycle/s':>12} "
          f"{'library cycle/s':>16} {'mcp cycle/s':>12} {'push/CLI':>9} {'push/lib':>9} "
          f"{'push/mcp':>9}")  # fmt: skip
    rows = []
    for t, (name, (url, ssh)) in enumerate(found.items()):
        for w in counts:
            rates = {}
            for kind in ("push", "cli", "library", "mcp"):
                repos = [clone(url, base / f"tp-{t}-{w}-{kind}-{i}", ssh, remote=url)
                         for i in range(w)]  # fmt: skip
                go = base / f"go-{t}-{w}-{kind}"
                procs, outs = [], []
                for repo in repos:
                    out = repo.with_name(repo.name + ".count")
                    outs.append(out)
                    procs.append(subprocess.Popen(
                        [sys.executable, __file__, "--worker", kind, str(repo), url,
                         str(seconds), str(out), str(go)], env=ENV))  # fmt: skip
                while not all(o.with_suffix(".ready").exists() for o in outs):
                    if any(p.poll() not in (None, 0) for p in procs):
                        raise SystemExit(f"a {kind} worker failed")
                    time.sleep(0.02)
                go.write_text(str(time.time() + 0.2))  # every worker ready: start together
                for proc in procs:
                    proc.wait()
                rates[kind] = sum(int(o.read_text()) for o in outs) / seconds
            rows.append((name, w, rates))
            ratio = {k: rates["push"] / max(rates[k], 1e-9) for k in ("cli", "library", "mcp")}
            print(f"{name:<20} {w:>7} {rates['push']:>12.1f} {rates['cli']:>12.2f} "
                  f"{rates['library']:>16.2f} {rates['mcp']:>12.2f} {ratio['cli']:>8.1f}x "
                  f"{ratio['library']:>8.1f}x {ratio['mcp']:>8.1f}x", flush=True)  # fmt: skip
    print("\n| transport | workers | bare push/s | CLI cycles/s | library cycles/s "
          "| `gitlease mcp` cycles/s | push/CLI | push/library | push/mcp |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, w, r in rows:
        x = {k: r["push"] / max(r[k], 1e-9) for k in ("cli", "library", "mcp")}
        print(
            f"| {name} | {w} | {r['push']:.1f} | {r['cli']:.2f} | {r['library']:.2f} | "
            f"{r['mcp']:.2f} | {x['cli']:.1f}x | {x['library']:.1f}x | {x['mcp']:.1f}x |"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, repo, url, seconds, out, go = sys.argv[2:8]
        if kind == "mcp":
            mcp_worker(Path(repo), url, float(seconds), Path(out), Path(go))
        else:
            worker(kind, Path(repo), url, float(seconds), Path(out), Path(go))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--throughput", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--workers", default="4,16")
    parser.add_argument("--only", default="", help="transports to keep, comma-separated")
    options = parser.parse_args()
    n = options.repeat
    seed = make_repo()
    base = seed.parent
    with contextlib.ExitStack() as stack:
        found = transports(stack, base, seed)
        if options.only:
            keep = options.only.split(",")
            found = {k: v for k, v in found.items() if k in keep}
        if options.throughput:
            counts = [int(c) for c in options.workers.split(",")]
            throughput(found, base, options.throughput, counts)
            return
        table = library(found, base, n)
        whole_process(found, base, n)
    markdown(table)


if __name__ == "__main__":
    main()
