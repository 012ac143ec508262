#!/usr/bin/env python3
"""7. Remote store: the latency of each operation through a git remote, per transport.

One process, the library; the stores take turns operation by operation: the
local store, then a remote over ``file://``, ``git daemon``, ssh (the
distribution's sshd on 127.0.0.1), ssh sharing one connection
(``ControlMaster``), smart HTTP (lighttpd + ``git http-backend``) and gitolite3,
the servers started as the tests start them (``tests/servers.py``). Each
transport's floor is measured in the same rounds, on the same transport: one
bare ``git fetch`` of a ref namespace and one bare ``git push
--force-with-lease``. Then the whole process over ssh, as an agent runs it:
``gitlease acquire`` + ``gitlease release`` against two bare pushes, with and
without connection sharing.

A server that is not installed is left out, and named.

    python bench/remote.py [--repeat 30]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import servers  # tests/servers.py: the same servers as the tests

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    n = parser.parse_args().repeat
    seed = make_repo()
    base = seed.parent
    with contextlib.ExitStack() as stack:
        found = transports(stack, base, seed)
        table = library(found, base, n)
        whole_process(found, base, n)
    markdown(table)


if __name__ == "__main__":
    main()
