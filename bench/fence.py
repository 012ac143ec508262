#!/usr/bin/env python3
"""8. Fenced pushes: what the server's pre-receive hook and the commit hook's trailer step cost.

a. A push of 1,000 new commits made under one claim (each with its Gitlease-Claim trailer)
   to a bare repository with `gitlease hooks install --server`, against the same push to the
   same repository without the hook (goal: the hook adds well under a second). The two
   servers take turns; between rounds the branch is deleted again, so every round's commits
   are new to the server.
b. The parts of the hook's check, in one process on the server: listing the new commits
   (one git log), reading the claim's record (one git cat-file), verifying and judging it;
   and the hook as a whole process.
c. A push that only moves a claim ref (how every gitlease write reaches the server), with
   the hook (its shell fast path, no Python) and without.
d. The commit hook's trailer step: git commit through the installed hooks with
   gitlease.trailers on, against the same hooks with it off (a bound, live claim).

    python bench/fence.py [--repeat 10] [--commits 1000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import time
from pathlib import Path

from common import ENV, GITLEASE, PYTHON, make_repo, report, time_interleaved

from gitlease.fence import check as fencecheck
from gitlease.fence import git as fencegit
from gitlease.fence.trailer import Trailer, parse_trailer

RESOURCE = "bench/fenced"


def run(args: list[str], cwd: Path, *, input: bytes | None = None) -> bytes:
    result = subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, input=input)
    if result.returncode != 0:
        raise SystemExit(f"{args}: {result.stderr.decode()}")
    return result.stdout


def timed(args: list[str], cwd: Path, *, input: bytes | None = None) -> float:
    start = time.perf_counter()
    run(args, cwd, input=input)
    return time.perf_counter() - start


def make_commits(client: Path, trailer: str, count: int) -> str:
    """``count`` commits on top of HEAD, each with the trailer, in one git fast-import."""
    parent = run(["git", "rev-parse", "HEAD"], client).decode().strip()
    stream = []
    for i in range(count):
        message = f"change {i}\n\n{trailer}\n".encode()
        stream.append(b"commit refs/heads/bench\n")
        stream.append(b"mark :%d\n" % (i + 1))
        stream.append(b"committer Bench <bench@example.invalid> %d +0000\n" % (1_700_000_000 + i))
        stream.append(b"data %d\n%s" % (len(message), message))
        stream.append(b"from %s\n" % (parent.encode() if i == 0 else b":%d" % i))
        stream.append(b"M 644 inline file-%d\ndata 2\n%d\n\n" % (i, i % 10))
    run(["git", "fast-import", "--quiet"], client, input=b"".join(stream))
    return run(["git", "rev-parse", "refs/heads/bench"], client).decode().strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--commits", type=int, default=1000)
    options = parser.parse_args()
    n, count = options.repeat, options.commits

    seed = make_repo()
    base = seed.parent
    fenced, plain = base / "fenced.git", base / "plain.git"
    for server in (fenced, plain):
        run(["git", "clone", "-q", "--bare", str(seed), str(server)], base)
    run([*GITLEASE, "hooks", "install", "--server"], fenced)
    client = base / "client"
    run(["git", "clone", "-q", fenced.as_uri(), str(client)], base)
    run(["git", "config", "gitlease.remote", "origin"], client)
    run(["git", "remote", "add", "plain", plain.as_uri()], client)
    doc = json.loads(run([*GITLEASE, "acquire", RESOURCE, "--ttl", "1d", "--json"], client))

    trailer = Trailer(RESOURCE, doc["claim_id"], doc["revision"]).line()
    tip = make_commits(client, trailer, count)

    def push_to(remote: str):
        def call() -> None:
            run(["git", "push", "-q", remote, "+refs/heads/bench:refs/heads/bench"], client)
            run(["git", "push", "-q", remote, ":refs/heads/bench"], client)  # new again

        return call

    print(f"8a. push of {count} new commits under one claim (servers take turns)")
    samples = time_interleaved({"without": push_to("plain"), "with": push_to("origin")}, n)
    without = statistics.median(samples["without"])
    report("push + delete, server without the hook", samples["without"])
    report("push + delete, server with the hook", samples["with"], samples["without"], "without")
    report("added by the hook", [max(0.0, s - without) for s in samples["with"]])

    print(f"8b. the hook's check of those {count} commits, on the server")
    line = f"{'0' * 40} {tip} refs/heads/bench\n"
    update = fencegit.parse_updates(line)
    git = fencegit.Git(fenced)
    parts: dict[str, list[float]] = {k: [] for k in ("list", "read", "judge", "check")}
    for _ in range(n + 1):
        start = time.perf_counter()
        new = fencegit.list_commits(git, [tip], options=fencegit.NEW_TO_THE_REPOSITORY)
        listed = time.perf_counter()
        blobs = fencegit.read_blobs(git, [parse_trailer(new[0].trailers[0]).ref])
        read = time.perf_counter()
        findings = fencecheck.judge_commits(git, new)
        judged = time.perf_counter()
        report_ = fencecheck.check_push(update, commits=git, claims=git)
        checked = time.perf_counter()
        assert len(new) == count and blobs and report_.ok and findings[0].accepted
        for key, value in zip(parts, (listed - start, read - listed, judged - read,
                                      checked - judged), strict=True):  # fmt: skip
            parts[key].append(value)
    for key in parts:
        parts[key] = parts[key][1:]  # the first round warms up
    report("list the new commits (one git log)", parts["list"])
    report("read the claim's record (one cat-file)", parts["read"])
    report("judge: parse trailers, read + verify record", parts["judge"])
    report("check_push, all of it", parts["check"])
    hook = fenced / "hooks" / "pre-receive"
    process = time_interleaved(
        {
            "python -c pass": lambda: timed([PYTHON, "-c", "pass"], fenced),
            "hook": lambda: timed([str(hook)], fenced, input=line.encode()),
        },
        n,
    )
    report("python -c pass", process["python -c pass"])
    report("the hook, whole process", process["hook"], process["python -c pass"], "python -c pass")

    print("8c. a push that only moves a claim ref (the hook's shell fast path)")
    counter = itertools.count()

    def claim_push(remote: str):
        def call() -> None:
            blob = run(["git", "hash-object", "-w", "--stdin"], client,
                       input=f"{next(counter)}\n".encode()).decode().strip()  # fmt: skip
            run(["git", "push", "-q", remote, f"+{blob}:refs/worklease/bench/x.lease"], client)

        return call

    pushes = time_interleaved({"without": claim_push("plain"), "with": claim_push("origin")}, n * 3)
    report("claim-ref push, server without the hook", pushes["without"])
    report("claim-ref push, server with the hook", pushes["with"], pushes["without"], "without")

    print("8d. git commit through the hooks, gitlease.trailers on against off")
    on, off = make_repo(), make_repo()
    for repo in (on, off):
        run([*GITLEASE, "hooks", "install"], repo)
        run([*GITLEASE, "acquire", RESOURCE, "--ttl", "1d"], repo)
    run(["git", "config", "gitlease.trailers", "true"], on)
    commits = time_interleaved({"off": committer(off), "on": committer(on)}, n * 3)
    report("git commit, hooks, trailers off", commits["off"])
    report("git commit, hooks, trailers on", commits["on"], commits["off"], "trailers off")


def committer(repo: Path):
    counter = itertools.count()

    def commit() -> None:
        (repo / "f").write_text(f"{next(counter)}\n")
        run(["git", "commit", "-qam", "x"], repo)

    return commit


if __name__ == "__main__":
    main()
