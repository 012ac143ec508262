#!/usr/bin/env python3
"""2-4. Whole-process costs of the CLI and of the commit hook.

2. read-only commands (show, list, free, check) against `python -c pass` (goal <= 5x);
3. writes (acquire, heartbeat, release) against the floor of the imports they cannot avoid,
   `python -c "import pygit2, click; from cryptography...ed25519 import ..."` (goal <= 1.15x);
4. the commit hook: extra wall time of `git commit` with the hooks over without, against
   `python -c pass` (goal <= 3x).

    python bench/cli.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
from pathlib import Path

from common import ENV, GITLEASE, PYTHON, make_repo, report, run_process, time_it

FLOOR = "import pygit2, click; from cryptography.hazmat.primitives.asymmetric import ed25519"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    n = parser.parse_args().repeat
    repo = make_repo()
    gl = run_process
    subprocess.run(
        [*GITLEASE, "acquire", "bench/held", "--ttl", "1h"],
        cwd=repo,
        env=ENV,
        check=True,
        capture_output=True,
    )

    bare = time_it(run_process([PYTHON, "-c", "pass"], repo), n)
    print("2. read-only commands, whole process")
    report("python -c pass", bare)
    for args in (
        ["show", "bench/held"],
        ["list"],
        ["free", "bench/held", "bench/other"],
        ["check", "bench/held"],
    ):
        report(
            "gitlease " + " ".join(args),
            time_it(gl([*GITLEASE, *args], repo, check=True), n),
            bare,
            "python -c pass",
            goal=5,
        )

    floor = time_it(run_process([PYTHON, "-c", FLOOR], repo), n)
    print("3. writes, whole process")
    report("import floor (pygit2, click, ed25519)", floor)
    counter = itertools.count()

    def cycle(verb: str) -> list[float]:
        out = []
        for _ in range(n):
            resource = f"bench/w{next(counter)}"
            acquire = [*GITLEASE, "acquire", resource, "--ttl", "1h", "--no-bind"]
            if verb == "acquire":
                out += time_it_once(acquire, repo)
                continue
            subprocess.run(acquire, cwd=repo, env=ENV, capture_output=True, check=True)
            out += time_it_once([*GITLEASE, verb, resource], repo)
        return out

    for verb in ("acquire", "heartbeat", "release"):
        report(f"gitlease {verb}", cycle(verb), floor, "import floor", goal=1.15)

    print("4. commit hook: extra wall time of git commit")
    hooked, plain = make_repo(), make_repo()
    subprocess.run(
        [*GITLEASE, "hooks", "install"], cwd=hooked, env=ENV, check=True, capture_output=True
    )
    subprocess.run(
        [*GITLEASE, "acquire", "bench/commit", "--ttl", "1h"],
        cwd=hooked,
        env=ENV,
        check=True,
        capture_output=True,
    )
    with_hooks = time_it(committer(hooked), n)
    without = time_it(committer(plain), n)
    extra = [max(0.0, w - statistics.median(without)) for w in with_hooks]
    report("git commit without hooks", without)
    report("git commit with hooks (bound claim)", with_hooks)
    report("extra time of the hooks", extra, bare, "python -c pass", goal=3)


def time_it_once(args: list[str], cwd: Path) -> list[float]:
    import time

    start = time.perf_counter()
    result = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{args}: {result.stderr.decode()}")
    return [elapsed]


def committer(repo: Path):
    counter = itertools.count()

    def commit() -> None:
        (repo / "f").write_text(f"{next(counter)}\n")
        subprocess.run(
            ["git", "commit", "-qam", "x"], cwd=repo, env=ENV, check=True, capture_output=True
        )

    return commit


if __name__ == "__main__":
    main()
