"""A worktree's receipt directory: one directory per resource, and an index of the rest.

Every lookup and every tidy touches a bounded number of files, however many
resources the worktree worked through (docs/reference/store.md)::

    receipts/<hash16>/<claim id>.json        the receipt of one claim
    receipts/<hash16>/<claim id>.keepalive.log
    receipts/<hash16>/<bundle id>.bundle     a bundle with a member on this resource (empty)
    receipts/bundles/<bundle id>.json        the receipt of a bundle
    receipts/held/<entry>                    a receipt that has its token (empty)
    receipts/spent/<hour>/<entry>            a receipt whose token went in that hour (empty)

``<entry>`` is ``<hash16>-<claim id>`` or ``bundle-<bundle id>``: the file name,
without ``.json``, that the same receipt had in the flat layout written before
this one (``receipts/<hash16>-<claim id>.json``, ``receipts/bundle-<bundle
id>.json``). Receipts of that layout are read where they are: a lookup by
resource also tries the flat name of the claim (or bundle) now at the ref, and
the first use of a directory indexes its flat receipts once (the ``layout``
file says it was done), so that lookups without a resource and the tidying of
spent receipts find them too. They are never moved: bindings and running
keepalive processes name them by path.

The index holds no data, only names, and every receipt it leads to is read
and judged like any other; a missing or stale entry costs a lookup, never an
ownership decision.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from .._util import lazy
from .._util.files import atomic_write, mtime
from ..errors import GitleaseError, ReceiptError, StoreError, UsageError
from ..gitio import layout
from .receipt import Receipt, private_dir, read, remove, resource_key, write

#: A released claim's receipt (no token) is kept this long, for a retried release.
SPENT_RECEIPT_SECONDS = 86_400
#: How many spent receipts one acquire looks at when tidying.
SWEEP_LIMIT = 8
#: The keepalive of a receipt logs next to it: ``<receipt without .json>.keepalive.log``.
LOG_SUFFIX = ".keepalive.log"
#: A keepalive listens for a changed TTL on ``<receipt without .json>.keepalive.<pid>.wake``.
WAKE_SUFFIX = ".wake"
_LAYOUT = "layout"
_HELD, _SPENT, _BUNDLES = "held", "spent", "bundles"
_FLAT = lazy(r"(?:[0-9a-f]{16}-[^/]+|bundle-[^/]+)\.json")
_KEY = lazy(r"[0-9a-f]{16}")


def default_dir(worktree_git_dir: Path | None, state_home: Path) -> Path:
    """The receipt directory of a worktree (the per-user state outside one)."""
    return layout.receipts_dir(worktree_git_dir) if worktree_git_dir else state_home / "receipts"


def receipt_path(directory: Path, ref: str, claim_id: str) -> Path:
    """Where a fresh receipt of one claim goes."""
    return directory / resource_key(ref) / f"{claim_id}.json"


def bundle_path(directory: Path, bundle_id: str) -> Path:
    """Where a bundle's receipt goes."""
    return directory / _BUNDLES / f"{bundle_id}.json"


def log_path(receipt_path: Path) -> Path:
    """Where the keepalive of a receipt logs: next to it, private like it."""
    return receipt_path.with_name(receipt_path.name.removesuffix(".json") + LOG_SUFFIX)


def wake_path(receipt_path: Path, pid: int) -> Path:
    """The FIFO on which the keepalive ``pid`` of a receipt is told to look again (a
    heartbeat changed the TTL it keeps at): ``<receipt without .json>.keepalive.<pid>.wake``."""
    stem = receipt_path.name.removesuffix(".json")
    return receipt_path.with_name(f"{stem}.keepalive.{pid}{WAKE_SUFFIX}")


def poke(path: Path) -> None:
    """Wake the keepalive listening on the FIFO ``path``, if one does (best effort; a file
    that is not a FIFO is never written, a FIFO nobody reads is left alone)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # none, or nobody listening (ENXIO)
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b"\n")
    except OSError:
        pass
    finally:
        os.close(fd)


def _entry(rec: Receipt) -> str:
    if rec.bundle_id is not None:
        return f"bundle-{rec.bundle_id}"
    return f"{resource_key(rec.claims[0].ref)}-{rec.claims[0].claim_id}"


def _paths_of(directory: Path, entry: str) -> tuple[Path, Path]:
    """The receipt an index entry names: (this layout's path, the flat layout's)."""
    if entry.startswith("bundle-"):
        new = directory / _BUNDLES / f"{entry[len('bundle-') :]}.json"
    else:
        key, _, claim_id = entry.partition("-")
        new = directory / key / f"{claim_id}.json"
    return new, directory / f"{entry}.json"


def _resolve(directory: Path, entry: str) -> Path | None:
    for path in _paths_of(directory, entry):
        if os.path.lexists(path):
            return path
    return None


def _in_layout(directory: Path, path: Path) -> bool:
    """Whether ``path`` is a receipt of this directory (either layout), not an explicit one."""
    return path.parent == directory or path.parent.parent == directory


def _touch(path: Path) -> None:
    """Create the empty file ``path`` (0600) with its directory; nothing if it exists."""
    for _ in range(3):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            return
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                path.parent.mkdir(mode=0o700, parents=True)
    raise StoreError(f"cannot create {path}")


def _rmdir_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)


# ------------------------------------------------------------------ writing


def store_new(directory: Path, rec: Receipt) -> None:
    """Write a fresh receipt of this directory, then index it (before its claim is written).

    A bundle's receipt gets a pointer in each member's directory. The directory
    that a tidy removed meanwhile (it was empty) is made again.
    """
    private_dir(directory)
    index_flat_receipts(directory)
    for attempt in range(3):
        private_dir(rec.path.parent)
        try:
            write(rec, exclusive=True)
            break
        except (UsageError, StoreError):
            if attempt == 2 or os.path.lexists(rec.path.parent):
                raise
    try:
        if rec.bundle_id is not None:
            for claim in rec.claims:
                _touch(directory / resource_key(claim.ref) / f"{rec.bundle_id}.bundle")
        _touch(directory / _HELD / _entry(rec))
    except (OSError, GitleaseError):
        discard(directory, rec)
        raise


def discard(directory: Path, rec: Receipt) -> None:
    """Remove a receipt whose claim was never written, with its index entries."""
    remove(directory / _HELD / _entry(rec))
    _remove_receipt(directory, rec.path, rec)


def retire(directory: Path, rec: Receipt) -> None:
    """Index a receipt that just lost its token as spent in this hour (tidied a day later).

    Receipts outside this directory (explicit paths) are never indexed nor tidied.
    """
    if not _in_layout(directory, rec.path):
        return
    entry = _entry(rec)
    bucket = directory / _SPENT / str(int(time.time() // 3600))
    for _ in range(3):
        try:
            os.rename(directory / _HELD / entry, bucket / entry)
            return
        except FileNotFoundError:
            if not (directory / _HELD / entry).exists():
                break  # not indexed (a receipt written before the index existed)
            with contextlib.suppress(FileExistsError):
                bucket.mkdir(mode=0o700, parents=True)
        except OSError:
            break
    with contextlib.suppress(OSError, GitleaseError):
        _touch(bucket / entry)


def _remove_receipt(
    directory: Path, path: Path, rec: Receipt | None, *, keep_dir: bool = False
) -> None:
    """Delete a receipt, its keepalive log, a bundle's member pointers, and its directory
    if nothing is left in it (index entries naming it are dropped when next met).
    ``keep_dir``: the directory holds another receipt (no ``rmdir`` to try)."""
    remove(path)
    remove(log_path(path))
    if rec is not None and rec.bundle_id is not None:
        for claim in rec.claims:
            pointer = directory / resource_key(claim.ref) / f"{rec.bundle_id}.bundle"
            remove(pointer)
            _rmdir_if_empty(pointer.parent)
    if path.parent.parent == directory and path.parent.name != _BUNDLES and not keep_dir:
        _rmdir_if_empty(path.parent)


def remove_receipt(directory: Path, rec: Receipt) -> None:
    """Delete a receipt of this directory that can never prove anything again."""
    remove(directory / _HELD / _entry(rec))
    _remove_receipt(directory, rec.path, rec)


def remove_replaced(directory: Path, rec: Receipt, fresh: Receipt) -> None:
    """Delete ``rec``, a receipt of this directory that ``fresh`` (a receipt of the same
    resource, in the same place) replaced. The directory stays: it holds ``fresh``. A
    receipt without its token has no entry among the held (its release moved it to the
    spent; one a crash left there is dropped when next met, like any stale entry)."""
    if rec.token is not None:
        remove(directory / _HELD / _entry(rec))
    _remove_receipt(directory, rec.path, rec, keep_dir=rec.path.parent == fresh.path.parent)


# ------------------------------------------------------------------ finding


def candidates(
    directory: Path, ref: str, claim_id: str | None = None, bundle_id: str | None = None
) -> list[Path]:
    """Receipts that may hold a claim on ``ref``, newest first: those in the resource's own
    directory, the bundles pointing there, and the flat-layout receipt of ``claim_id``
    (or ``bundle_id``), the claim now at the ref, if there is one."""
    key = resource_key(ref)
    found: dict[str, float] = {}  # path -> modification time (files that went: none)
    elsewhere: list[str] = []  # bundles' receipts and the flat layout's, stat'ed below
    try:
        with os.scandir(os.path.join(directory, key)) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                if name.endswith(".json"):
                    with contextlib.suppress(OSError):  # (removed since the scan: not one)
                        found[entry.path] = entry.stat(follow_symlinks=False).st_mtime
                elif name.endswith(".bundle"):
                    elsewhere.append(str(bundle_path(directory, name.removesuffix(".bundle"))))
    except OSError:
        pass
    if claim_id is not None:
        elsewhere.append(os.path.join(directory, f"{key}-{claim_id}.json"))
    if bundle_id is not None:
        elsewhere.append(os.path.join(directory, f"bundle-{bundle_id}.json"))
    for path in elsewhere:
        with contextlib.suppress(OSError):
            found[path] = os.lstat(path).st_mtime
    return [Path(p) for p in sorted(found, key=found.__getitem__, reverse=True)]


def held(directory: Path, *, bundles: bool) -> list[Path]:
    """The receipts here that still have their token (by the index), of bundles or not."""
    index_flat_receipts(directory)
    out = []
    for entry in _names(directory / _HELD):
        if entry.startswith("bundle-") != bundles:
            continue
        path = _resolve(directory, entry)
        if path is None:  # the receipt is gone (removed by hand): so goes its entry
            remove(directory / _HELD / entry)
        else:
            out.append(path)
    return out


def recently_spent(directory: Path, *, bundles: bool) -> list[Path]:
    """Receipts here that lost their token in the newest hour that has any."""
    index_flat_receipts(directory)
    for bucket in sorted(_buckets(directory), reverse=True):
        paths = [
            p
            for e in _names(directory / _SPENT / str(bucket))
            if e.startswith("bundle-") == bundles and (p := _resolve(directory, e)) is not None
        ]
        if paths:
            return paths
    return []


def every_receipt(directory: Path) -> Iterator[Path]:
    """Every receipt file here, in both layouts (for ``verify``: linear, on purpose)."""
    for name in sorted(_names(directory)):
        path = directory / name
        if _FLAT.fullmatch(name):
            yield path
        elif name == _BUNDLES or _KEY.fullmatch(name):
            for inner in sorted(_names(path)):
                if inner.endswith(".json"):
                    yield path / inner


def _names(directory: Path) -> list[str]:
    try:
        return [n for n in os.listdir(directory) if not n.startswith(".")]
    except OSError:
        return []


def _buckets(directory: Path) -> list[int]:
    return [int(n) for n in _names(directory / _SPENT) if n.isascii() and n.isdigit()]


# ------------------------------------------------------------------ tidying


def sweep(
    directory: Path,
    older_than: float = SPENT_RECEIPT_SECONDS,
    limit: int = SWEEP_LIMIT,
    *,
    every_hour: bool = False,
) -> int:
    """Delete up to ``limit`` receipts that lost their token more than ``older_than`` ago.

    They prove nothing, and a retried release has long been answered; without
    this an agent working through a long backlog would keep one file per
    resource forever. The oldest hours are looked at first, ``limit`` entries
    at most, and only hours that began ``older_than`` ago, so an acquire pays
    the same however many there are (a receipt written again since, by a
    retried release, waits for its own time). Receipts with a token are never
    touched (``verify`` reports orphans). ``every_hour`` (the retention pass, which
    may take its time): look at every hour, and judge each receipt by its file's time
    alone. The number deleted.
    """
    index_flat_receipts(directory)
    cutoff = time.time() - older_than
    removed = looked = 0
    for bucket in sorted(_buckets(directory)):
        if looked >= limit or (bucket * 3600 > cutoff and not every_hour):
            break  # (the hours after this one are younger still: nothing more to look at)
        bucket_dir = directory / _SPENT / str(bucket)
        try:
            with os.scandir(bucket_dir) as it:
                entries = [e.name for e in islice(it, limit - looked)]
        except OSError:
            continue
        young = 0
        for entry in entries:
            looked += 1
            path = _resolve(directory, entry)
            if path is not None:
                if mtime(path) > cutoff:
                    young += 1
                    continue
                try:
                    rec = read(path)
                except ReceiptError:
                    continue  # not ours to judge: verify reports it
                if rec.token is not None:
                    continue  # taken again in place: not spent
                _remove_receipt(directory, path, rec)
                removed += 1
            remove(bucket_dir / entry)
        _rmdir_if_empty(bucket_dir)
        if young and not every_hour:
            break  # the later hours are younger still
    return removed


def index_flat_receipts(directory: Path) -> None:
    """Once per directory: index the receipts of the flat layout (see the module's doc)."""
    marker = directory / _LAYOUT
    if os.path.lexists(marker) or not directory.is_dir():
        return
    for name in _names(directory):
        if not _FLAT.fullmatch(name):
            continue
        path = directory / name
        try:
            rec = read(path)
        except GitleaseError:
            continue
        entry = name.removesuffix(".json")
        if rec.token is not None:
            target = directory / _HELD / entry
        else:
            target = directory / _SPENT / str(int(mtime(path) // 3600)) / entry
        with contextlib.suppress(OSError, GitleaseError):
            _touch(target)
    with contextlib.suppress(OSError):
        atomic_write(marker, b"2\n", durable=False, exclusive=True)
