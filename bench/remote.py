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
transport: the writes a second (each acquire or release is one push; a cycle is
two) through the CLI (a process a command), through the library in one
resident process each, and through a resident ``gitlease mcp`` each (the SDK's
client), beside bare ``git push --force-with-lease`` a second from as many
workers, the four kinds taking turns window by window (``--rounds``); with the
CPU a write costs its client (the worker, its processes, its server). The
ratios are bare pushes a second over writes a second: 1.0x is a write that
costs no more than a bare push. ``--other TREE``: another gitlease source tree
(``git archive main gitlease | tar -x -C TREE``) runs its own CLI, library and
server workers in the same rounds, as rows "A" beside this tree's "B".

``--profile``: where a CLI write's CPU goes, per transport, beside a bare push
and the import floor (pygit2, click, cryptography) of the same rounds.

    python bench/remote.py [--repeat 30]
    python bench/remote.py --throughput 5 [--rounds 3] [--workers 4,16] [--only file://,ssh]
    python bench/remote.py --profile [--repeat 10]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import ENV, GITLEASE, load_line, make_repo, report

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


TICK = os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """This process's CPU and its waited-for children's (the CLI processes, git's)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def process_cpu(pid: int) -> float:
    """CPU of process ``pid`` with the children it waited for (a server's git processes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICK


class Window:
    """One worker's windows: it waits for each round's start (a file naming a time on the
    wall clock, shared by every worker of its kind), then counts the writes that end inside
    the window and the CPU spent until the last of them ended."""

    def __init__(self, out: Path, go: Path, seconds: float, cpu: Any) -> None:
        self.out, self.go, self.seconds, self.cpu = out, go, seconds, cpu
        self.round = 0
        self.writes = 0
        self.end = 0.0
        self._cpu_start = self._cpu_last = 0.0
        out.with_suffix(".ready").touch()

    def start(self) -> bool:
        """Wait for the next round: False when there is none (the coordinator said stop)."""
        go = self.go.with_name(f"{self.go.name}-{self.round}")
        while not go.exists():
            time.sleep(0.005)
        text = go.read_text()
        if text == "stop":
            return False
        start_at = float(text)
        while time.time() < start_at:
            time.sleep(0.002)
        self.writes, self.end = 0, start_at + self.seconds
        self._cpu_start = self._cpu_last = self.cpu()
        return True

    def running(self) -> bool:
        return time.time() < self.end

    def wrote(self) -> None:
        """A write ended: it counts if it ended inside the window."""
        if time.time() <= self.end:
            self.writes += 1
            self._cpu_last = self.cpu()

    def finish(self) -> None:
        tally = {"writes": self.writes, "cpu": self._cpu_last - self._cpu_start}
        _say(self.out.with_name(f"{self.out.name}-{self.round}"), json.dumps(tally))
        self.round += 1


def worker(kind: str, repo: Path, url: str, seconds: float, out: Path, go: Path) -> None:
    """One worker: in each of its windows, bare pushes, or acquires and releases through the
    CLI or the library, one resource a worker."""
    resource_name = f"tp/{repo.name}"
    ref = f"refs/worklease/_floor/{repo.name}"
    expected = ""
    pushes = 0
    store = open_in(repo, url) if kind == "library" else None
    window = Window(out, go, seconds, own_cpu)
    while window.start():
        while window.running():
            if kind == "push":
                pushes += 1
                blob = subprocess.run(
                    ["git", "hash-object", "-w", "--stdin"], cwd=repo, env=ENV,
                    input=f"{ref} {pushes}\n", text=True, capture_output=True, check=True,
                ).stdout.strip()  # fmt: skip
                lease = f"--force-with-lease={ref}:{expected}"
                subprocess.run(["git", "push", "-q", "--atomic", "origin", lease,
                                f"{blob}:{ref}"], cwd=repo, env=ENV, check=True,
                               capture_output=True)  # fmt: skip
                expected = blob
                window.wrote()
                continue
            for verb in ("acquire", "release"):
                if kind == "cli":
                    args = (verb, resource_name, *(("--ttl", "5m") if verb == "acquire" else ()))
                    subprocess.run([*GITLEASE, *args], cwd=repo, env=ENV, check=True,
                                   capture_output=True)  # fmt: skip
                else:
                    from gitlease.api import lease

                    if verb == "acquire":
                        lease.acquire(store, resource_name, ttl="5m", bind=False)  # type: ignore[arg-type]
                    else:
                        lease.release(store, resource_name)  # type: ignore[arg-type]
                window.wrote()
        window.finish()


def mcp_worker(repo: Path, url: str, seconds: float, out: Path, go: Path) -> None:
    """As :func:`worker`, through a resident ``gitlease mcp`` in ``repo`` (the SDK's client);
    the CPU is the client's and the server's (with its git processes)."""
    import anyio

    here = Path(__file__).resolve().parent  # bench/mcp.py would shadow the SDK
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def run() -> None:
        pidfile = out.with_suffix(".pid")
        params = StdioServerParameters(
            command="/bin/sh",
            args=["-c", f'echo $$ > "{pidfile}"; exec "{sys.executable}" -m gitlease mcp'],
            cwd=str(repo),
            env={**ENV, "GITLEASE_REMOTE": url},
        )
        resource_name = f"tp/{repo.name}/{os.getpid()}"
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                for name in ("acquire", "release"):  # warm: the first call opens the store
                    await session.call_tool(name, {"resource": resource_name})
                server = int(pidfile.read_text())
                window = Window(out, go, seconds, lambda: own_cpu() + process_cpu(server))
                while await anyio.to_thread.run_sync(window.start):
                    while window.running():
                        for name in ("acquire", "release"):
                            result = await session.call_tool(name, {"resource": resource_name})
                            if result.is_error:
                                raise SystemExit(f"{name}: {result.content}")
                            window.wrote()
                    window.finish()

    anyio.run(run)


KINDS = ("push", "cli", "library", "mcp")
#: With ``--other TREE``: the same three kinds again, running that gitlease source tree (A).
OTHER = ("cli@A", "library@A", "mcp@A")


def throughput(
    found: dict[str, tuple],
    base: Path,
    seconds: float,
    counts: list[int],
    rounds: int,
    other: str | None = None,
) -> None:
    """Rates through one server: bare pushes, and the writes of acquire + release cycles
    through the CLI, the library and ``gitlease mcp``, on the same transport, the kinds
    taking turns window by window (``rounds`` windows each, so that the machine's other
    load hits them alike); with the CPU a write costs the client (each worker's, with its
    children's). ``other``: another gitlease source tree, whose CLI, library and server take
    their turns too (rows "A"; this tree's are "B")."""
    kinds = KINDS + (OTHER if other else ())
    print(f"throughput through one server, {rounds} windows of {seconds:g} s per figure, the "
          "kinds taking turns, workers in clones of their own;", load_line())  # fmt: skip
    print("a write is one acquire or release (one push); a cycle is two writes")
    print(f"{'transport':<20} {'workers':>7} {'push/s':>7} {'CLI w/s':>8} {'lib w/s':>8} "
          f"{'mcp w/s':>8} {'push/CLI':>9} {'push/lib':>9} {'push/mcp':>9}   "
          f"CPU a write (ms): push CLI lib mcp")  # fmt: skip
    rows = []
    for t, (name, (url, ssh)) in enumerate(found.items()):
        for w in counts:
            procs: list[subprocess.Popen[bytes]] = []
            outs: dict[str, list[Path]] = {k: [] for k in kinds}
            with contextlib.ExitStack() as stack:
                for kind in kinds:
                    tag = kind.replace("@", "-")
                    env = {**ENV, "PYTHONPATH": other} if kind.endswith("@A") and other else ENV
                    for i in range(w):
                        repo = clone(url, base / f"tp-{t}-{w}-{tag}-{i}", ssh, remote=url)
                        out = repo.with_name(repo.name + ".count")
                        outs[kind].append(out)
                        procs.append(subprocess.Popen(
                            [sys.executable, __file__, "--worker", kind.split("@")[0],
                             str(repo), url, str(seconds), str(out),
                             str(base / f"go-{t}-{w}-{tag}")], env=env))  # fmt: skip
                        stack.callback(_stop, procs[-1])  # (on a failure: none left behind)
                rates, cpu = _rounds(base / f"go-{t}-{w}", procs, outs, seconds, rounds)
            for tree in ("", "@A") if other else ("",):
                r = {k: rates[k + tree] if k != "push" else rates[k] for k in KINDS}
                c = {k: cpu[k + tree] if k != "push" else cpu[k] for k in KINDS}
                label = name + (" (A)" if tree else " (B)" if other else "")
                rows.append((label, w, r, c))
                shown = " ".join(_ms(c[k]) for k in KINDS)
                print(f"{label:<20} {w:>7} {r['push']:>7.1f} {r['cli']:>8.2f} "
                      f"{r['library']:>8.2f} {r['mcp']:>8.2f} "
                      f"{_per(r, 'cli'):>9} {_per(r, 'library'):>9} "
                      f"{_per(r, 'mcp'):>9}   {shown}", flush=True)  # fmt: skip
    print("\n| transport | workers | bare push/s | CLI writes/s | library writes/s "
          "| `gitlease mcp` writes/s | push/CLI | push/library | push/mcp "
          "| CPU a write: push, CLI, library, mcp |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, w, r, c in rows:
        shown = ", ".join(_ms(c[k]) for k in KINDS)
        print(f"| {name} | {w} | {r['push']:.1f} | {r['cli']:.2f} | {r['library']:.2f} | "
              f"{r['mcp']:.2f} | {_per(r, 'cli')} | {_per(r, 'library')} | {_per(r, 'mcp')} "
              f"| {shown} ms |")  # fmt: skip


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
    proc.wait()


def _rounds(
    go: Path,
    procs: list[subprocess.Popen[bytes]],
    outs: dict[str, list[Path]],
    seconds: float,
    rounds: int,
) -> tuple[dict[str, float], dict[str, float | None]]:
    """Every worker ready, then ``rounds`` windows of each kind in turn: the writes a second
    of each kind, and the CPU a write."""

    def wait(paths: list[Path], what: str) -> None:
        while not all(p.exists() for p in paths):
            if any(p.poll() not in (None, 0) for p in procs):
                raise SystemExit(f"a worker failed ({what})")
            time.sleep(0.02)

    wait([o.with_suffix(".ready") for kind in outs for o in outs[kind]], "starting")
    writes = {k: 0 for k in outs}
    spent = {k: 0.0 for k in outs}
    for r in range(rounds):
        for kind in outs:
            tag = kind.replace("@", "-")
            _say(go.with_name(f"{go.name}-{tag}-{r}"), str(time.time() + 0.2))  # together
            tallies = [o.with_name(f"{o.name}-{r}") for o in outs[kind]]
            wait(tallies, kind)
            for tally in tallies:
                got = json.loads(tally.read_text())
                writes[kind] += got["writes"]
                spent[kind] += got["cpu"]
    for kind in outs:
        _say(go.with_name(f"{go.name}-{kind.replace('@', '-')}-{rounds}"), "stop")
    for proc in procs:
        if proc.wait() != 0:
            raise SystemExit("a worker failed")
    rates = {k: writes[k] / (seconds * rounds) for k in outs}
    return rates, {k: spent[k] / writes[k] if writes[k] else None for k in outs}


def _say(path: Path, text: str) -> None:
    """Write a file whole, or not at all (a worker polls for it)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _per(rates: dict[str, float], kind: str) -> str:
    """Bare pushes a second over writes a second (each write is one push): 1.0x is a write
    that costs no more than a bare push."""
    return f"{rates['push'] / rates[kind]:.1f}x" if rates[kind] else "-"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


FLOOR_IMPORTS = (
    "import pygit2, click; from cryptography.hazmat.primitives.asymmetric import ed25519"
)
PARTS = Path(__file__).resolve().parent / "parts.py"


def profile(found: dict[str, tuple], base: Path, n: int) -> None:
    """Where a CLI write's CPU goes, per transport, against a bare push of the same transport
    in the same rounds: the interpreter's start, the imports (and the import floor: pygit2,
    click, cryptography), gitlease's own Python, the push, other git processes."""
    print("where a CLI write's CPU goes (client side: the process and its children);",
          load_line())  # fmt: skip
    for t, (name, (url, ssh)) in enumerate(found.items()):
        repo = clone(url, base / f"prof-{t}", ssh, remote=url)
        floor = Floor(clone(url, base / f"prof-floor-{t}", ssh))
        out = base / f"prof-{t}.json"
        samples: dict[str, list[float]] = {"pass": [], "floor": [], "push": []}
        parts: dict[str, list[dict[str, float]]] = {"acquire": [], "release": []}
        for i in range(n + 1):
            for key, args in (("pass", ["-c", "pass"]), ("floor", ["-c", FLOOR_IMPORTS])):
                cpu = own_cpu()
                subprocess.run([sys.executable, *args], env=ENV, check=True)
                if i:
                    samples[key].append(own_cpu() - cpu)
            for verb in ("acquire", "release"):
                args = [verb, f"prof/{i}", *(("--ttl", "5m") if verb == "acquire" else ())]
                before = own_cpu()
                subprocess.run([sys.executable, str(PARTS), str(out), "gitlease", *args],
                               cwd=repo, env=ENV, check=True, capture_output=True)  # fmt: skip
                got = json.loads(out.read_text())
                got["whole"] = own_cpu() - before
                if i:
                    parts[verb].append(got)
            if i:
                samples["push"].append(_push_cpu(floor, i))
        med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
        print(f"{name}: python -c pass {med['pass']:.0f} ms, import floor {med['floor']:.0f} "
              f"ms, bare push {med['push']:.0f} ms")  # fmt: skip
        for verb, runs in parts.items():
            m = {k: statistics.median(r[k] for r in runs) * 1000 for k in runs[0]}
            own = m["cpu"] - m["cpu_start"] - m["cpu_imports"]
            other = statistics.median(r["git_calls"] - r["pushes"] for r in runs)
            rest = m["whole"] - m["cpu"] - m["cpu_push"] - m["cpu_git"]
            print(f"  gitlease {verb:<8} {m['whole']:4.0f} ms = interpreter {m['cpu_start']:.0f}"
                  f" + imports {m['cpu_imports']:.0f} + gitlease's Python {own:.0f} + push "
                  f"{m['cpu_push']:.0f} + {other:g} other git {m['cpu_git']:.0f} + exit "
                  f"{rest:.0f}: {m['whole'] / med['push']:.1f}x a bare push",
                  flush=True)  # fmt: skip
        floor_x = (med["floor"] + med["push"]) / med["push"]
        print(f"  the floor of a process a write (the import floor, then a bare push): "
              f"{floor_x:.1f}x a bare push")  # fmt: skip


def _push_cpu(floor: Floor, i: int) -> float:
    """One more bare push of the floor's ref (hash-object and push --force-with-lease): its
    CPU, client side."""
    cpu = own_cpu()
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=floor.repo, env=ENV,
        input=f"{floor.ref} p{i}\n", text=True, capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    lease = f"--force-with-lease={floor.ref}:{floor.expected}"
    subprocess.run(["git", "push", "-q", "--atomic", "origin", lease, f"{blob}:{floor.ref}"],
                   cwd=floor.repo, env=ENV, check=True)  # fmt: skip
    floor.expected = blob
    return own_cpu() - cpu


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
    parser.add_argument("--rounds", type=int, default=3, help="windows per figure (--throughput)")
    parser.add_argument(
        "--other",
        default=None,
        metavar="TREE",
        help="another gitlease source tree, measured in the same rounds (A)",
    )
    parser.add_argument("--only", default="", help="transports to keep, comma-separated")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="where a CLI write's CPU goes, per transport (--repeat rounds)",
    )
    options = parser.parse_args()
    n = options.repeat
    seed = make_repo()
    base = seed.parent
    with contextlib.ExitStack() as stack:
        found = transports(stack, base, seed)
        if options.only:
            keep = options.only.split(",")
            found = {k: v for k, v in found.items() if k in keep}
        if options.profile:
            profile(found, base, n)
        if options.throughput:
            counts = [int(c) for c in options.workers.split(",")]
            throughput(found, base, options.throughput, counts, options.rounds, options.other)
        if options.profile or options.throughput:
            return
        table = library(found, base, n)
        whole_process(found, base, n)
    markdown(table)


if __name__ == "__main__":
    main()
