#!/usr/bin/env python3
"""5. Scale: `list --json` at 100, 1,000 and 10,000 claims, cold and warm; `show` and
`acquire` with 10,000 claims against with 10 (O(1)); `verify` and `free` over 10,000.

Cold: this user's verified-records cache removed before the run, so every signature is
checked; warm: the cache as the previous `list` left it (the usual case: records change
one at a time). The claims are written straight into the store (signed records, one
`git update-ref --stdin`), which is what 10,000 acquires would leave, in seconds instead
of minutes. Each `list` figure is followed by its parts (bench/parts.py): interpreter,
imports, the `git for-each-ref` (and `git config`) processes, gitlease's own code.

    python bench/scale.py [--claims 10000] [--repeat 10] [--layouts loose,packed]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import tempfile
import time
from pathlib import Path

from common import (
    ENV,
    GITLEASE,
    PYTHON,
    load_line,
    make_repo,
    parts_process,
    populate,
    read_parts,
    report,
    report_parts,
    run_process,
    store_of,
)

OUT = Path(tempfile.mkdtemp(prefix="gitlease-bench-parts-"))


def cache_of(repo: Path) -> Path:
    return store_of(repo) / "worklease" / f"verified-{os.getuid()}"


def list_figures(repos: dict[int, Path], n: int) -> None:
    bare = run_process([PYTHON, "-c", "pass"], next(iter(repos.values())))
    for count, repo in repos.items():
        listing = run_process([*GITLEASE, "list", "--json"], repo, True)
        probe = parts_process(["gitlease", "list", "--json"], repo, OUT / "l.json")
        samples: dict[str, list[float]] = {"bare": [], "cold": [], "warm": []}
        parts: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
        for i in range(n + 1):
            round_ = {"bare": _time(bare)}
            cache_of(repo).unlink(missing_ok=True)
            round_["cold"] = _time(listing)
            round_["warm"] = _time(listing)
            cache_of(repo).unlink(missing_ok=True)
            probe()
            cold_parts = read_parts(OUT / "l.json")
            probe()
            if i:  # round 0 warms the file system's cache
                parts["cold"].append(cold_parts)
                parts["warm"].append(read_parts(OUT / "l.json"))
                for key, value in round_.items():
                    samples[key].append(value)
        report(f"list --json, {count} claims, cold", samples["cold"])
        report_parts(samples["bare"], parts["cold"], samples["cold"])
        report(f"list --json, {count} claims, warm", samples["warm"], samples["bare"],
               "python -c pass")  # fmt: skip
        report_parts(samples["bare"], parts["warm"], samples["warm"])


def _time(call) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def interleaved(cases: dict[str, object], n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():
        fn()  # type: ignore[operator]
    for _ in range(n):
        for name, fn in cases.items():
            out[name].append(_time(fn))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--layouts", default="loose,packed")
    args = parser.parse_args()
    n, big = args.repeat, args.claims
    sizes = sorted({100, 1000, big} if big >= 1000 else {big})
    repos = {size: make_repo() for size in sizes}
    small = make_repo()
    started = time.perf_counter()
    for size, repo in repos.items():
        populate(repo, size)
    populate(small, 10)
    print(f"5. scale: populated {sum(sizes) + 10} claims in {time.perf_counter() - started:.1f}s")
    big_repo = repos[big]
    counter = itertools.count()

    def acquire(repo: Path):  # type: ignore[no-untyped-def]
        return lambda: subprocess.run(
            [*GITLEASE, "acquire", f"fresh/{next(counter)}", "--no-bind"],
            cwd=repo,
            env=ENV,
            capture_output=True,
            check=True,
        )

    candidates = "\n".join(f"scale/{i}" for i in range(big)) + "\n"

    def free(repo: Path):  # type: ignore[no-untyped-def]
        return lambda: subprocess.run(
            [*GITLEASE, "free", "-"],
            cwd=repo,
            env=ENV,
            input=candidates,
            text=True,
            capture_output=True,
            check=True,
        )

    for layout in args.layouts.split(","):
        if layout == "packed":
            for repo in (*repos.values(), small):
                subprocess.run(
                    ["git", "--git-dir", str(store_of(repo)), "pack-refs", "--all"],
                    env=ENV,
                    check=True,
                )
        print(f"-- {layout} refs;", load_line())
        list_figures(repos, max(3, n // 2))
        got = interleaved(
            {
                "show small": run_process([*GITLEASE, "show", "scale/5"], small, True),
                "show big": run_process([*GITLEASE, "show", "scale/5"], big_repo, True),
                "acquire small": acquire(small),
                "acquire big": acquire(big_repo),
            },
            n,
        )
        report("show, 10 claims", got["show small"])
        report(f"show, {big} claims", got["show big"], got["show small"], "10 claims", goal=1.2)
        report("acquire, 10 claims", got["acquire small"])
        report(f"acquire, {big} claims", got["acquire big"], got["acquire small"], "10 claims",
               goal=1.2)  # fmt: skip
        heavy = interleaved(
            {
                "verify": run_process([*GITLEASE, "verify"], big_repo, True),
                "free": free(big_repo),
            },
            max(3, n // 3),
        )
        report(f"verify, {big} claims", heavy["verify"])
        report(f"free over {big} candidates (warm)", heavy["free"])


if __name__ == "__main__":
    main()
