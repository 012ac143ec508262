#!/usr/bin/env python3
"""5. Scale: 10,000 active claims, loose and after `git pack-refs --all`.

`list` and `verify` times; `show` and `acquire` with 10,000 claims against with 10
(goal <= 1.2x, i.e. O(1)); `free` over 10,000 candidates (one pass over the refs).

    python bench/scale.py [--claims 10000] [--repeat 10]
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import time
from pathlib import Path

from common import ENV, GITLEASE, make_repo, report, run_process, time_it


def populate(repo: Path, count: int) -> None:
    """Write `count` active claims quickly through the library (one process)."""
    import gitlease
    from gitlease.location import open_store

    store = open_store(cwd=repo)  # the store the CLI uses there (the project's)
    for i in range(count):
        gitlease.acquire(store, f"scale/{i}", ttl="2h", bind=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    n, big = args.repeat, args.claims
    small_repo, big_repo = make_repo(), make_repo()
    started = time.perf_counter()
    populate(small_repo, 10)
    populate(big_repo, big)
    print(f"5. scale: populated {big} claims in {time.perf_counter() - started:.1f}s")
    counter = itertools.count()

    def acquire(repo: Path):
        return lambda: subprocess.run(
            [*GITLEASE, "acquire", f"fresh/{next(counter)}", "--no-bind"],
            cwd=repo,
            env=ENV,
            capture_output=True,
            check=True,
        )

    candidates = "\n".join(f"scale/{i}" for i in range(big)) + "\n"

    def free(repo: Path):
        return lambda: subprocess.run(
            [*GITLEASE, "free", "-"],
            cwd=repo,
            env=ENV,
            input=candidates,
            text=True,
            capture_output=True,
            check=True,
        )

    for layout in ("loose", "packed"):
        if layout == "packed":
            for repo in (small_repo, big_repo):
                store = subprocess.run(
                    [*GITLEASE, "where", "--path"], cwd=repo, env=ENV, capture_output=True,
                    text=True, check=True,
                ).stdout.strip()  # fmt: skip
                subprocess.run(
                    ["git", f"--git-dir={store}", "pack-refs", "--all"], env=ENV, check=True
                )
        print(f"-- {layout} refs")
        show_small = time_it(run_process([*GITLEASE, "show", "scale/5"], small_repo, True), n)
        show_big = time_it(run_process([*GITLEASE, "show", "scale/5"], big_repo, True), n)
        report("show, 10 claims", show_small)
        report(f"show, {big} claims", show_big, show_small, "10 claims", goal=1.2)
        acq_small = time_it(acquire(small_repo), n)
        acq_big = time_it(acquire(big_repo), n)
        report("acquire, 10 claims", acq_small)
        report(f"acquire, {big} claims", acq_big, acq_small, "10 claims", goal=1.2)
        report(
            f"list, {big} claims",
            time_it(run_process([*GITLEASE, "list", "--json"], big_repo, True), max(3, n // 3)),
        )
        report(
            f"verify, {big} claims",
            time_it(run_process([*GITLEASE, "verify"], big_repo, True), max(3, n // 3)),
        )
        report(f"free over {big} candidates", time_it(free(big_repo), max(3, n // 3)))


if __name__ == "__main__":
    main()
