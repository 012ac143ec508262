#!/usr/bin/env python3
"""6. Contention: N processes hammering one resource, then N resources, for a few seconds,
for N in each of ``--processes`` (8 and 32 by default).

Prints operations per second, every outcome (anything but success or HELD is a failure, and
a release must never fail: it writes the caller's own claim), and the latency of each call,
p50 and p99, of acquire tries and of releases apart.

    python bench/contention.py [--seconds 10] [--processes 8,32]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from collections import Counter

from common import load_line, make_repo


def worker(repo: str, resources: list[str], seconds: float, out) -> None:
    os.chdir(repo)
    from gitlease.api import lease
    from gitlease.errors import GitleaseError
    from gitlease.store.location import open_store

    store = open_store()
    counts: Counter[str] = Counter()
    took: dict[str, list[float]] = {"acquire": [], "release": []}
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        resource = resources[i % len(resources)]
        i += 1
        receipt = f"{repo}/../r-{os.getpid()}.json"
        step = "acquire"
        start = time.perf_counter()
        try:
            lease.acquire(store, resource, ttl="1m", bind=False, receipt=receipt)
            took["acquire"].append(time.perf_counter() - start)
            counts["acquired"] += 1
            step = "release"
            start = time.perf_counter()
            lease.release(store, resource, receipt=receipt)
            took["release"].append(time.perf_counter() - start)
            counts["released"] += 1
        except GitleaseError as exc:
            took[step].append(time.perf_counter() - start)
            counts[exc.code if step == "acquire" else f"release {exc.code}"] += 1
    out.put((counts, took))


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--processes", default="8,32")
    args = parser.parse_args()
    for n in [int(x) for x in args.processes.split(",")]:
        run(n, args.seconds)


def run(processes: int, seconds: float) -> None:
    ctx = multiprocessing.get_context("fork")
    print(f"6. contention, {processes} processes;", load_line())
    for label, resources in (
        ("one resource", ["hot/0"]),
        (f"{processes} resources", [f"hot/{i}" for i in range(processes)]),
    ):
        repo = str(make_repo())
        out = ctx.Queue()
        procs = [
            ctx.Process(target=worker, args=(repo, resources[i:] + resources[:i], seconds, out))
            for i in range(processes)
        ]
        for p in procs:
            p.start()
        total: Counter[str] = Counter()
        took: dict[str, list[float]] = {"acquire": [], "release": []}
        for _ in procs:
            counts, times = out.get()
            total.update(counts)
            for k, v in times.items():
                took[k].extend(v)
        for p in procs:
            p.join()
        ops = sum(total.values())
        bad = {k: v for k, v in total.items() if k not in ("acquired", "released", "HELD")}
        print(
            f"{label:<14} {processes} processes: {ops / seconds:8.1f} ops/s, "
            f"{total['acquired'] / seconds:7.1f} grants/s  outcomes {dict(total)}  "
            + (f"UNEXPECTED {bad}" if bad else "only success/HELD")
        )
        for step, values in took.items():
            print(
                f"    {step:<8} n={len(values):<6} p50 {_pct(values, 0.5):8.2f} ms   "
                f"p99 {_pct(values, 0.99):8.2f} ms   max {_pct(values, 1.0):8.2f} ms"
            )


if __name__ == "__main__":
    main()
