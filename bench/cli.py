#!/usr/bin/env python3
"""2-4. Whole-process costs of the CLI and of the commit hook, each against its baseline.

2. read-only commands (show, list, free, check) against `python -c pass` (goal <= 2.5x);
3. writes (acquire, heartbeat, release) against the floor of the imports they cannot avoid,
   `python -c "import pygit2, click; from cryptography...ed25519 import ..."` (goal <= 1.15x),
   and an acquire and a release together against two of it (goal <= 1.0x);
4. the commit hook: extra wall time of `git commit` with the hooks over without, against
   `python -c pass` (goal <= 2x); with ``--hook-other PYTHON``, also through the hooks that
   another gitlease's Python installs (A/B in one run).

Every figure is followed by its parts, from a second run of the same command under
bench/parts.py in the same round: the interpreter's start (`python -c pass`), imports, git
processes, the store's writes, gitlease's own code, and the rest (process exit; for the hook,
the shell script and git's own work). Cases take turns round by round, so the machine's
noise hits baseline and candidate alike.

    python bench/cli.py [--repeat 30] [--only hook] [--hook-other /tmp/venv-main/bin/python]
"""

from __future__ import annotations

import argparse
import itertools
import resource
import statistics
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
    read_parts,
    report,
    report_parts,
    run_process,
)

FLOOR = "import pygit2, click; from cryptography.hazmat.primitives.asymmetric import ed25519"
OUT = Path(tempfile.mkdtemp(prefix="gitlease-bench-parts-"))


#: CPU (user + system) of each process :func:`timed` ran, by its arguments' first word
CPU: dict[str, list[float]] = {}


def timed(args: list[str], cwd: Path) -> float:
    start, cpu = time.perf_counter(), _children_cpu()
    result = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{args}: {result.stderr.decode()}")
    CPU.setdefault(" ".join(args[1:4]), []).append(_children_cpu() - cpu)
    return elapsed


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reads(repo: Path, n: int) -> None:
    print("2. read-only commands, whole process;", load_line())
    commands = {
        "gitlease show": ["show", "bench/held"],
        "gitlease list": ["list"],
        "gitlease free (2 resources)": ["free", "bench/held", "bench/other"],
        "gitlease check": ["check", "bench/held"],
    }
    bare = run_process([PYTHON, "-c", "pass"], repo)
    samples: dict[str, list[float]] = {"bare": [], **{k: [] for k in commands}}
    parts: dict[str, list[dict[str, float]]] = {k: [] for k in commands}
    calls = {k: run_process([*GITLEASE, *a], repo, True) for k, a in commands.items()}
    probes = {k: parts_process(["gitlease", *a], repo, OUT / "p.json") for k, a in commands.items()}
    for i in range(n + 1):
        round_ = {"bare": _time(bare)}
        for name in commands:
            round_[name] = _time(calls[name])
            probes[name]()
            if i:
                parts[name].append(read_parts(OUT / "p.json"))
        if i:  # round 0 warms up
            for key, value in round_.items():
                samples[key].append(value)
    report("python -c pass", samples["bare"])
    for name in commands:
        report(name, samples[name], samples["bare"], "python -c pass", goal=2.5)
        report_parts(samples["bare"], parts[name], samples[name])


def _time(call) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def writes(repo: Path, n: int) -> None:
    print("3. writes, whole process;", load_line())
    counter = itertools.count()
    keys = ("floor", "acquire", "heartbeat", "release")
    samples: dict[str, list[float]] = {k: [] for k in (*keys, "bare")}
    parts: dict[str, list[dict[str, float]]] = {k: [] for k in keys[1:]}
    for i in range(n + 1):
        resource = f"bench/w{next(counter)}"
        probe = f"bench/p{i}"
        round_ = {
            "bare": timed([PYTHON, "-c", "pass"], repo),
            "floor": timed([PYTHON, "-c", FLOOR], repo),
            "acquire": timed([*GITLEASE, "acquire", resource, "--ttl", "1h", "--no-bind"], repo),
            "heartbeat": timed([*GITLEASE, "heartbeat", resource], repo),
            "release": timed([*GITLEASE, "release", resource], repo),
        }
        for verb, args in (
            ("acquire", ["acquire", probe, "--ttl", "1h", "--no-bind"]),
            ("heartbeat", ["heartbeat", probe]),
            ("release", ["release", probe]),
        ):
            parts_process(["gitlease", *args], repo, OUT / "w.json", True)()
            if i:
                parts[verb].append(read_parts(OUT / "w.json"))
        if i:  # round 0 warms up
            for key, value in round_.items():
                samples[key].append(value)
    report("import floor (pygit2, click, ed25519)", samples["floor"])
    for verb in keys[1:]:
        report(f"gitlease {verb}", samples[verb], samples["floor"], "import floor", goal=1.15)
        report_parts(samples["bare"], parts[verb], samples[verb])
    pair = [a + r for a, r in zip(samples["acquire"], samples["release"], strict=True)]
    report("gitlease acquire + gitlease release", pair, [2 * f for f in samples["floor"]],
           "2x the import floor", goal=1.0)  # fmt: skip
    # CPU (user + system, with the git processes): what a busy machine's waiting leaves out
    cpu = {k: v[1:] for k, v in CPU.items()}  # (without round 0's)
    floor_cpu = cpu[f"-c {FLOOR}"]
    acquire_cpu = next(v for k, v in cpu.items() if k.startswith("-m gitlease acquire"))
    release_cpu = next(v for k, v in cpu.items() if k.startswith("-m gitlease release"))
    report("  CPU: import floor", floor_cpu)
    report("  CPU: gitlease acquire", acquire_cpu, floor_cpu, "import floor")
    report("  CPU: gitlease release", release_cpu, floor_cpu, "import floor")
    both = [a + r for a, r in zip(acquire_cpu, release_cpu, strict=True)]
    report("  CPU: acquire + release", both, [2 * f for f in floor_cpu], "2x the import floor",
           goal=1.0)  # fmt: skip


def hook(n: int, other: str | None = None) -> None:
    print("4. commit hook: extra wall time of git commit (worktree bound to a live claim);")
    print("  ", load_line())
    hooked, plain = make_repo(), make_repo()
    for args in (["hooks", "install"], ["acquire", "bench/commit", "--ttl", "1h"]):
        subprocess.run([*GITLEASE, *args], cwd=hooked, env=ENV, check=True, capture_output=True)
    old = None
    if other is not None:  # the same, with the hooks another gitlease's Python installs
        old = make_repo()
        for args in (["hooks", "install"], ["acquire", "bench/commit", "--ttl", "1h"]):
            subprocess.run([other, "-m", "gitlease", *args], cwd=old, env=ENV, check=True,
                           capture_output=True)  # fmt: skip
    time.sleep(2.5)  # the configuration just written is cached once two seconds old
    check = parts_process(["hookcheck", "pre-commit"], hooked, OUT / "h.json")
    runs: list[dict[str, float]] = []

    def probe() -> None:
        check()
        runs.append(read_parts(OUT / "h.json"))

    cases = {
        "python -c pass": run_process([PYTHON, "-c", "pass"], plain),
        "without": committer(plain),
        "with": committer(hooked),
        "check": run_process([PYTHON, "-m", "gitlease.hookcheck", "pre-commit"], hooked),
        "probe": probe,
    }
    if old is not None:
        cases["with, other tree's hooks"] = committer(old)
    samples = time_interleaved_named(cases, n)
    without = statistics.median(samples["without"])
    extra = [max(0.0, w - without) for w in samples["with"]]
    report("git commit without hooks", samples["without"])
    report("git commit with hooks", samples["with"])
    report("extra time of the hooks", extra, samples["python -c pass"], "python -c pass", goal=2)
    if old is not None:
        old_extra = [max(0.0, w - without) for w in samples["with, other tree's hooks"]]
        report("git commit, other tree's hooks", samples["with, other tree's hooks"])
        report("extra time, other tree's hooks", old_extra, samples["python -c pass"],
               "python -c pass")  # fmt: skip
        report("extra time, this tree / other tree", extra, old_extra, "other tree")
    report("  of which the check's process", samples["check"], samples["python -c pass"],
           "python -c pass")  # fmt: skip
    report_parts(samples["python -c pass"], runs[-n:], samples["check"])


def time_interleaved_named(cases, n: int) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    for fn in cases.values():
        fn()
    out: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(n):
        for name, fn in cases.items():
            out[name].append(_time(fn))
    return out


def committer(repo: Path):  # type: ignore[no-untyped-def]
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
    parser.add_argument("--only", choices=("reads", "writes", "hook"), default=None)
    parser.add_argument(
        "--hook-other",
        metavar="PYTHON",
        help="also time commits through the hooks another gitlease's Python installs",
    )
    args = parser.parse_args()
    n = args.repeat
    repo = make_repo()
    subprocess.run(
        [*GITLEASE, "acquire", "bench/held", "--ttl", "1h"],
        cwd=repo,
        env=ENV,
        check=True,
        capture_output=True,
    )
    if args.only in (None, "reads"):
        reads(repo, n)
    if args.only in (None, "writes"):
        writes(repo, n)
    if args.only in (None, "hook"):
        hook(n, args.hook_other)


if __name__ == "__main__":
    main()
