#!/usr/bin/env python3
"""A/B: another gitlease source tree (A) against this one (B), taking turns, in one run.

    git archive main gitlease | tar -x -C /tmp/gitlease-main
    python bench/ab.py /tmp/gitlease-main [--repeat 15]

A runs with ``PYTHONPATH`` pointing at the other tree, B as installed; both use this
interpreter and its packages, each in repositories of its own (receipt layouts may differ).
Compares `show`, `check`, the commit check's process, `acquire` / `heartbeat` / `release`,
`list --json` of 10,000 claims (warm) and the library's acquire + release cycle (wall and CPU).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ENV, PYTHON, load_line, make_repo, populate

FLOOR = "import pygit2, click; from cryptography.hazmat.primitives.asymmetric import ed25519"
CYCLE = """
import sys, time, itertools, statistics
sys.path.insert(0, sys.argv[2])
from common import make_repo
import gitlease
from gitlease.store.location import open_store
repo = make_repo(); store = open_store(cwd=repo); count = itertools.count()
def cycle():
    resource = f"bench/{next(count) % 50}"
    gitlease.acquire(store, resource, ttl="5m", bind=False); gitlease.release(store, resource)
for _ in range(60):
    cycle()
wall, cpu = [], []
for _ in range(int(sys.argv[1])):
    t, c = time.perf_counter(), time.process_time(); cycle()
    wall.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
print(statistics.median(wall), statistics.median(cpu))
"""


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True)
    if result.returncode != 0:
        raise SystemExit(f"{args}: {result.stderr.decode()[:300]}")
    return time.perf_counter() - start


def line(name: str, samples: list[float], base: float | None = None, unit: str = "") -> None:
    med = statistics.median(samples) * 1000
    ratio = f"  {med / base:.2f}x {unit}" if base else ""
    print(f"{name:28s} median {med:8.1f} ms{ratio}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", help="a directory holding another tree's gitlease/ package")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    n = args.repeat
    envs = {"A": dict(ENV, PYTHONPATH=str(Path(args.other).resolve())), "B": dict(ENV)}
    print("A/B:", load_line())
    repos = {k: make_repo() for k in envs}
    gl = [PYTHON, "-m", "gitlease"]
    for k, env in envs.items():
        timed([*gl, "acquire", "ab/1", "--ttl", "1h"], repos[k], env)
    out: dict[str, list[float]] = {}
    counter = itertools.count()
    for i in range(n + 1):
        row = {"python -c pass": timed([PYTHON, "-c", "pass"], repos["A"], envs["A"])}
        row["import floor"] = timed([PYTHON, "-c", FLOOR], repos["A"], envs["A"])
        resource = f"ab/w{next(counter)}"
        for k, env in envs.items():
            repo = repos[k]
            row[f"show {k}"] = timed([*gl, "show", "ab/1"], repo, env)
            row[f"check {k}"] = timed([*gl, "check", "ab/1"], repo, env)
            row[f"commit check {k}"] = timed([PYTHON, "-m", "gitlease.hookcheck"], repo, env)
            row[f"acquire {k}"] = timed([*gl, "acquire", resource, "--no-bind"], repo, env)
            row[f"heartbeat {k}"] = timed([*gl, "heartbeat", resource], repo, env)
            row[f"release {k}"] = timed([*gl, "release", resource], repo, env)
        if i:  # round 0 warms up
            for key, value in row.items():
                out.setdefault(key, []).append(value)
    bare = statistics.median(out["python -c pass"]) * 1000
    floor = statistics.median(out["import floor"]) * 1000
    line("python -c pass", out["python -c pass"])
    line("import floor", out["import floor"])
    for name in ("show", "check", "commit check"):
        for k in envs:
            line(f"{name} {k}", out[f"{name} {k}"], bare, "python -c pass")
    for name in ("acquire", "heartbeat", "release"):
        for k in envs:
            line(f"{name} {k}", out[f"{name} {k}"], floor, "import floor")
    big = {k: make_repo() for k in envs}
    for repo in big.values():
        populate(repo, 10_000)
    lists: dict[str, list[float]] = {k: [] for k in envs}
    for k, env in envs.items():
        timed([*gl, "list", "--json"], big[k], env)  # B: fills its cache (warm)
    for _ in range(max(3, n // 3)):
        for k, env in envs.items():
            lists[k].append(timed([*gl, "list", "--json"], big[k], env))
    for k in envs:
        line(f"list --json 10,000 {k}", lists[k])
    cycles: dict[str, list[tuple[float, float]]] = {k: [] for k in envs}
    here = str(Path(__file__).resolve().parent)
    for _ in range(6):
        for k, env in envs.items():
            got = subprocess.run(
                [PYTHON, "-c", CYCLE, "50", here], env=env, capture_output=True, text=True
            )
            cycles[k].append(tuple(map(float, got.stdout.split())))  # type: ignore[arg-type]
    for k in envs:
        wall = statistics.median(c[0] for c in cycles[k]) * 1000
        cpu = statistics.median(c[1] for c in cycles[k]) * 1000
        print(f"library cycle {k:14s} median {wall:8.2f} ms wall, {cpu:.2f} ms CPU")
    print("A/B:", load_line())


if __name__ == "__main__":
    sys.exit(main())
