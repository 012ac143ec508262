#!/usr/bin/env python3
"""6. Contention: 8 processes hammering one resource, then 8 resources, for a few seconds.

Prints operations per second and every outcome; anything but success or HELD is a failure.

    python bench/contention.py [--seconds 10] [--processes 8]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from collections import Counter

from common import make_repo


def worker(repo: str, resources: list[str], seconds: float, out) -> None:
    os.chdir(repo)
    from gitlease.api import lease
    from gitlease.errors import GitleaseError
    from gitlease.store.location import open_store

    store = open_store()
    counts: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        resource = resources[i % len(resources)]
        i += 1
        receipt = f"{repo}/../r-{os.getpid()}.json"
        try:
            lease.acquire(store, resource, ttl="1m", bind=False, receipt=receipt)
            counts["acquired"] += 1
            lease.release(store, resource, receipt=receipt)
            counts["released"] += 1
        except GitleaseError as exc:
            counts[exc.code] += 1
    out.put(counts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--processes", type=int, default=8)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("fork")
    print("6. contention")
    for label, resources in (
        ("one resource", ["hot/0"]),
        (f"{args.processes} resources", [f"hot/{i}" for i in range(args.processes)]),
    ):
        repo = str(make_repo())
        out = ctx.Queue()
        procs = [
            ctx.Process(
                target=worker, args=(repo, resources[i:] + resources[:i], args.seconds, out)
            )
            for i in range(args.processes)
        ]
        for p in procs:
            p.start()
        total: Counter[str] = Counter()
        for _ in procs:
            total.update(out.get())
        for p in procs:
            p.join()
        ops = sum(total.values())
        bad = {k: v for k, v in total.items() if k not in ("acquired", "released", "HELD")}
        print(
            f"{label:<14} {args.processes} processes: {ops / args.seconds:8.1f} ops/s  "
            f"outcomes {dict(total)}  " + (f"UNEXPECTED {bad}" if bad else "only success/HELD")
        )


if __name__ == "__main__":
    main()
