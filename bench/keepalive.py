#!/usr/bin/env python3
"""16. keepalive: starting one, and what keeping 1 or 50 claims costs in memory.

a. `gitlease keepalive R` as a whole process, with the keeper already running (a hand-over:
   one connect) and with none (it starts the keeper), against `gitlease check R` (the same
   command's start and claim read, without the keepalive) and `python -c pass`; then its
   parts under bench/parts.py (the hand-over to the keeper counted as "keeper").
b. The library's `keep_alive()` in one process with the keeper running, against
   `gitlease.check()` of the same claim (the read every start makes first).
c. PSS (`/proc/PID/smaps_rollup`) of every keeper process while 1 claim is kept, then 50,
   against `python -c "import gitlease.keepalive.process; sleep"` (the interpreter with the
   keeper's modules, keeping nothing).

With ``--other TREE`` (a directory holding another tree's gitlease/ package, as for
bench/ab.py), a. and c. are measured for that tree too, in the same run (A: the other tree,
B: this one): before issue 33 a keepalive was one process per claim.

    python bench/keepalive.py [--repeat 15] [--claims 50] [--other /tmp/gitlease-main]
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from common import ENV, PYTHON, load_line, make_repo, read_parts, report, report_parts

PARTS = Path(__file__).resolve().parent / "parts.py"
OUT = Path(tempfile.mkdtemp(prefix="gitlease-bench-keepalive-"))


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    got = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if got.returncode != 0:
        raise SystemExit(f"{args}: {got.stderr[:400]}")
    return got


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    run(args, cwd, env)
    return time.perf_counter() - start


def pss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise SystemExit(f"no Pss for pid {pid}")


def kept_pids(repo: Path, env: dict[str, str]) -> set[int]:
    claims = json.loads(run([PYTHON, "-m", "gitlease", "list", "--json"], repo, env).stdout)
    return {c["keepalive"]["pid"] for c in claims["claims"] if c["keepalive"]}


def wait_gone(pids: set[int]) -> None:
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


class Tree:
    """One gitlease source tree: its environment and its own repository."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.env = env
        self.repo = make_repo()
        self.gl = [PYTHON, "-m", "gitlease"]
        self.count = itertools.count()

    def acquire(self, ttl: str = "10m") -> str:
        resource = f"ka/{next(self.count)}"
        run([*self.gl, "acquire", resource, "--ttl", ttl], self.repo, self.env)
        return resource

    def keepalive(self, resource: str, watched: int) -> list[str]:
        return [*self.gl, "keepalive", resource, "--while-pid", str(watched)]

    def release(self, resource: str) -> None:
        run([*self.gl, "release", resource], self.repo, self.env)


def starts(trees: list[Tree], watched: int, n: int) -> None:
    print("16a. gitlease keepalive, whole process;", load_line())
    samples: dict[str, list[float]] = {"python -c pass": []}
    for tree in trees:
        for case in ("check", "keepalive, keeper running", "keepalive, no keeper"):
            samples[f"{case} {tree.name}"] = []
    parts_runs: list[dict[str, float]] = []
    for round_ in range(n + 1):
        row: dict[str, float] = {}
        row["python -c pass"] = timed([PYTHON, "-c", "pass"], trees[0].repo, trees[0].env)
        for tree in trees:
            anchor = tree.acquire()  # keeps the keeper running while the next one starts
            run(tree.keepalive(anchor, watched), tree.repo, tree.env)
            resource = tree.acquire()
            row[f"check {tree.name}"] = timed([*tree.gl, "check", resource], tree.repo, tree.env)
            row[f"keepalive, keeper running {tree.name}"] = timed(
                tree.keepalive(resource, watched), tree.repo, tree.env
            )
            tree.release(resource)
            pids = kept_pids(tree.repo, tree.env)
            tree.release(anchor)  # now nothing is kept: the keeper ends
            wait_gone(pids)
            resource = tree.acquire()
            row[f"keepalive, no keeper {tree.name}"] = timed(
                tree.keepalive(resource, watched), tree.repo, tree.env
            )
            if tree is trees[-1]:  # the parts of a hand-over, with the keeper running
                other = tree.acquire()
                out = OUT / "parts.json"
                parts = [PYTHON, str(PARTS), str(out), "gitlease", "keepalive", other]
                run([*parts, "--while-pid", str(watched)], tree.repo, tree.env)
                parts_runs.append(read_parts(out))
                tree.release(other)
            pids = kept_pids(tree.repo, tree.env)
            tree.release(resource)
            wait_gone(pids)
        if round_:  # (the first round warms up)
            for key, value in row.items():
                samples[key].append(value)
    bare = samples["python -c pass"]
    report("python -c pass", bare)
    for tree in trees:
        check = samples[f"check {tree.name}"]
        report(f"gitlease check {tree.name}", check, bare, "python -c pass")
        for case in ("keepalive, keeper running", "keepalive, no keeper"):
            got = samples[f"{case} {tree.name}"]
            report(f"{case} {tree.name}", got, check, "check")
            extra = [max(0.0, k - c) for k, c in zip(got, check, strict=True)]
            report("  over check", extra)
    report_parts(bare, parts_runs[-n:], samples[f"keepalive, keeper running {trees[-1].name}"])


LIBRARY = """
import json, statistics, sys, time
import gitlease
from gitlease.store.location import open_store
store = open_store()
watched, n = int(sys.argv[1]), int(sys.argv[2])
anchor = "lib/anchor"
gitlease.acquire(store, anchor, ttl="10m")
gitlease.keep_alive(store, anchor, while_pid=watched)
check, keep = [], []
for i in range(n + 1):
    resource = f"lib/{i}"
    gitlease.acquire(store, resource, ttl="10m")
    t = time.perf_counter(); gitlease.check(store, resource); c = time.perf_counter() - t
    t = time.perf_counter(); gitlease.keep_alive(store, resource, while_pid=watched)
    k = time.perf_counter() - t
    gitlease.release(store, resource)
    if i:
        check.append(c); keep.append(k)
gitlease.release(store, anchor)
print(json.dumps({"check": check, "keep": keep}))
"""


def library(tree: Tree, watched: int, n: int) -> None:
    print("16b. the library's keep_alive(), keeper running;", load_line())
    got = json.loads(run([PYTHON, "-c", LIBRARY, str(watched), str(n)], tree.repo, tree.env).stdout)
    report("gitlease.check()", got["check"])
    report("gitlease.keep_alive()", got["keep"], got["check"], "check()")


IDLE = "import time, gitlease.keepalive.process, gitlease.store.location; time.sleep(600)"


def memory(trees: list[Tree], watched: int, claims: int) -> None:
    print(f"16c. PSS of the keepalive processes, 1 and {claims} claims;", load_line())
    idle = subprocess.Popen([PYTHON, "-c", IDLE], env=trees[-1].env)
    try:
        time.sleep(1.5)  # (imported)
        base = pss_kib(idle.pid)
    finally:
        idle.send_signal(signal.SIGKILL)
        idle.wait()
    print(f"{'python with the keeper modules, idle':<44} PSS {base / 1024:7.1f} MiB")
    for tree in trees:
        held: list[str] = []
        figures = {}
        for count in (1, claims):
            while len(held) < count:
                resource = tree.acquire()
                run(tree.keepalive(resource, watched), tree.repo, tree.env)
                held.append(resource)
            time.sleep(1.0)  # (every claim's thread started)
            pids = kept_pids(tree.repo, tree.env)
            figures[count] = (sum(pss_kib(p) for p in pids), len(pids))
        for count, (kib, procs) in figures.items():
            print(
                f"{f'{tree.name}: {count} claims kept':<44} PSS {kib / 1024:7.1f} MiB in "
                f"{procs} process{'es' if procs != 1 else ''}  {kib / base:5.2f}x idle python"
            )
        one, many = figures[1][0], figures[claims][0]
        print(f"{tree.name}: {claims} claims / 1 claim: {many / one:.2f}x")
        pids = kept_pids(tree.repo, tree.env)
        for resource in held:
            tree.release(resource)
        wait_gone(pids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--claims", type=int, default=50)
    parser.add_argument("--other", help="a directory holding another tree's gitlease/ package")
    args = parser.parse_args()
    trees = []
    if args.other:
        trees.append(Tree("A", dict(ENV, PYTHONPATH=str(Path(args.other).resolve()))))
    trees.append(Tree("B" if args.other else "", dict(ENV)))
    watched = subprocess.Popen(["sleep", "3600"])
    try:
        starts(trees, watched.pid, args.repeat)
        library(trees[-1], watched.pid, args.repeat)
        memory(trees, watched.pid, args.claims)
    finally:
        watched.kill()
        watched.wait()


if __name__ == "__main__":
    main()
