#!/usr/bin/env python3
"""2-4. Whole-process costs of the CLI and of the commit hook, each against its baseline.

2. read-only commands (show, list, free, check) against `python -c pass` (goal <= 5x);
3. writes (acquire, heartbeat, release) against the floor of the imports they cannot avoid,
   `python -c "import pygit2, click; from cryptography...ed25519 import ..."` (goal <= 1.15x);
4. the commit hook: extra wall time of `git commit` with the hooks over without, against
   `python -c pass` (goal <= 3x).

Cases take turns round by round, so the machine's noise hits baseline and candidate alike.

    python bench/cli.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import time
from pathlib import Path

from common import ENV, GITLEASE, PYTHON, make_repo, report, run_process, time_interleaved

FLOOR = "import pygit2, click; from cryptography.hazmat.primitives.asymmetric import ed25519"


def timed(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    result = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{args}: {result.stderr.decode()}")
    return elapsed


def reads(repo: Path, n: int) -> None:
    print("2. read-only commands, whole process")
    cases = {
        "python -c pass": run_process([PYTHON, "-c", "pass"], repo),
        "gitlease show": run_process([*GITLEASE, "show", "bench/held"], repo, True),
        "gitlease list": run_process([*GITLEASE, "list"], repo, True),
        "gitlease free (2 resources)": run_process(
            [*GITLEASE, "free", "bench/held", "bench/other"], repo, True
        ),
        "gitlease check": run_process([*GITLEASE, "check", "bench/held"], repo, True),
    }
    samples = time_interleaved(cases, n)
    bare = samples.pop("python -c pass")
    report("python -c pass", bare)
    for name, values in samples.items():
        report(name, values, bare, "python -c pass", goal=5)


def writes(repo: Path, n: int) -> None:
    print("3. writes, whole process")
    counter = itertools.count()
    samples: dict[str, list[float]] = {k: [] for k in ("floor", "acquire", "heartbeat", "release")}
    for _ in range(n + 1):
        resource = f"bench/w{next(counter)}"
        round_ = {
            "floor": timed([PYTHON, "-c", FLOOR], repo),
            "acquire": timed([*GITLEASE, "acquire", resource, "--ttl", "1h", "--no-bind"], repo),
            "heartbeat": timed([*GITLEASE, "heartbeat", resource], repo),
            "release": timed([*GITLEASE, "release", resource], repo),
        }
        if resource == "bench/w0":
            continue  # warm-up round
        for key, value in round_.items():
            samples[key].append(value)
    report("import floor (pygit2, click, ed25519)", samples["floor"])
    for verb in ("acquire", "heartbeat", "release"):
        report(f"gitlease {verb}", samples[verb], samples["floor"], "import floor", goal=1.15)


def hook(n: int) -> None:
    print("4. commit hook: extra wall time of git commit (worktree bound to a live claim)")
    hooked, plain = make_repo(), make_repo()
    for args in (["hooks", "install"], ["acquire", "bench/commit", "--ttl", "1h"]):
        subprocess.run([*GITLEASE, *args], cwd=hooked, env=ENV, check=True, capture_output=True)
    samples = time_interleaved(
        {
            "python -c pass": run_process([PYTHON, "-c", "pass"], plain),
            "without": committer(plain),
            "with": committer(hooked),
        },
        n,
    )
    without = statistics.median(samples["without"])
    extra = [max(0.0, w - without) for w in samples["with"]]
    report("git commit without hooks", samples["without"])
    report("git commit with hooks", samples["with"])
    report("extra time of the hooks", extra, samples["python -c pass"], "python -c pass", goal=3)


def committer(repo: Path):
    counter = itertools.count()

    def commit() -> None:
        (repo / "f").write_text(f"{next(counter)}\n")
        subprocess.run(
            ["git", "commit", "-qam", "x"], cwd=repo, env=ENV, check=True, capture_output=True
        )

    return commit


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    n = parser.parse_args().repeat
    repo = make_repo()
    subprocess.run(
        [*GITLEASE, "acquire", "bench/held", "--ttl", "1h"],
        cwd=repo,
        env=ENV,
        check=True,
        capture_output=True,
    )
    reads(repo, n)
    writes(repo, n)
    hook(n)


if __name__ == "__main__":
    main()
