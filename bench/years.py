#!/usr/bin/env python3
"""10. A store that lives for years: 20,000 writes, then the retention pass.

200 resources; each cycle is acquire, 3 heartbeats and release through the library (5
writes); 20 rounds of a cycle per resource make 20,000 writes. With a C compiler, round r
is written with the wall clock moved back 20 - r days (tests/support/wallclock.c, an LD_PRELOAD
that moves CLOCK_REALTIME and nothing else), so that records and reflog lines are dated
over 20 days as a store used every day would be; without one, everything is dated now
and the default policy (7 days) keeps it all.

Before and after the retention pass it prints the store's size on disk, its file counts,
its object count and reflog lines, and the times of `gitlease log` (one resource),
`verify` and `list` (whole CLI processes). The pass is the library's
`pruning.retain(store, grace="now")`: nothing writes meanwhile, so `git gc` may drop
what the pass expired at once (the daily pass leaves unreferenced objects an hour, and
the next day's pass drops them).

    python bench/years.py [--resources 200] [--rounds 20] [--repeat 5] [--policy k=v ...]
                          [--baseline DIR]   # also time the reads with the gitlease in DIR
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DAY = 86_400


def build_shim() -> Path | None:
    out = Path(tempfile.mkdtemp(prefix="gitlease-bench-shim-")) / "libwallclock.so"
    source = ROOT / "tests" / "support" / "wallclock.c"
    try:
        made = subprocess.run(
            ["cc", "-shared", "-fPIC", "-O2", "-o", str(out), str(source), "-ldl"],
            capture_output=True,
        )
    except OSError:
        return None
    return out if made.returncode == 0 else None


def write_round(repo: Path, resources: int, heartbeats: int) -> None:
    """One round: a whole cycle on every resource, in this process (the library)."""
    import gitlease
    from gitlease.store.location import open_store

    store = open_store(cwd=repo)
    for i in range(resources):
        name = f"bench/{i}"
        gitlease.acquire(store, name, ttl="1h", bind=False)
        for _ in range(heartbeats):
            gitlease.heartbeat(store, name)
        gitlease.release(store, name)


def store_of(repo: Path, env: dict[str, str]) -> Path:
    """The project's store (made by a first command that opens it)."""
    cli = [sys.executable, "-m", "gitlease"]
    subprocess.run([*cli, "list"], cwd=repo, env=env, capture_output=True, check=True)
    out = subprocess.run(
        [*cli, "where", "--path"], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def git(store: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={store}", *args], capture_output=True, text=True, check=True
    ).stdout


def measure(store: Path) -> dict[str, int]:
    """Sizes and counts of the store as the file system and git see them."""
    disk = apparent = files = 0
    kinds = dict.fromkeys(("loose objects", "packs", "reflogs", "guards", "floors"), 0)
    for path in store.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        st = path.stat()
        files += 1
        disk += st.st_blocks * 512
        apparent += st.st_size
        rel = path.relative_to(store).parts
        if rel[0] == "objects" and len(rel[1]) == 2:
            kinds["loose objects"] += 1
        elif rel[0] == "objects" and rel[-1].endswith(".pack"):
            kinds["packs"] += 1
        elif rel[0] == "logs":
            kinds["reflogs"] += 1
        elif rel[:2] == ("worklease", "guards"):
            kinds["guards"] += 1
        elif rel[:2] == ("worklease", "floors"):
            kinds["floors"] += 1
    counts = dict(line.split(": ") for line in git(store, "count-objects", "-v").splitlines())
    lines = sum(
        len(p.read_bytes().splitlines()) for p in (store / "logs").rglob("*") if p.is_file()
    )
    return {
        "disk bytes": disk,
        "apparent bytes": apparent,
        "files": files,
        **kinds,
        "objects": int(counts["count"]) + int(counts["in-pack"]),
        "reflog lines": lines,
    }


def show(label: str, figures: dict[str, int]) -> None:
    print(f"-- {label}")
    for name, value in figures.items():
        suffix = f"  ({value / 1024 / 1024:.1f} MiB)" if name.endswith("bytes") else ""
        print(f"{name:<44} {value:>12,}{suffix}")


def time_reads(
    repo: Path, repeat: int, common: Any, code: str | None = None
) -> dict[str, list[float]]:
    """``log``, ``verify`` and ``list`` as whole processes (``code``: another checkout's
    gitlease, on PYTHONPATH, for a comparison with an earlier version)."""
    env = dict(common.ENV, PYTHONPATH=code) if code else common.ENV

    def run(*args: str):
        return lambda: subprocess.run(
            [*common.GITLEASE, *args], cwd=repo, env=env, capture_output=True, check=True
        )

    ms = common.ms
    tag = " (baseline)" if code else ""

    def once(fn: Any, _repeat: int) -> list[float]:
        started = time.perf_counter()
        fn()
        return [time.perf_counter() - started]

    time_it = once if code else common.time_it

    out = {
        "log bench/0": time_it(run("log", "bench/0"), repeat),
        "verify": time_it(run("verify"), repeat),
        "list": time_it(run("list"), repeat),
    }
    for name, samples in out.items():
        print(f"{name + tag:<44} {ms(samples)}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resources", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--heartbeats", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--policy", nargs="*", default=[], help="gitlease.KEY=VALUE in the store")
    parser.add_argument(
        "--baseline", metavar="DIR", help="also time the reads with the gitlease in DIR, once"
    )
    parser.add_argument("--write-round", type=str, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_round:  # a round's own process: the parent's environment as it is
        write_round(Path(args.write_round), args.resources, args.heartbeats)
        return

    import common  # the hermetic home (it changes this process's environment)

    repo = common.make_repo()
    store = store_of(repo, common.ENV)
    # The rounds are dated in the past: the daily pass would start during them. Off here;
    # the pass is run once below.
    git(store, "config", "gitlease.autoPrune", "false")
    for setting in args.policy:
        key, _, value = setting.partition("=")
        git(store, "config", f"gitlease.{key}", value)
    shim = build_shim()
    writes = args.resources * args.rounds * (2 + args.heartbeats)
    print(
        f"10. years: {args.resources} resources x {args.rounds} rounds x "
        f"(acquire, {args.heartbeats} heartbeats, release) = {writes:,} writes, "
        + ("one round a day, the last one today" if shim else "all dated now (no cc)")
    )
    started = time.perf_counter()
    for r in range(args.rounds):
        env = dict(common.ENV)
        if shim:
            days_back = args.rounds - 1 - r
            env.update(LD_PRELOAD=str(shim), WALLCLOCK_OFFSET_SECONDS=str(-days_back * DAY))
        worker = [common.PYTHON, __file__, "--write-round", str(repo)]
        worker += ["--resources", str(args.resources), "--heartbeats", str(args.heartbeats)]
        subprocess.run(worker, env=env, check=True)
    elapsed = time.perf_counter() - started
    print(f"wrote {writes:,} records in {elapsed:.1f}s ({elapsed / writes * 1000:.2f} ms a write)")

    print(f"store: {store}")
    before = measure(store)
    show("before the retention pass", before)
    reads_before = time_reads(repo, args.repeat, common)
    if args.baseline:
        time_reads(repo, 1, common, args.baseline)

    sys.path.insert(0, str(ROOT))
    os.chdir(repo)
    from gitlease.maintenance.prune import retain
    from gitlease.store.location import open_store

    started = time.perf_counter()
    report = retain(open_store(cwd=repo), grace="now")
    took = time.perf_counter() - started
    summary = {k: v for k, v in report.to_dict().items() if k not in ("busy", "skipped")}
    print(f"-- retention pass: {took:.1f}s\n{json.dumps(summary)}")

    after = measure(store)
    show("after the retention pass", after)
    reads_after = time_reads(repo, args.repeat, common)
    if args.baseline:
        time_reads(repo, 1, common, args.baseline)
    print("-- after / before")
    for name in ("disk bytes", "files", "objects", "reflog lines"):
        print(f"{name:<44} {after[name] / max(before[name], 1):12.3f}x")
    for name, samples in reads_after.items():
        ratio = statistics.median(samples) / statistics.median(reads_before[name])
        print(f"{name:<44} {ratio:12.3f}x")
    kept = after["reflog lines"]
    packed = sum(p.stat().st_size for p in (store / "objects" / "pack").glob("*.pack"))
    logs = sum(p.stat().st_size for p in (store / "logs").rglob("*") if p.is_file())
    if kept:
        print(
            f"per kept record: {packed / kept:.0f} B of pack, {logs / kept:.0f} B of reflog "
            f"({kept:,} records kept)"
        )


if __name__ == "__main__":
    main()
