"""Revision floors: the last revision of a resource whose ref ``prune`` removed.

A resource's revisions must keep increasing for as long as its store lives: receipts,
``Gitlease-Claim`` trailers and the history checker name a claim by its revision. While
the resource's ref exists its record carries the revision, and the next acquire
continues from it. Once ``prune`` removes a tombstone, the floor carries it instead:

* ``prune`` writes ``<store>/worklease/floors/<hash>`` (the revision, fsynced) under the
  resource's guard *before* it removes the ref (:func:`write`);
* the next acquire of an absent ref continues from :func:`read` + 1 (under the guard);
* the retention pass folds loose floors into one sorted file, ``floors/packed``
  (``<hash> <revision>`` a line, the revision zero-padded to 19 digits so that every
  line is 61 bytes and a lookup is a binary search), so that a store that has seen a
  hundred thousand resources keeps one file of 6 MB rather than a hundred thousand
  files, and drops a floor once the resource's ref exists again with a higher revision
  (the record carries it then: only ``prune`` removes a ref, and it writes a new floor
  first).

Readers take no lock. :func:`read` looks at the loose file first, then the packed file,
and the packer writes the packed file (fsynced) before it removes the loose files it
folded in: a reader that misses the loose file finds its value packed. A floor is only
ever raised, never lowered.

(This is the only revision state outside the refs that gitlease keeps; a high-water mark
kept by the claims core for other reasons is independent of it.)
"""

from __future__ import annotations

import os
import re
from contextlib import suppress
from pathlib import Path

from .._util import lazy
from .._util.files import atomic_write
from ..gitio import layout

PACKED = "packed"
_LINE = lazy(rb"^([0-9a-f]{40}) ([0-9]{1,19})$", re.MULTILINE)
_NAME = lazy(r"[0-9a-f]{40}")
_WIDTH = 61  # 40 hex, a space, 19 digits, a newline


def digest(ref: str) -> str:
    """The 40 hex digits that name ``ref``'s guard and floor (SHA-256 of the ref name)."""
    return layout.ref_digest(ref)


def directory(git_dir: Path) -> Path:
    """Where the floors of the store at ``git_dir`` live."""
    return layout.floors_dir(git_dir)


def read(git_dir: Path, ref: str) -> int:
    """The floor of ``ref`` (0 if none): the loose file, else the packed entry, the higher."""
    name = digest(ref)
    loose = _read_loose(directory(git_dir) / name)
    return max(loose, _lookup_packed(git_dir, name))


def _lookup_packed(git_dir: Path, name: str) -> int:
    """``name``'s packed floor by binary search over the fixed-width lines (a whole scan if
    the file is not in that form, say after an edit by hand)."""
    try:
        fd = os.open(directory(git_dir) / PACKED, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        size = os.fstat(fd).st_size
        if size % _WIDTH:
            return read_packed(git_dir).get(name, 0)
        wanted = name.encode("ascii")
        low, high = 0, size // _WIDTH
        while low < high:
            mid = (low + high) // 2
            line = os.pread(fd, _WIDTH, mid * _WIDTH)
            match = _LINE.match(line.rstrip(b"\n"))
            if match is None:
                return read_packed(git_dir).get(name, 0)
            if match.group(1) == wanted:
                return int(match.group(2))
            if match.group(1) < wanted:
                low = mid + 1
            else:
                high = mid
        return 0
    except OSError:
        return 0
    finally:
        os.close(fd)


def _read_loose(path: Path) -> int:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return 0
    return int(text) if text.isdigit() and len(text) <= 19 else 0


def write(git_dir: Path, ref: str, revision: int) -> None:
    """Durably raise ``ref``'s floor to ``revision`` (the caller holds the guard). OSError."""
    path = directory(git_dir) / digest(ref)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, f"{max(revision, read(git_dir, ref))}\n".encode("ascii"), durable=True)


def loose(git_dir: Path) -> dict[str, int]:
    """Every loose floor: hash -> revision (unreadable files are left out, and kept)."""
    found: dict[str, int] = {}
    try:
        names = os.listdir(directory(git_dir))
    except OSError:
        return found
    for name in names:
        if _NAME.fullmatch(name):
            revision = _read_loose(directory(git_dir) / name)
            if revision:
                found[name] = revision
    return found


def read_packed(git_dir: Path) -> dict[str, int]:
    """The packed floors: hash -> revision (lines that do not parse are ignored)."""
    try:
        data = (directory(git_dir) / PACKED).read_bytes()
    except OSError:
        return {}
    packed: dict[str, int] = {}
    for match in _LINE.finditer(data):
        name, revision = match.group(1).decode(), int(match.group(2))
        packed[name] = max(revision, packed.get(name, 0))
    return packed


def write_packed(git_dir: Path, floors: dict[str, int]) -> None:
    """Replace the packed file with ``floors`` (fsynced; removed when empty). OSError."""
    path = directory(git_dir) / PACKED
    if not floors:
        with suppress(FileNotFoundError):
            path.unlink()
        return
    body = b"".join(f"{name} {floors[name]:019d}\n".encode("ascii") for name in sorted(floors))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, body, durable=True, mode=0o644)


def remove_loose(git_dir: Path, name: str) -> None:
    """Remove one loose floor (its value is packed, or its ref carries a higher one)."""
    with suppress(FileNotFoundError):
        (directory(git_dir) / name).unlink()
