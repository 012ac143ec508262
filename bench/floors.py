#!/usr/bin/env python3
"""The machine's floors, in one run, the cases taking turns: an interpreter start
(``python -c pass``), the import floor of a write (pygit2, click and cryptography's Ed25519),
one ``git update-ref``, and the durable-write floor (two small files written and fsynced,
with their directory), against which docs/performance.md gives its ratios.

    python bench/floors.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ENV, load_line, report, time_interleaved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    n = parser.parse_args().repeat
    scratch = Path(tempfile.mkdtemp(prefix="gitlease-floors-"))
    git_dir = scratch / "s.git"
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    env = {**ENV, "GIT_DIR": str(git_dir)}
    blob = (
        subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], input=b"x\n", env=env, capture_output=True
        )
        .stdout.strip()
        .decode()
    )
    imports = "import pygit2, click; from cryptography.hazmat.primitives.asymmetric import ed25519"
    counter = iter(range(10**9))

    def run(args: list[str]):  # type: ignore[no-untyped-def]
        return lambda: subprocess.run(args, env=env, capture_output=True, check=True)

    def durable_pair() -> None:
        for i in range(2):
            path = scratch / f"d{i}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, b"%d\n" % next(counter))
            os.fsync(fd)
            os.close(fd)
        dfd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)

    cases = {
        "pass": run([sys.executable, "-c", "pass"]),
        "imports": run([sys.executable, "-c", imports]),
        "update-ref": lambda: subprocess.run(
            ["git", "update-ref", f"refs/floor/{next(counter) % 10}", blob], env=env, check=True
        ),
        "durable": durable_pair,
    }
    samples = time_interleaved(cases, n)
    print("0. floors;", load_line())
    report("python -c pass", samples["pass"])
    report("import pygit2, click, cryptography", samples["imports"], samples["pass"], "pass")
    report("git update-ref", samples["update-ref"])
    report("two fsynced writes + directory fsync", samples["durable"])


if __name__ == "__main__":
    main()
