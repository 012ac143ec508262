#!/usr/bin/env python3
"""5b. `list --json` and `list` (table) of a big store, warm, beside the floor of a listing:
a plain `git for-each-ref` of every record, and the same parsed in Python
(bench/fer_parse.py); the cases taking turns in one run, with each process's peak memory
(max RSS). With another source tree (A), its `list --json` and `list` too, against this
one (B); `--verify` adds `gitlease verify`.

    git archive main gitlease | tar -x -C /tmp/gitlease-main      # (for A, optional)
    python bench/listing.py [/tmp/gitlease-main] [--claims 100000] [--repeat 3] [--verify]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from common import ENV, GITLEASE, PYTHON, load_line, make_repo, populate, store_of

HERE = Path(__file__).resolve().parent
#: list --json against for-each-ref + a parse in Python (issue 33's goal)
GOAL_JSON = 2.0
#: list (the table) against list --json
GOAL_TABLE = 1.2


def run(args: list[str], repo: Path, env: dict[str, str]) -> tuple[float, int, float]:
    """(seconds, peak RSS in KiB, CPU seconds with its children's) of one process."""
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
    return took, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", nargs="?", help="a directory holding another tree's gitlease/")
    parser.add_argument("--claims", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--verify", action="store_true", help="measure `gitlease verify` too")
    args = parser.parse_args()
    envs = {"B": dict(ENV)}
    if args.other:
        envs = {"A": dict(ENV, PYTHONPATH=str(Path(args.other).resolve())), **envs}
    started = time.perf_counter()
    repos = {k: make_repo() for k in envs}
    for repo in repos.values():
        populate(repo, args.claims)
    print(
        f"5b. listing: {args.claims} claims in each store in {time.perf_counter() - started:.0f}s"
    )
    commands = [("list --json", ["list", "--json"]), ("list", ["list"])]
    if args.verify:
        commands.append(("verify", ["verify"]))
    cases = {f"{what} {k}": ([*GITLEASE, *argv], k) for k in envs for what, argv in commands}
    for k, repo in repos.items():
        run([*GITLEASE, "list", "--json"], repo, envs[k])  # warm: each fills its cache
    git_dir = str(store_of(repos["B"]))
    floors = {
        "for-each-ref": ["git", "--git-dir", git_dir, "for-each-ref",
                         "--format=%(objectname) %(raw)", "refs/worklease/"],
        "for-each-ref + parse": [PYTHON, str(HERE / "fer_parse.py"), git_dir],
    }  # fmt: skip
    got: dict[str, list[tuple[float, int, float]]] = {name: [] for name in [*floors, *cases]}
    for _ in range(args.repeat):
        for name, argv in floors.items():
            got[name].append(run(argv, repos["B"], envs["B"]))
        for name, (argv, k) in cases.items():
            got[name].append(run(argv, repos[k], envs[k]))
    print("   ", load_line())
    secs = {name: statistics.median(s for s, _, _ in samples) for name, samples in got.items()}
    cpu = {name: statistics.median(c for _, _, c in samples) for name, samples in got.items()}
    for name, samples in got.items():
        peak = max(m for _, m, _ in samples) / 1024
        print(
            f"{name:<22} median {secs[name]:7.2f} s   CPU {cpu[name]:7.2f} s   peak {peak:7.0f} MiB"
        )
    for k in envs:
        for what, of in (("wall", secs), ("CPU", cpu)):
            floor = of["for-each-ref + parse"]
            doc, table = of[f"list --json {k}"], of[f"list {k}"]
            verdict = "met" if doc / floor <= GOAL_JSON else "NOT met"
            print(f"{k}: list --json / for-each-ref + parse ({what}): {doc / floor:.2f}x "
                  f"(goal <= {GOAL_JSON}x: {verdict})")  # fmt: skip
            verdict = "met" if table / doc <= GOAL_TABLE else "NOT met"
            print(f"{k}: list (table) / list --json ({what}): {table / doc:.2f}x "
                  f"(goal <= {GOAL_TABLE}x: {verdict})")  # fmt: skip
    if "A" in envs:
        for what, of in (("wall", secs), ("CPU", cpu)):
            print(f"B / A, list --json ({what}): {of['list --json B'] / of['list --json A']:.2f}x")


if __name__ == "__main__":
    main()
