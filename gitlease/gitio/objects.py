"""Loose objects read straight from their files, for the listings (``list``, the board) and
the commit check's one ref (:func:`read_blob_ref`).

A listing reads every record in the store. ``git`` reads a loose object in about three
times what Python takes to open the file and inflate it (git maps each file, looks in the
packs first, and more), so the listings name the refs with ``git for-each-ref`` (git alone
knows every rule of refs) and read the records themselves: a loose object is the zlib
stream of ``<type> <size>\\0<bytes>`` in ``objects/<2 hex>/<the rest>``. Anything else
(an object in a pack, an alternate's, a file that does not read back as its header says)
is left to ``git cat-file``: :meth:`LooseObjects.read` answers None.

The bytes are not trusted for being here: whoever reads a record checks it against its
object id or its signature (:func:`gitlease.model.claim.verified`), as for git's bytes.

:func:`read_blob_ref` reads one ref and its blob when both are loose: a claim's ref is
written by libgit2 as a loose ref file (``<git dir>/<ref>``, the object id and a newline)
pointing at a loose object, and stays so until a ``git gc`` or the retention pass packs
them. The commit check reads one such ref on every commit; read here, it costs two file
reads instead of a ``git cat-file`` process. Since the caller may trust the bytes for their
id (a binding names the record it wrote by id), this one checks that the bytes hash to the
id. Anything else (a packed ref or object, a symbolic ref, an object store with alternates,
SHA-256) answers None, and the caller asks git, which reads every form.

:func:`write_blob` writes one as git does, for a process that writes a record or two and
exits (:mod:`gitlease.store.plumbing`): an object file never changes once named, so a write
is one exclusive link of a whole file, and one that is already there is left as it is.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from types import TracebackType

from .._util import sharing as perms
from .._util.digest import sha1
from .._util.files import atomic_write, fsync_dir

#: A larger object is left to git (a claim record is under a kilobyte; this only bounds
#: what a forged object could make this process inflate).
MAX_BYTES = 1 << 20
_FIRST_READ = 4096  # (most records are a few hundred bytes deflated)
_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
_HEX = frozenset("0123456789abcdef")


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


def read_blob_ref(git_dir: Path, ref: str) -> tuple[str, bytes] | None:
    """``(object id, blob bytes)`` of ``ref`` in the repository at ``git_dir`` when the ref
    and its object are both loose and the bytes hash to the id; else None."""
    if not ref.startswith("refs/") or "/../" in ref or ref.endswith("/..") or "\0" in ref:
        return None
    try:
        with open(git_dir / ref, "rb") as f:
            text = f.read(100)
    except OSError:
        return None  # absent (maybe packed), a directory, unreadable: git decides
    oid = text[:40].decode("ascii", "replace")
    if len(text) != 41 or text[40:] != b"\n" or not _HEX.issuperset(oid):
        return None  # symbolic, SHA-256, damaged (git reads " <id>" as broken): git decides
    objects = git_dir / "objects"
    if os.path.exists(objects / "info" / "alternates"):
        return None
    try:
        with open(objects / oid[:2] / oid[2:], "rb") as f:
            found = _inflated(f.read(MAX_BYTES + 1))
    except OSError:
        return None  # packed (or unreadable): git decides
    if found is None or found[0] != "blob":
        return None
    body = found[1]
    digest = sha1(b"blob %d\0" % len(body))
    digest.update(body)
    if digest.hexdigest() != oid:
        return None
    return oid, body


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


def write_blob(git_dir: Path, data: bytes, *, durable: bool) -> str:
    """Store ``data`` as a loose blob of the SHA-1 repository at ``git_dir``; its object id.

    The file is written whole and linked under its name (:func:`~gitlease._util.files.
    atomic_write`, ``content_named``), read-only as git makes it, in the store's shared mode
    if several users share it. One already there is the same bytes (that is what its name
    says): its time is refreshed instead, as git does, so that a ``git gc`` sweeping old
    unreferenced objects does not take it before the ref that names it lands.
    ``durable``: the file, its folder and a folder made for it are synced before this
    returns. Raises ``OSError``; the caller says what the store was.
    """
    header = b"blob %d\0" % len(data)
    digest = sha1(header)
    digest.update(data)
    oid = digest.hexdigest()
    folder = git_dir / "objects" / oid[:2]
    path = folder / oid[2:]
    try:
        os.utime(path)
        return oid
    except FileNotFoundError:
        pass
    except OSError:  # (another user's object in a shared store: there, if not refreshed)
        if os.path.lexists(path):
            return oid
    packed = zlib.compress(header + data, 1)
    made = False
    for attempt in (1, 2):
        if not folder.is_dir():
            with perms.shared_umask(git_dir):
                try:
                    folder.mkdir()
                    made = True
                except FileExistsError:
                    pass
        try:
            atomic_write(path, packed, durable=durable, mode=0o444, content_named=True)
            break
        except FileExistsError:
            return oid  # (the same object, written meanwhile by another writer)
        except FileNotFoundError:
            if attempt == 2:
                raise  # (a `git gc` removes an empty folder: once more, as git does)
    if made and durable:
        fsync_dir(folder.parent)
    return oid
