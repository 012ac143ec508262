#!/usr/bin/env python3
"""1. Library: one acquire+release cycle of gitlease, against filelock's SoftFileLease and
against the raw cost of the same design (two blob writes, two locked ref updates in pygit2).

The three take turns, cycle by cycle, in one process, on the default store of a fresh
repository (a bare repository under the per-user state directory). Then the gitlease cycle
is run again with its time split into parts (each part's own time, innermost counts): libgit2
(blob writes, ref transactions, ref reads), Ed25519 (key, sign, verify), receipt files,
the resource's guard, and gitlease's own Python.

    python bench/library.py [--repeat 300]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from common import load_line, make_repo, report, store_of


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=300)
    n = parser.parse_args().repeat

    import pygit2
    from filelock import SoftFileLease  # type: ignore[attr-defined]

    import gitlease
    from gitlease.store.location import open_store

    repo = make_repo()
    store = open_store(cwd=repo)
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

    raw = pygit2.Repository(str(store_of(repo)))  # the same store, other refs

    def raw_cycle(handle: Any = raw, prefix: str = "refs/raw/") -> None:
        """Two compare-and-swaps on a blob ref: the floor of this design."""
        ref = f"{prefix}{next(counter) % 50}"
        for payload in (b"held\n", b"released\n"):
            oid = handle.create_blob(payload + str(next(counter)).encode())
            with handle.transaction() as tx:
                tx.lock_ref(ref)
                current = handle.references.get(ref)
                _ = current.target if current is not None else None
                tx.set_target(ref, oid, message="raw")

    raw_synced: list[Any] = []

    def raw_synced_cycle() -> None:
        """The same, durable: libgit2's fsync switch is read by the object database at each
        write and by the ref database when a repository first touches refs (so: a handle
        opened with it on), as gitlease's acquire does (docs/reference/store.md)."""
        pygit2.settings.enable_fsync_gitdir(True)
        try:
            if not raw_synced:
                raw_synced.append(pygit2.Repository(str(store_of(repo))))
                raw_synced[0].references.get("HEAD")
            raw_cycle(raw_synced[0], "refs/raw-synced/")
        finally:
            pygit2.settings.enable_fsync_gitdir(False)

    safety_dir = Path(tempfile.mkdtemp(dir=store_of(repo)))  # the store's file system
    receipt_body = b"x" * 424  # a receipt of one claim, as long as the bench's
    mark = safety_dir / "mark"
    mark.write_bytes(b"1 refs/worklease/bench/0.lease\n")

    from hashlib import sha256

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    def durable_floor_cycle(*, contract: bool = False) -> None:
        """The fsynced raw cycle plus the two other writes the durability rules require of
        an acquire (docs/reference/store.md): a fresh receipt on disk before its claim (a
        temporary file synced, linked into place, its folder synced) and the high-water
        mark raised in place and fdatasynced. What no implementation of this design can
        skip: the rest of a gitlease cycle is bookkeeping and checks.

        ``contract``: also what the contract asks of a cycle besides durability (the
        **contract floor**): each record signed (an Ed25519 key derived from a fresh token
        at acquire, one signature at acquire, one at release), and the token taken out of
        the receipt at release, the receipt replaced through a temporary file and a rename
        so that a crash leaves the old text or the new (docs/security.md)."""
        raw_synced_cycle()
        n = next(counter)
        tmp, final = safety_dir / f".r{n}.tmp", safety_dir / f"r{n}.json"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, receipt_body)
        os.fsync(fd)
        os.close(fd)
        os.link(tmp, final)
        os.unlink(tmp)
        dfd = os.open(safety_dir, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
        fd = os.open(mark, os.O_RDWR)
        os.pwrite(fd, f"{n} refs/worklease/bench/0.lease\n".encode(), 0)
        os.fdatasync(fd)
        os.close(fd)
        if contract:
            key = Ed25519PrivateKey.from_private_bytes(sha256(os.urandom(32)).digest())
            key.public_key().public_bytes_raw()
            key.sign(receipt_body[:300])
            key.sign(receipt_body[:310])
            spent = safety_dir / f".r{n}.spent"
            fd = os.open(spent, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, receipt_body[:380])
            os.close(fd)
            os.replace(spent, final)  # (a rename over the receipt: ext4 flushes the new one)
        os.unlink(final)  # (the next acquire's tidy of a spent receipt, unsynced)

    cases = {
        "soft": softfilelease_cycle,
        "raw": raw_cycle,
        "synced": raw_synced_cycle,
        "floor": durable_floor_cycle,
        "contract": functools.partial(durable_floor_cycle, contract=True),
        "ours": gitlease_cycle,
    }
    for fn in cases.values():
        for _ in range(20):
            fn()  # warm up: caches, the first receipt directory, 50 refs each
    samples: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(n):
        for name, fn in cases.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            samples[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    print("1. library: acquire + release, in one process;", load_line())
    report("filelock.SoftFileLease acquire+release", samples["soft"])
    report("raw pygit2 blob + transaction CAS (x2)", samples["raw"])
    report("gitlease acquire+release", samples["ours"], samples["soft"], "SoftFileLease")
    report("raw cycle, fsynced by libgit2", samples["synced"], samples["raw"], "raw cycle")
    report("gitlease acquire+release", samples["ours"], samples["raw"], "raw cycle", goal=2.0)
    report("gitlease acquire+release", samples["ours"], samples["synced"], "fsynced raw cycle")
    report("durable floor: + receipt, + mark", samples["floor"], samples["synced"], "fsynced raw")
    report("gitlease acquire+release", samples["ours"], samples["floor"], "durable floor", goal=2.0)
    report("contract floor: + signatures, + rewrite", samples["contract"], samples["floor"],
           "durable floor")  # fmt: skip
    report("gitlease acquire+release", samples["ours"], samples["contract"], "contract floor")
    # CPU time of this process (user + system): what a busy machine's waiting leaves out
    # (the kernel's clock ticks make single samples coarse; the medians of many are not)
    report("  CPU: SoftFileLease", cpu["soft"])
    report("  CPU: raw cycle", cpu["raw"])
    report("  CPU: fsynced raw cycle", cpu["synced"])
    report("  CPU: durable floor", cpu["floor"])
    report("  CPU: contract floor", cpu["contract"])
    report("  CPU: gitlease", cpu["ours"], cpu["raw"], "raw cycle", goal=2.0)
    parts(gitlease_cycle, max(50, n // 3))


_SPENT: dict[str, float] = defaultdict(float)
_STACK: list[list[Any]] = []


def _category(name: str, owner: Any, attr: str) -> None:
    """Charge the time inside ``owner.attr`` to ``name`` (its own time: calls it makes into
    another category are charged there)."""
    real = getattr(owner, attr)

    @functools.wraps(real)
    def call(*args: Any, **kwargs: Any) -> Any:
        now = time.perf_counter()
        if _STACK:
            top = _STACK[-1]
            _SPENT[top[0]] += now - top[1]
        _STACK.append([name, now])
        try:
            return real(*args, **kwargs)
        finally:
            end = time.perf_counter()
            top = _STACK.pop()
            _SPENT[top[0]] += end - top[1]
            if _STACK:
                _STACK[-1][1] = end

    setattr(owner, attr, call)


def parts(cycle: Any, n: int) -> None:
    from gitlease.claims import ownership
    from gitlease.model import record
    from gitlease.receipts import bindings
    from gitlease.receipts import directory as receiptdir
    from gitlease.receipts import receipt as receipts
    from gitlease.state import guards
    from gitlease.store import local as store
    from gitlease.store import transaction

    for attr in ("compare_and_swap_many", "read", "read_blob", "write_blob"):
        _category("libgit2", store.LocalStore, attr)
    _category("libgit2", transaction.Writer, "read")
    for attr in ("verify", "_signing_key"):
        _category("ed25519", record, attr)
    _category("ed25519", record.SigningKey, "sign")
    for attr in ("write", "read", "check_directory", "private_dir"):
        _category("receipt files", receipts, attr)
    for attr in ("store_new", "retire", "sweep", "candidates", "held", "index_flat_receipts"):
        _category("receipt files", receiptdir, attr)
    for attr in ("bind", "unbind", "bindings"):
        _category("receipt files", bindings, attr)
    _category("receipt files", ownership, "_checked_dir")
    _category("guard", guards, "hold")
    totals = []
    for _ in range(n):
        start = time.perf_counter()
        _STACK.append(["gitlease's own Python", start])
        cycle()
        end = time.perf_counter()
        top = _STACK.pop()
        _SPENT[top[0]] += end - top[1]
        totals.append(end - start)
    total = sum(totals)
    line = ", ".join(
        f"{k} {v / n * 1000:.3f} ms ({v / total:.0%})"
        for k, v in sorted(_SPENT.items(), key=lambda kv: -kv[1])
    )
    print(f"    parts of a cycle (mean of {n}: {total / n * 1000:.2f} ms): {line}")


if __name__ == "__main__":
    main()
