"""Big stores for the maintenance benchmarks, built once and kept under /tmp.

A store of N resources as acquires, heartbeats and releases leave it, written straight
(records signed in this process, one ``git update-ref --stdin``, the reflogs, high-water
marks and guard files written as gitlease writes them): N acquires would take an hour on a
loaded two-core machine, this takes seconds to minutes. Each resource has a chain of
``history`` records of one claim (an acquire, then heartbeats), every fourth is then
released, and one in ten is an old tombstone (released ``OLD_DAYS`` days ago, by its record
and its reflog) that the retention pass removes. Active claims have a 30-day TTL on this
boot's clock, so a cached store stays as it was built until the machine reboots.

The store is kept at ``CACHE/store-N-hH.git`` (loose objects, as writes leave them); a copy
is taken for anything that changes it (:func:`scratch_copy`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("GITLEASE_BENCH_CACHE", "/tmp/gitlease-bench-stores"))
OLD_DAYS = 8
_TTL_MS = 30 * 86_400_000
_DAY_MS = 86_400_000
_GONE_BOOT = "00000000-0000-4000-8000-000000000000"


def cached_store(
    count: int, history: int = 3, env: dict[str, str] | None = None, *, plain: bool = False
) -> Path:
    """The cached store of ``count`` resources (built now if it is not there yet).

    ``plain``: what bench/common.py's ``populate`` makes instead (and bench/scale.py and
    bench/listing.py measure): one active record a resource, its ref and nothing else (no
    reflog, mark or guard), as the figures of docs/performance.md's round-three table were
    taken on."""
    path = CACHE / (f"store-{count}-plain.git" if plain else f"store-{count}-h{history}.git")
    if (path / "bench-complete").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    _build(path, count, 1 if plain else history, env or dict(os.environ), plain)
    (path / "bench-complete").write_text(f"{time.perf_counter() - started:.1f}s\n")
    return path


def scratch_copy(store: Path) -> Path:
    """A copy of ``store`` to change (``cp -a``: loose objects stay loose)."""
    target = Path(tempfile.mkdtemp(prefix="gitlease-bench-copy-", dir=CACHE)) / "store.git"
    subprocess.run(["cp", "-a", str(store), str(target)], check=True)
    return target


def packed_copy(store: Path, env: dict[str, str]) -> Path:
    """A copy of ``store`` as it is after its first retention pass: ``CACHE/...-packed.git``,
    made once by running the pass on a copy (``gitlease --store ... prune``)."""
    path = store.with_name(store.name.replace(".git", "-packed.git"))
    if (path / "bench-complete").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["cp", "-a", str(store), str(path)], check=True)
    (path / "bench-complete").unlink()
    gitlease = [os.environ.get("BENCH_PYTHON", "python3"), "-m", "gitlease"]
    subprocess.run([*gitlease, "--store", str(path), "prune"], env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    (path / "bench-complete").write_text("packed\n")
    return path


def _build(path: Path, count: int, history: int, env: dict[str, str], plain: bool) -> None:
    import pygit2

    from gitlease.gitio.layout import ref_digest
    from gitlease.model.clock import Now, rfc3339
    from gitlease.model.record import GUARDED, HELD, RELEASED, Record, SigningKey, new_claim_id
    from gitlease.model.refname import encode

    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True, env=env)
    for key, value in (
        ("core.logAllRefUpdates", "true"),
        ("gc.refs/worklease/*.reflogExpireUnreachable", "never"),
        ("gc.refs/worklease/*.reflogExpire", "never"),
        ("gitlease.autoPrune", "false"),  # the benchmarks run the pass themselves
    ):
        subprocess.run(["git", "--git-dir", str(path), "config", key, value], check=True, env=env)
    raw = pygit2.Repository(str(path))
    key = SigningKey("glt_" + "b" * 43)
    now = Now.read()
    who = b"Bench <bench@example.invalid>"
    zero = "0" * 40
    updates: list[str] = []
    logs: list[tuple[Path, bytes]] = []
    marks = path / "worklease" / "highwater"
    guards = path / "worklease" / "guards"
    for folder in () if plain else (marks, guards):
        folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        resource = f"bench/{i}"
        ref = encode(resource)
        old = not plain and i % 10 == 1
        released = not plain and (old or i % 4 == 0)
        # an old tombstone was written on a boot long gone; the rest up to an hour ago on
        # this one (no earlier than the boot)
        ago = OLD_DAYS * _DAY_MS if old else min(3_600_000, now.boot_ms // 2)
        start = now.wall_ms - ago
        boot, boot_start = (_GONE_BOOT, 5_000) if old else (now.boot, now.boot_ms - ago)
        claim, revision = new_claim_id(), 1
        previous: str | None = None
        lines: list[bytes] = []
        steps = [HELD] * history + ([RELEASED] if released else [])
        for step, state in enumerate(steps):
            stamp = rfc3339(start + step * 60_000)
            acquired = rfc3339(start)
            expires_ms = start + step * 60_000 + _TTL_MS
            record = Record(
                resource=resource, state=state, claim_id=claim, owner="bench",
                revision=revision, bundle_id=None, mode=GUARDED, acquired_at=acquired,
                renewed_at=stamp, released_at=stamp if state == RELEASED else None,
                expires_at=stamp if state == RELEASED else rfc3339(expires_ms),
                renew_by=stamp if state == RELEASED else rfc3339(expires_ms - _TTL_MS // 2),
                ttl_ms=_TTL_MS, boot_id=boot,
                boot_expires_ms=boot_start + step * 60_000 + (0 if state == RELEASED else _TTL_MS),
                note=None, checkpoint=None, public_key=key.public_hex, previous=previous,
            ).signed(key)  # fmt: skip
            oid = str(raw.create_blob(record.raw))
            seconds = (start + step * 60_000) // 1000
            verb = "acquire" if step == 0 else ("release" if state == RELEASED else "heartbeat")
            lines.append(
                f"{previous or zero} {oid} ".encode() + who
                + f" {seconds} +0000\tgitlease {verb}\n".encode()
            )  # fmt: skip
            previous = oid
        updates.append(f"update {ref} {previous}\n")
        if plain:
            continue
        logs.append((path / "logs" / ref, b"".join(lines)))
        digest = ref_digest(ref)
        (marks / digest).write_text(f"{revision} {ref}\n")
        (guards / digest).touch()
    subprocess.run(
        ["git", "--git-dir", str(path), "-c", "core.logAllRefUpdates=false", "update-ref",
         "--stdin"],
        input="".join(updates).encode(), env=env, check=True,
    )  # fmt: skip
    for log, text in logs:  # (after update-ref, which would add a line of its own)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_bytes(text)
