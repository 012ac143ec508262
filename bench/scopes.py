#!/usr/bin/env python3
"""9. Path scopes: what 1,000 live scoped claims cost the commit check and an acquire.

a. The commit check (``python -m gitlease.hookcheck pre-commit``, the program the installed
   hooks run), from a worktree bound to its own scoped claim and committing a file inside
   its own scope, in a store with 1,000 other live scoped claims; against the same check
   from a worktree bound to a plain claim in a store without any scope (goal: within 1.5x).
b. The same from a worktree bound to nothing, committing a file outside every scope: with
   1,000 scoped claims (the hook must start Python: the store has a scope index) against the
   same check in a store without scopes.
c. ``gitlease acquire R --paths P`` (a fresh resource and a pattern overlapping no other)
   against a plain ``gitlease acquire R`` in the same store with 1,000 scoped claims (goal:
   within 1.5x).

    python bench/scopes.py [--repeat 15] [--claims 1000]
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
from pathlib import Path

from common import ENV, GITLEASE, PYTHON, load_line, make_repo, median_ms, ms, time_interleaved


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True)


def cli(*args: str, cwd: Path) -> None:
    result = subprocess.run([*GITLEASE, *args], cwd=cwd, env=ENV, capture_output=True)
    if result.returncode != 0:
        raise SystemExit(f"gitlease {' '.join(args)}: {result.stderr.decode()}")


def fill(repo: Path, claims: int) -> None:
    """``claims`` live scoped claims on other resources, through the library (fast)."""
    from gitlease.api.lease import acquire
    from gitlease.store.location import open_store

    store = open_store(cwd=repo)
    for i in range(claims):
        acquire(store, f"bench/other/{i}", paths=[f"pkg{i}/**", f"docs/pkg{i}.md"],
                ttl="2h", bind=False)  # fmt: skip


def worktree(repo: Path, name: str) -> Path:
    path = repo.parent / name
    git("worktree", "add", "-q", "-b", name, str(path), cwd=repo)
    return path


def stage(wt: Path, name: str) -> None:
    path = wt / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("change\n")
    git("add", name, cwd=wt)


def check(wt: Path):
    args = [PYTHON, "-m", "gitlease.hookcheck", "pre-commit"]

    def call() -> None:
        result = subprocess.run(args, cwd=wt, env=ENV, capture_output=True)
        if result.returncode != 0:
            raise SystemExit(f"the check refused in {wt}: {result.stderr.decode()}")

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--claims", type=int, default=1000)
    args = parser.parse_args()

    scoped = make_repo()
    plain = make_repo()
    print(f"filling a store with {args.claims} live scoped claims ...", flush=True)
    fill(scoped, args.claims)

    own = worktree(scoped, "own")  # bound to its own scoped claim, commits inside it
    cli("acquire", "bench/own", "--paths", "mine/**", "--ttl", "2h", cwd=own)
    stage(own, "mine/a.py")
    own_plain = worktree(plain, "own")  # bound to a plain claim, no scopes anywhere
    cli("acquire", "bench/own", "--ttl", "2h", cwd=own_plain)
    stage(own_plain, "mine/a.py")
    free = worktree(scoped, "free")  # bound to nothing, commits outside every scope
    stage(free, "src/x.py")
    free_plain = worktree(plain, "free")
    stage(free_plain, "src/x.py")

    print(load_line())
    print("a. commit check, bound worktree, a file in its own scope")
    times = time_interleaved(
        {"with": check(own), "without": check(own_plain)}, args.repeat
    )  # fmt: skip
    print(f"    {args.claims} scoped claims: {ms(times['with'])}")
    print(f"    no scopes:          {ms(times['without'])}")
    print(f"    ratio {median_ms(times['with']) / median_ms(times['without']):.2f}x (goal 1.5x)")

    print("b. commit check, unbound worktree, a file outside every scope")
    times = time_interleaved({"with": check(free), "without": check(free_plain)}, args.repeat)
    print(f"    {args.claims} scoped claims: {ms(times['with'])}")
    print(f"    no scopes:          {ms(times['without'])}")
    print(f"    ratio {median_ms(times['with']) / median_ms(times['without']):.2f}x")

    print("c. acquire --paths against a plain acquire, same store")
    counter = itertools.count()

    def scoped_acquire() -> None:
        i = next(counter)
        cli("acquire", f"bench/new/{i}", "--paths", f"new{i}/**", "--no-bind", cwd=scoped)

    def plain_acquire() -> None:
        cli("acquire", f"bench/plain/{next(counter)}", "--no-bind", cwd=scoped)

    times = time_interleaved({"paths": scoped_acquire, "plain": plain_acquire}, args.repeat)
    print(f"    acquire --paths: {ms(times['paths'])}")
    print(f"    acquire:         {ms(times['plain'])}")
    print(f"    ratio {median_ms(times['paths']) / median_ms(times['plain']):.2f}x (goal 1.5x)")


if __name__ == "__main__":
    main()
