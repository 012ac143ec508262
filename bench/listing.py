#!/usr/bin/env python3
"""5b. `list --json` and `list` (table) of a big store, warm, another source tree (A) against
this one (B), taking turns in one run; with each process's peak memory (max RSS).

    git archive main gitlease | tar -x -C /tmp/gitlease-main
    python bench/listing.py /tmp/gitlease-main [--claims 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from common import ENV, GITLEASE, load_line, make_repo, populate, store_of


def run(args: list[str], repo: Path, env: dict[str, str]) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of one process."""
    started = time.perf_counter()
    child = os.fork()
    if child == 0:
        os.chdir(repo)
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execvpe(args[0], args, env)
    _, status, usage = os.wait4(child, 0)
    took = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{args} failed")
    return took, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", help="a directory holding another tree's gitlease/ package")
    parser.add_argument("--claims", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    envs = {"A": dict(ENV, PYTHONPATH=str(Path(args.other).resolve())), "B": dict(ENV)}
    started = time.perf_counter()
    repos = {k: make_repo() for k in envs}
    for repo in repos.values():
        populate(repo, args.claims)
    print(
        f"5b. listing: {args.claims} claims in each store in {time.perf_counter() - started:.0f}s"
    )
    base = ["git", "--git-dir"]
    cases = {
        f"{what} {k}": (argv, k)
        for k in envs
        for what, argv in (
            ("list --json", [*GITLEASE, "list", "--json"]),
            ("list", [*GITLEASE, "list"]),
            ("verify", [*GITLEASE, "verify"]),
        )
    }
    for k, repo in repos.items():
        run([*GITLEASE, "list", "--json"], repo, envs[k])  # warm: B fills its cache
    fer = {
        k: [*base, str(store_of(repo)), "for-each-ref", "--format=%(objectname) %(raw)",
            "refs/worklease/"]
        for k, repo in repos.items()
    }  # fmt: skip
    got: dict[str, list[tuple[float, int]]] = {name: [] for name in cases}
    got["for-each-ref"] = []
    for _ in range(args.repeat):
        got["for-each-ref"].append(run(fer["B"], repos["B"], envs["B"]))
        for name, (argv, k) in cases.items():
            got[name].append(run(argv, repos[k], envs[k]))
    print("   ", load_line())
    for name, samples in got.items():
        secs = statistics.median(s for s, _ in samples)
        peak = max(m for _, m in samples) / 1024
        print(f"{name:<22} median {secs:7.2f} s   peak {peak:7.0f} MiB")
    for k in envs:
        table = statistics.median(s for s, _ in got[f"list {k}"])
        doc = statistics.median(s for s, _ in got[f"list --json {k}"])
        print(f"{k}: list (table) / list --json: {table / doc:.2f}x")


if __name__ == "__main__":
    main()
