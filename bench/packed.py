#!/usr/bin/env python3
"""10b. `acquire` of a new resource in a packed store, 10,000 against 100,000 claims, and
another source tree (A) against this one (B), all four taking turns in one run.

The stores' claims are refs set by one ``git update-ref --stdin`` to a copy of one record
and then packed (``git pack-refs --all``): an acquire of a resource that has no ref reads
``packed-refs`` to make sure no damaged line hides it, which is what grows with the store.

    git archive main gitlease | tar -x -C /tmp/gitlease-main
    python bench/packed.py /tmp/gitlease-main [--repeat 8] [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import time
from pathlib import Path

from common import ENV, GITLEASE, load_line, make_repo, store_of


def fill(repo: Path, count: int) -> None:
    subprocess.run([*GITLEASE, "acquire", "seed/0", "--no-bind"], cwd=repo, env=ENV, check=True)
    git_dir = store_of(repo)
    env = {**ENV, "GIT_DIR": str(git_dir)}
    oid = subprocess.run(
        ["git", "rev-parse", "refs/worklease/seed/0.lease"], env=env, capture_output=True,
        text=True, check=True,
    ).stdout.strip()  # fmt: skip
    lines = "".join(f"create refs/worklease/other/{i}.lease {oid}\n" for i in range(count))
    subprocess.run(["git", "update-ref", "--stdin"], input=lines, env=env, text=True, check=True)
    subprocess.run(["git", "pack-refs", "--all"], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", help="a directory holding another tree's gitlease/ package")
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    envs = {"A": dict(ENV, PYTHONPATH=str(Path(args.other).resolve())), "B": dict(ENV)}
    repos = {(k, size): make_repo() for k in envs for size in sizes}
    for (_, size), repo in repos.items():
        fill(repo, size)
    counter = itertools.count()
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in repos}
    for i in range(args.repeat + 1):
        for (k, size), repo in repos.items():
            started = time.perf_counter()
            got = subprocess.run(
                [*GITLEASE, "acquire", f"fresh/{next(counter)}", "--no-bind"],
                cwd=repo, env=envs[k], capture_output=True,
            )  # fmt: skip
            took = time.perf_counter() - started
            if got.returncode != 0:
                raise SystemExit(got.stderr.decode()[:300])
            if i:  # round 0: warm (and B writes its packed-refs identity)
                samples[(k, size)].append(took)
    print("10b. acquire of a new resource, packed store;", load_line())
    for k in envs:
        base = statistics.median(samples[(k, sizes[0])])
        for size in sizes:
            med = statistics.median(samples[(k, size)])
            print(
                f"{k} ({'other tree' if k == 'A' else 'this tree'}) {size:>7} claims  "
                f"median {med * 1000:8.1f} ms  {med / base:5.2f}x {sizes[0]} claims"
            )
    for size in sizes:
        a, b = (statistics.median(samples[(k, size)]) for k in envs)
        print(f"B / A at {size:>7} claims: {b / a:5.2f}x")


if __name__ == "__main__":
    main()
