#!/usr/bin/env python3
"""7. Remote store: the latency of each operation through a git remote, against the local store.

One process, the library, three stores taking turns operation by operation:
the local store, a remote over ``file://`` and a remote served by ``git daemon``
on 127.0.0.1. The floor of the remote design is printed too: one bare ``git
fetch`` of ``refs/worklease/*`` and one bare ``git push --force-with-lease``.

    python bench/remote.py [--repeat 60]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from common import ENV, make_repo, report

OPS = ("acquire", "check", "heartbeat", "show", "release")


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


def clone(url: str, path: Path) -> Path:
    subprocess.run(["git", "clone", "-q", url, str(path)], env=ENV, check=True)
    return path


def open_in(path: Path, remote: str) -> object:
    """The store of the clone at ``path``, with its receipts in that clone (as an agent there)."""
    from gitlease.location import open_store

    os.chdir(path)
    return open_store(remote=remote)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=60)
    n = parser.parse_args().repeat

    from gitlease import lease, reads

    seed = make_repo()
    base = seed.parent
    server = base / "server.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(server)], env=ENV, check=True)
    with git_daemon(base) as daemon:
        stores = {
            "local": open_in(clone(server.as_uri(), base / "local"), ""),
            "file://": open_in(clone(server.as_uri(), base / "file"), "origin"),
            "git daemon": open_in(clone(f"{daemon}/server.git", base / "d"), "origin"),
        }
        samples = {(name, op): [] for name in stores for op in OPS}
        floor = {"git fetch": [], "git push --force-with-lease": []}
        counter = itertools.count()
        floor_repo = clone(f"{daemon}/server.git", base / "floor")
        expected = ""
        for i in range(n + 1):  # the first round warms up
            for name, store in stores.items():
                resource = f"bench/{name}/{next(counter) % 20}"
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
            blob = subprocess.run(
                ["git", "hash-object", "-w", "--stdin"],
                cwd=floor_repo, env=ENV, input=f"{i}\n", text=True, capture_output=True,
            ).stdout.strip()  # fmt: skip
            lease_arg = f"--force-with-lease=refs/floor/x:{expected}"
            for what, args in (
                ("git fetch", ["fetch", "-q", "--no-tags", "origin", "+refs/floor/*:refs/floor/*"]),
                (
                    "git push --force-with-lease",
                    ["push", "-q", "--atomic", "origin", lease_arg, f"{blob}:refs/floor/x"],
                ),
            ):
                start = time.perf_counter()
                subprocess.run(["git", *args], cwd=floor_repo, env=ENV, check=True)
                if i:
                    floor[what].append(time.perf_counter() - start)
            expected = blob

    print("7. remote store: latency per operation, library, one process (stores take turns)")
    for what, values in floor.items():
        report(f"floor over git daemon: {what}", values)
    for op in OPS:
        local = samples[("local", op)]
        report(f"{op:<10} local store", local)
        for name in ("file://", "git daemon"):
            report(f"{op:<10} remote over {name}", samples[(name, op)], local, "local")


if __name__ == "__main__":
    main()
