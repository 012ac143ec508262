"""Loose objects read straight from their files, for the listings (``list``, the board).

A listing reads every record in the store. ``git`` reads a loose object in about three
times what Python takes to open the file and inflate it (git maps each file, looks in the
packs first, and more), so the listings name the refs with ``git for-each-ref`` (git alone
knows every rule of refs) and read the records themselves: a loose object is the zlib
stream of ``<type> <size>\\0<bytes>`` in ``objects/<2 hex>/<the rest>``. Anything else
(an object in a pack, an alternate's, a file that does not read back as its header says)
is left to ``git cat-file``: :meth:`LooseObjects.read` answers None.

The bytes are not trusted for being here: whoever reads a record checks it against its
object id or its signature (:func:`gitlease.model.claim.verified`), as for git's bytes.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from types import TracebackType

#: A larger object is left to git (a claim record is under a kilobyte; this only bounds
#: what a forged object could make this process inflate).
MAX_BYTES = 1 << 20
_FIRST_READ = 4096  # (most records are a few hundred bytes deflated)
_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


class LooseObjects:
    """The loose objects of one object directory, opened once (each object is then looked
    up from it: two path components, not the store's whole path). A context manager."""

    def __init__(self, objects: Path) -> None:
        try:
            self._dir: int | None = os.open(objects, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self._dir = None  # (every object is then left to git)

    def __enter__(self) -> LooseObjects:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._dir is not None:
            os.close(self._dir)
            self._dir = None

    def read(self, oid: str) -> tuple[str, bytes] | None:
        """``(type, bytes)`` of the loose object ``oid``, or None when it is not here as a
        loose object that reads back whole."""
        if self._dir is None or len(oid) < 4:
            return None
        try:
            fd = os.open(f"{oid[:2]}/{oid[2:]}", _FLAGS, dir_fd=self._dir)
        except (OSError, ValueError):
            return None
        try:
            packed = os.read(fd, _FIRST_READ)
            if len(packed) == _FIRST_READ:  # (a larger one: the rest, up to the bound)
                parts = [packed]
                size = len(packed)
                while size <= MAX_BYTES:
                    more = os.read(fd, MAX_BYTES + 1 - size)
                    if not more:
                        break
                    parts.append(more)
                    size += len(more)
                packed = b"".join(parts)
        except OSError:
            return None
        finally:
            os.close(fd)
        return _inflated(packed)


def _inflated(packed: bytes) -> tuple[str, bytes] | None:
    if len(packed) > MAX_BYTES:
        return None
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(packed, MAX_BYTES + 64)
    except zlib.error:
        return None
    if not inflate.eof or inflate.unconsumed_tail or inflate.unused_data:
        return None  # (truncated, larger than this reader takes, or trailed by more)
    head, nul, body = raw.partition(b"\0")
    kind, _, size = head.partition(b" ")
    if not nul or not size.isdigit() or int(size) != len(body) or not kind.isalpha():
        return None
    return kind.decode("ascii"), body
