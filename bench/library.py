#!/usr/bin/env python3
"""1. Library: one acquire+release cycle of gitlease, against filelock's SoftFileLease and
against the raw cost of the same design (pygit2 blob write + transaction compare-and-swap).

    python bench/library.py [--repeat 300]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path

from common import make_repo, report, time_it


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=300)
    n = parser.parse_args().repeat

    import pygit2
    from filelock import SoftFileLease  # type: ignore[attr-defined]

    import gitlease
    from gitlease.location import open_store

    repo = make_repo()
    store = open_store(cwd=repo)  # the store the CLI uses there (the project's)
    counter = itertools.count()

    def gitlease_cycle() -> None:
        resource = f"bench/{next(counter) % 50}"
        gitlease.acquire(store, resource, ttl="5m", bind=False)
        gitlease.release(store, resource)

    lock_dir = Path(tempfile.mkdtemp())

    def softfilelease_cycle() -> None:
        lease = SoftFileLease(str(lock_dir / f"{next(counter) % 50}.lock"))
        lease.acquire()
        lease.release()

    raw = pygit2.Repository(str(repo / ".git"))

    def raw_cycle() -> None:
        """Two compare-and-swaps on a blob ref: the floor of this design."""
        ref = f"refs/raw/{next(counter) % 50}"
        for payload in (b"held\n", b"released\n"):
            oid = raw.create_blob(payload + str(next(counter)).encode())
            with raw.transaction() as tx:
                tx.lock_ref(ref)
                current = raw.references.get(ref)
                _ = current.target if current is not None else None
                tx.set_target(ref, oid, message="raw")

    soft = time_it(softfilelease_cycle, n)
    floor = time_it(raw_cycle, n)
    ours = time_it(gitlease_cycle, n)
    print("1. library: acquire + release, in one process")
    report("filelock.SoftFileLease acquire+release", soft)
    report("raw pygit2 blob + transaction CAS (x2)", floor)
    report("gitlease acquire+release", ours, soft, "SoftFileLease", goal=1.0)
    report("gitlease acquire+release", ours, floor, "raw cycle", goal=1.5)


if __name__ == "__main__":
    main()
