#!/usr/bin/env python3
"""9. `acquire --first-free` over a long list: 1,000 candidates, the only free one last.

Against a single acquire in the same store, measured in the same run (the cases take
turns): the whole CLI process, the library call, and the parts of the library call (the
one read of every candidate's ref, passing over the held ones, the take). Also the cost
of the answer when none is free (HELD names every candidate, each fully verified).

With ``--others N``, the store also holds N other claims (refs that point at a copy of
one record, written by ``git update-ref --stdin``): the cost must not grow with them.

    python bench/first_free.py [--candidates 1000] [--repeat 10] [--others 0]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import time
from pathlib import Path

from common import ENV, GITLEASE, make_repo, report


def populate(repo: Path, count: int) -> None:
    """``count - 1`` held candidates (the last one is never claimed), through the library."""
    import gitlease

    store = gitlease.open_store(cwd=repo)
    for i in range(count - 1):
        gitlease.acquire(store, f"ff/{i}", ttl="4h", bind=False)


def add_others(repo: Path, count: int) -> None:
    """``count`` more refs in the store, each pointing at the record of ``ff/0``."""
    from common import store_of

    git_dir = store_of(repo)
    env = {**ENV, "GIT_DIR": str(git_dir)}
    oid = subprocess.run(
        ["git", "rev-parse", "refs/worklease/ff/0.lease"], env=env, capture_output=True,
        text=True, check=True,
    ).stdout.strip()  # fmt: skip
    lines = "".join(f"create refs/worklease/other/{i}.lease {oid}\n" for i in range(count))
    subprocess.run(["git", "update-ref", "--stdin"], input=lines, env=env, text=True, check=True)
    print(f"   and {count} other claims in the store")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidates", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--others", type=int, default=0)
    args = parser.parse_args()
    n, count = args.repeat, args.candidates
    repo = make_repo()
    started = time.perf_counter()
    populate(repo, count)
    if args.others:
        add_others(repo, args.others)
    print(f"9. first free: {count - 1} held candidates in {time.perf_counter() - started:.1f}s")
    os.chdir(repo)

    import gitlease
    from gitlease.model.claim import judge, seems_held
    from gitlease.model.clock import Now
    from gitlease.model.record import parse_and_verify
    from gitlease.model.refname import encode

    store = gitlease.open_store()
    names = [f"ff/{i}" for i in range(count)]
    refs = [encode(r) for r in names]
    listing = "".join(r + "\n" for r in names)
    counter = itertools.count()

    def cli(*argv: str, stdin: str | None = None) -> None:
        subprocess.run(
            [*GITLEASE, *argv], cwd=repo, env=ENV, input=stdin, text=True, capture_output=True
        )

    def release_last() -> None:
        gitlease.release(store, names[-1])

    samples: dict[str, list[float]] = {k: [] for k in ("cli1", "cliff", "lib1", "libff")}
    parts: dict[str, list[float]] = {k: [] for k in ("read", "glance", "verify")}
    for _ in range(n + 1):  # the first round warms up and is dropped
        one = f"single/{next(counter)}"
        samples["cli1"].append(timed(lambda: cli("acquire", one, "--no-bind")))  # noqa: B023
        samples["cliff"].append(
            timed(lambda: cli("acquire", "--first-free", "-", "--no-bind", stdin=listing))
        )
        release_last()
        one = f"single/{next(counter)}"
        samples["lib1"].append(timed(lambda: gitlease.acquire(store, one, bind=False)))  # noqa: B023
        samples["libff"].append(
            timed(lambda: gitlease.acquire_first_free(store, names, bind=False))
        )
        release_last()
        read: list = []
        parts["read"].append(timed(lambda: read.append(store.read_many(refs))))  # noqa: B023
        pairs = list(zip(read[0], names, strict=True))
        now = Now.read()
        parts["glance"].append(timed(lambda: [seems_held(s, now, r) for s, r in pairs]))  # noqa: B023
        getattr(parse_and_verify, "cache_clear", lambda: None)()  # as in a fresh process
        parts["verify"].append(timed(lambda: [judge(s, now, r) for s, r in pairs]))  # noqa: B023
    for values in (*samples.values(), *parts.values()):
        del values[0]

    print("-- whole CLI process")
    report("acquire RESOURCE (one free resource)", samples["cli1"])
    report(f"acquire --first-free, {count} candidates", samples["cliff"], samples["cli1"],
           "acquire")  # fmt: skip
    extra = statistics.median(samples["cliff"]) - statistics.median(samples["cli1"])
    print(f"{'  over a single acquire':<44} {extra * 1000:8.2f} ms (goal: well under 1000 ms)")
    print("-- library call")
    report("gitlease.acquire", samples["lib1"])
    report(f"gitlease.acquire_first_free, {count}", samples["libff"], samples["lib1"], "acquire")
    print("-- parts of the first-free look")
    report(f"read_many: {count} refs (one lookup each)", parts["read"])
    report(f"pass over {count - 1} held (no signatures)", parts["glance"])
    report(f"for comparison: judge all {count} (Ed25519)", parts["verify"])
    gitlease.acquire(store, names[-1], ttl="4h", bind=False)  # now none is free
    held = [timed(lambda: cli("acquire", "--first-free", "-", "--json", stdin=listing))
            for _ in range(max(3, n // 3))]  # fmt: skip
    print("-- none free")
    report(f"HELD naming all {count} candidates (CLI)", held, samples["cli1"], "acquire")


if __name__ == "__main__":
    main()
