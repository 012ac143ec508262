#!/usr/bin/env python3
"""15. Maintenance at scale: `verify`, the retention pass on a packed store, and the first pass
over a store that was never packed, each against its floor from the same run.

The stores (bench/stores.py) are built once and kept under /tmp. A *plain* store holds N
active records and their refs, nothing else (bench/common.py's ``populate``, on which the
round-three table's figures were taken). A *lived-in* store holds N resources as writes
leave them, each with a reflog, a high-water mark and a guard, and ``--history`` records
(an acquire, then heartbeats); a quarter are released and one in ten is an old tombstone
(released 8 days ago, so the pass removes it). Rows, the cases taking turns:

* ``verify``: the whole CLI process, against the floor of one parse and one signature
  check a record: a process that imports the record code, runs the same ``for-each-ref``
  and parses and verifies each record (``floor``). In an ``h3`` store, also against the
  floor that adds reading each reflog and parsing every record it names once
  (``floor+history``: what checking the transitions needs at the least). Also each
  process's CPU time (its git processes' included), which a loaded machine blurs less.
* ``prune, packed``: the pass over the store as its first pass left it (objects and refs
  packed), against ``git gc`` of the same store, plain (what the goal names) and without
  git's reflog expiry (what the pass runs).
* ``first prune``: the pass over a fresh copy of the store as writes left it (every object
  loose, old tombstones to remove), against ``git gc`` of another fresh copy.

``--other DIR`` also times another tree's gitlease (A) beside this one (B).

    python bench/maintenance.py [--claims 10000] [--repeat 5] [--rows verify,prune,first]
                                [--stores plain,lived] [--history 3] [--other DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import stores
from common import ENV, GITLEASE, PYTHON, load_line, make_repo, ms

#: Where the gitlease processes run: a repository of their own (no receipts of a real one).
HERE: Path = Path(".")

_FLOOR = r"""
import subprocess, sys
from gitlease.gitio.gitread import parse_for_each_ref, parse_reflog, named_ids
from gitlease.model.record import parse, parse_and_verify
store, history = sys.argv[1], sys.argv[2] == "1"
fmt = "%(refname) %(objectname) %(objecttype) %(raw:size) %(symref)%0a%(raw)"
out = subprocess.run(["git", "--git-dir", store, "for-each-ref", f"--format={fmt}",
                      "refs/worklease/"], capture_output=True, check=True).stdout
snaps = parse_for_each_ref(out)
for snap in snaps:
    parse_and_verify(snap.data)
if history:
    ids = []
    for snap in snaps:
        try:
            with open(f"{store}/logs/{snap.ref}", "rb") as f:
                ids.extend(o for o in named_ids(parse_reflog(f.read())) if o != snap.oid)
        except FileNotFoundError:
            pass
    got = subprocess.run(["git", "--git-dir", store, "cat-file", "--batch"], check=True,
                         input="".join(o + "\n" for o in ids).encode(), capture_output=True)
    data, pos = got.stdout, 0
    for _ in ids:
        end = data.index(b"\n", pos)
        size = int(data[pos:end].split()[2])
        parse(data[end + 1 : end + 1 + size])
        pos = end + 2 + size
"""


class Sample(float):
    """A process's wall seconds, with its CPU seconds (user and system, its children's
    included) as ``cpu``: on a loaded machine the CPU time is what the code costs."""

    cpu: float

    def __new__(cls, wall: float, cpu: float) -> Sample:
        made = super().__new__(cls, wall)
        made.cpu = cpu
        return made


def timed(args: list[str], env: dict[str, str]) -> Sample:
    started = time.perf_counter()
    child = os.fork()
    if child == 0:  # (forked: wait4 gives the child's CPU time, its git processes' included)
        os.chdir(HERE)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.execvpe(args[0], args, env)
    _, status, usage = os.wait4(child, 0)
    took = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{args} failed")
    return Sample(took, usage.ru_utime + usage.ru_stime)


def line(name: str, samples: list[Sample], base: list[Sample] | None = None, of: str = "",
         goal: float | None = None) -> None:  # fmt: skip
    cpu = statistics.median(s.cpu for s in samples)
    text = f"{name:<34} {ms(samples)}  CPU {cpu * 1000:8.1f} ms"
    if base:
        ratio = statistics.median(samples) / statistics.median(base)
        cpu_ratio = cpu / statistics.median(s.cpu for s in base)
        text += f"  {ratio:5.2f}x {of} (CPU {cpu_ratio:4.2f}x)"
        if goal is not None:
            verdict = [f"{what} {'met' if r <= goal else 'NOT met'}"
                       for what, r in (("wall", ratio), ("CPU", cpu_ratio))]  # fmt: skip
            text += f" goal <= {goal}x: {', '.join(verdict)}"
    print(text, flush=True)


def turns(cases: dict[str, Callable[[], Sample]], repeat: int) -> dict[str, list[Sample]]:
    got: dict[str, list[Sample]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, case in cases.items():
            got[name].append(case())
    return got


def verify_row(store: Path, trees: dict[str, dict[str, str]], repeat: int, history: bool) -> None:
    cases: dict[str, Callable[[], Sample]] = {
        "floor": lambda: timed([PYTHON, "-c", _FLOOR, str(store), "0"], ENV),
    }
    if history:
        cases["floor+history"] = lambda: timed([PYTHON, "-c", _FLOOR, str(store), "1"], ENV)
    for tree, env in trees.items():
        cases[f"verify {tree}"] = lambda env=env: timed(
            [*GITLEASE, "--store", str(store), "verify"], env
        )
    for case in cases.values():
        case()  # warm the file system's cache
    got = turns(cases, repeat)
    for name, samples in got.items():
        if name.startswith("verify"):
            line(name, samples, got["floor"], "floor", goal=1.2)
            if history:
                line("", samples, got["floor+history"], "floor+history", goal=1.2)
        else:
            line(name, samples)


def prune_row(store: Path, trees: dict[str, dict[str, str]], repeat: int) -> None:
    copy = stores.scratch_copy(store)
    never = dict(ENV, GIT_CONFIG_COUNT="2", GIT_CONFIG_KEY_0="gc.reflogExpire",
                 GIT_CONFIG_VALUE_0="never", GIT_CONFIG_KEY_1="gc.reflogExpireUnreachable",
                 GIT_CONFIG_VALUE_1="never")  # fmt: skip
    gc = ["git", "--git-dir", str(copy), "gc", "--quiet", "--prune=1.hour.ago"]
    cases: dict[str, Callable[[], Sample]] = {
        "git gc": lambda: timed(gc, ENV),
        "git gc, no reflog expiry": lambda: timed(gc, never),
    }
    for tree, env in trees.items():
        cases[f"prune {tree}"] = lambda env=env: timed(
            [*GITLEASE, "--store", str(copy), "prune"], env
        )
    for case in cases.values():
        case()
    got = turns(cases, repeat)
    for name, samples in got.items():
        if name.startswith("prune"):
            line(name, samples, got["git gc"], "git gc", goal=3)
            line("", samples, got["git gc, no reflog expiry"], "git gc, no reflog expiry")
        else:
            line(name, samples)
    shutil.rmtree(copy.parent, ignore_errors=True)


def first_row(store: Path, trees: dict[str, dict[str, str]], repeat: int) -> None:
    def fresh(run: Callable[[Path], Sample]) -> Callable[[], Sample]:
        def case() -> Sample:
            copy = stores.scratch_copy(store)
            subprocess.run(["sync"], check=True)  # (the copy's writes are not the pass's)
            try:
                return run(copy)
            finally:
                shutil.rmtree(copy.parent, ignore_errors=True)

        return case

    def gc(copy: Path) -> Sample:
        return timed(["git", "--git-dir", str(copy), "gc", "--quiet", "--prune=1.hour.ago"], ENV)

    cases: dict[str, Callable[[], Sample]] = {"git gc": fresh(gc)}
    for tree, env in trees.items():
        cases[f"first prune {tree}"] = fresh(
            lambda c, env=env: timed([*GITLEASE, "--store", str(c), "prune"], env)
        )
    got = turns(cases, repeat)
    for name, samples in got.items():
        if name.startswith("first"):
            line(name, samples, got["git gc"], "git gc")
            met = "met" if statistics.median(samples) < 10 else "NOT met"
            print(f"{'':<34} goal < 10 s: {met}")
        else:
            line(name, samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", default="verify,prune,first")
    parser.add_argument("--stores", default="plain,lived", help="plain, lived (or both)")
    parser.add_argument("--history", type=int, default=3, help="records a lived-in resource")
    parser.add_argument("--other", help="a directory holding another tree's gitlease/ package")
    args = parser.parse_args()
    trees = {"B": dict(ENV)}
    if args.other:
        trees = {"A": dict(ENV, PYTHONPATH=str(Path(args.other).resolve())), **trees}
    os.environ["BENCH_PYTHON"] = PYTHON
    global HERE
    HERE = make_repo()
    os.chdir(HERE)
    started = time.perf_counter()
    rows = args.rows.split(",")
    made = {
        kind: stores.cached_store(args.claims, args.history, ENV, plain=kind == "plain")
        for kind in args.stores.split(",")
    }
    packed = {k: stores.packed_copy(s, ENV) for k, s in made.items()} if "prune" in rows else {}
    print(f"15. maintenance: {args.claims} resources, stores ready in "
          f"{time.perf_counter() - started:.0f}s;", load_line())  # fmt: skip
    for kind, store in made.items():
        if "verify" in rows:
            print(f"-- verify ({store.name}); {load_line()}")
            verify_row(store, trees, args.repeat, history=kind != "plain")
        if kind in packed:
            print(f"-- prune, packed ({packed[kind].name}); {load_line()}")
            prune_row(packed[kind], trees, args.repeat)
        if "first" in rows:
            print(f"-- first prune, every object loose ({store.name}); {load_line()}")
            first_row(store, trees, max(1, args.repeat // 2))
    print("--", load_line(), file=sys.stdout)


if __name__ == "__main__":
    main()
