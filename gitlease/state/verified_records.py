"""Records verified before, by object id, kept across processes for the reads.

``list``, ``free`` and ``show`` verify every record's Ed25519 signature; with
10,000 claims that is most of their time, and the records rarely change. A
record is a blob, named by the hash of its bytes, so "the record with object
id X verified" stays true for ever: the cache cannot go stale. It is one file
per user in the store, ``worklease/verified-<uid>``: a header line, then one
object id a line: the ids of the records a read just saw first, all of them,
then up to :data:`MAX_ENTRIES` older ones. Written whole with
:func:`~gitlease._util.files.atomic_write` by the reads; a write appends the ids of the records
it wrote (:func:`note_written`).

What it may do, and what not (docs/design.md, the verified-records cache):

* An id counts only for bytes that hash to it, computed here
  (:func:`gitlease.model.record.blob_oid`), never git's word for it: a replaced
  object file, a wrong line, a stale or copied cache gives a record its full
  check, never a pass.
* The file is used only if it is a regular file of this user's that nobody
  else can write, and only by the reads. Whoever could write it can write the
  store's refs too, and so show any self-signed record to a read anyway; the
  most a forged cache could do is make a read show as valid a record whose
  signature is broken. Every decision (acquire, heartbeat, release,
  ``verify``, the commit check) checks signatures itself, so a forged cache
  can never make a record count as someone's claim, nor make two holders.
* Anything off (another owner, a link, a bad header, too big, unreadable)
  makes the cache empty for that read; the next read that verifies something
  writes a new one.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from .._util.files import atomic_write
from ..gitio import layout

MAGIC = b"gitlease verified-records v1\n"
#: Beyond the ids a read just saw, at most this many older ones are kept (about 4 MB).
MAX_ENTRIES = 60_000
#: The file holds every id a read saw, however many (a cache smaller than the store would
#: make every ``list`` check again what did not fit, docs/performance.md, figure 5), up to
#: this many in all (65 MB: ten times the largest store gitlease is measured at).
_MAX_TOTAL = 1_000_000
_MAX_BYTES = len(MAGIC) + _MAX_TOTAL * 65


def path(git_dir: Path) -> Path:
    """This user's cache file in the store ``git_dir``."""
    return layout.verified_cache(git_dir, os.getuid())


def _read(git_dir: Path) -> bytes:
    """The cache file's bytes after the header, or b"" if it is not to be trusted."""
    try:
        fd = os.open(path(git_dir), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.getuid()
            or st.st_mode & 0o022
            or st.st_size > _MAX_BYTES
        ):
            return b""
        data = os.read(fd, _MAX_BYTES + 1)
    except OSError:
        return b""
    finally:
        os.close(fd)
    if not data.startswith(MAGIC):
        return b""
    return data[len(MAGIC) - 1 :]  # from the header's newline: every id sits between two


def load(git_dir: Path) -> frozenset[str]:
    """The object ids of records verified before (empty if there is no trusted cache)."""
    data = _read(git_dir)
    if not data:
        return frozenset()
    return frozenset(data.decode("ascii", "replace").split("\n"))


def contains(git_dir: Path, oid: str) -> bool:
    """Whether ``oid`` was verified before (one read, no set built: for ``show``)."""
    data = _read(git_dir)
    return bool(data) and b"\n" + oid.encode("ascii", "replace") + b"\n" in data


def note_written(git_dir: Path, oids: Iterable[str]) -> None:
    """Add the ids of records this process just wrote (it signed them: a write is its own
    proof), so that the next read of them here, ``show`` or ``list`` right after an acquire,
    checks no signature and loads no ``cryptography`` (its import: 8 ms on a quiet machine).

    Appended, not rewritten: a write costs one small append whatever the cache holds, and
    only to a file a read would trust (made whole by :func:`save` if there is none). Best
    effort, and nothing it can go wrong with counts: a line torn by a crash is an id that no
    record's bytes hash to, an append lost to a read's rewrite is a miss, and a file grown
    past its bound is not trusted until the next read writes it afresh."""
    ids = [oid for oid in oids if oid]
    if not ids:
        return
    target = path(git_dir)
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(target, flags)  # (O_NONBLOCK: a FIFO put there must not hold a write)
    except FileNotFoundError:
        save(git_dir, ids)
        return
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022:
            text = "".join(f"{oid}\n" for oid in ids).encode("ascii", "replace")
            os.write(fd, text)  # (one write of a few lines: O_APPEND puts it whole at the end)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(git_dir: Path, seen: Iterable[str], known: Iterable[str] = ()) -> None:
    """Write the cache: ``seen`` (ids just verified or found valid) first, every one, then
    ``known`` (what the cache held), to :data:`MAX_ENTRIES` more. Best effort: a cache that
    cannot be written costs the next read its checks, nothing else."""
    entries = dict.fromkeys(seen)
    limit = min(len(entries) + MAX_ENTRIES, _MAX_TOTAL)
    for oid in known:
        if len(entries) >= limit:
            break
        entries.setdefault(oid)
    lines = [oid for oid in entries if oid][:_MAX_TOTAL]
    data = MAGIC + "".join(f"{oid}\n" for oid in lines).encode("ascii", "replace")
    with contextlib.suppress(OSError):
        target = path(git_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data, durable=False, private=True)
