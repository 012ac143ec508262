"""One ref and its blob read straight from the files, when both are loose: no git process.

A claim's ref is written by libgit2 as a loose ref file (``<git dir>/<ref>``, the object id
and a newline) pointing at a loose object (``objects/xx/yyyy``, zlib-deflated
``blob <size>\\0<bytes>``), and stays so until a ``git gc`` or the retention pass packs
them. The commit check reads one such ref on every commit; read here, it costs two file
reads instead of a ``git cat-file`` process. Anything else (a packed ref or object, a
symbolic ref, an object store with alternates, SHA-256, bytes whose hash is not their
name) answers None, and the caller asks git, which reads every form.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path

_HEX = frozenset("0123456789abcdef")


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
    oid = text.decode("ascii", "replace").strip()
    if len(text) != 41 or len(oid) != 40 or not _HEX.issuperset(oid):
        return None  # symbolic, SHA-256, damaged: git decides
    objects = git_dir / "objects"
    if os.path.exists(objects / "info" / "alternates"):
        return None
    try:
        with open(objects / oid[:2] / oid[2:], "rb") as f:
            raw = zlib.decompress(f.read())
    except (OSError, zlib.error):
        return None  # packed (or damaged): git decides
    header, nul, body = raw.partition(b"\0")
    if not nul or not header.startswith(b"blob ") or header[5:] != str(len(body)).encode():
        return None
    if hashlib.sha1(raw, usedforsecurity=False).hexdigest() != oid:
        return None
    return oid, body
