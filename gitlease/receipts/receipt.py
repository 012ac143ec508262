"""Receipts: the only place a bearer token is written, one small private JSON file each.

A receipt is written before the claim it describes becomes visible, so an
interrupted acquire can be settled by comparing it with ``gitlease show``. It
names the store and each claim (resource, ref, claim id, revision). Where
receipts live and how they are found: :mod:`gitlease.receipts.directory`; explicit
paths: :mod:`gitlease.receipts.reservation`; bindings (which also know the object id of
the holder's last record): :mod:`gitlease.receipts.bindings`.

This module must stay importable without pygit2, click or cryptography: the
commit hook uses it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from .._util import TYPE_CHECKING
from .._util.digest import sha256
from .._util.files import atomic_write
from .._util.value import Value
from ..errors import ReceiptError, StoreError, UsageError
from ..gitio import layout

if TYPE_CHECKING:
    from typing import Any, ClassVar


RECEIPT_ENV = "GITLEASE_RECEIPT"
_VERSION = 1


#: A receipt named by its path, as the Python API takes one (None: the worktree's own).
Receipted = str | os.PathLike[str] | None


class ClaimRef(Value):
    """One claim named by a receipt: enough to find it, and to fence against it.

    ``oid`` is not in the receipt's file: it is the object id of the holder's last
    record of this claim, as this worktree's binding knows it (None: not known),
    filled in where the binding was read (:func:`gitlease.model.claim.is_ours`).
    """

    __slots__ = ("resource", "ref", "claim_id", "revision", "oid")
    _defaults: ClassVar[dict[str, Any]] = {"oid": None}
    resource: str
    ref: str
    claim_id: str
    revision: int
    oid: str | None


#: The largest receipt that is written, and read (1 MiB).
MAX_RECEIPT_BYTES = 1 << 20


class Receipt(Value):
    """A caller's proof of ownership. ``token`` is None once the claim was released."""

    __slots__ = ("path", "store", "token", "claims", "bundle_id")
    _defaults: ClassVar[dict[str, Any]] = {"bundle_id": None}
    path: Path
    store: str
    token: str | None
    claims: tuple[ClaimRef, ...]
    bundle_id: str | None

    def __repr__(self) -> str:  # never show the token
        ids = ", ".join(c.claim_id for c in self.claims)
        return f"Receipt({str(self.path)!r}, claims=[{ids}], token={'set' if self.token else None})"

    def claim_for(self, resource: str) -> ClaimRef | None:
        """The receipt's claim on ``resource``, if it has one."""
        for claim in self.claims:
            if claim.resource == resource:
                return claim
        return None

    def to_json(self) -> str:
        """The file's text (docs/reference/store.md): what ``json.dumps(doc, indent=2)``
        writes, put together by hand (with ``indent``, :mod:`json` uses its slow encoder,
        and every acquire and release writes a receipt)."""
        claims = ",\n".join(
            "    {\n"
            f'      "resource": {_str(c.resource)},\n'
            f'      "ref": {_str(c.ref)},\n'
            f'      "claim_id": {_str(c.claim_id)},\n'
            f'      "revision": {int(c.revision)}\n'
            "    }"
            for c in self.claims
        )
        copy = working_copy_of(self.path)
        return (
            "{\n"
            f'  "version": {_VERSION},\n'
            f'  "store": {_str(self.store)},\n'
            + (f'  "working_copy": {_str(copy)},\n' if copy is not None else "")
            + f'  "bundle_id": {_str(self.bundle_id)},\n'
            f'  "claims": [\n{claims}\n  ],\n'
            f'  "token": {_str(self.token)}\n'
            "}\n"
        )


def working_copy_of(path: Path) -> str | None:
    """The working copy a receipt or binding file at ``path`` belongs to: the device and
    inode of the git directory whose ``worklease/receipts/`` or ``worklease/bindings/``
    holds it (None for a file elsewhere, an explicit ``--receipt`` path).

    A copy of a working copy (``cp -a``, a restored backup) has a new git directory, so
    its copied receipts and bindings name another one and are refused there: a copy is
    never the original's holder. (A move within one file system keeps the inode.)
    """
    git_dir = layout.is_worktree_file(path)
    if git_dir is None:
        return None
    try:
        st = os.stat(git_dir)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def foreign_copy(path: Path, recorded: object) -> bool:
    """Whether a file at ``path`` that recorded the working copy ``recorded`` was written
    in another working copy than the one it is in now (a file without one: never)."""
    return isinstance(recorded, str) and recorded != working_copy_of(path)


def _str(text: str | None) -> str:
    """A JSON string (ASCII, as ``json.dumps`` writes it), or ``null``."""
    return "null" if text is None else json.encoder.encode_basestring_ascii(text)


def resource_key(ref: str) -> str:
    """Short stable file-name stem for a resource's receipts and binding."""
    return sha256(ref.encode("utf-8")).hexdigest()[:16]


def check_directory(directory: Path, what: str = "receipt directory") -> None:
    """Refuse a directory that someone else could change under us (USAGE).

    It must be a real directory (not a symbolic link), owned by this user (or
    root), and writable by nobody else: otherwise another user could remove,
    replace or pre-create files in it. Checked on every use, not only when the
    directory is made: a directory can be changed (or swapped for a link) later.
    """
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        raise UsageError(f"{what} {directory} does not exist") from None
    except OSError as exc:
        raise StoreError(f"cannot inspect the {what} {directory}: {exc.strerror}") from None
    _judge_directory(directory, st, what)


def _judge_directory(directory: Path, st: os.stat_result, what: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{what} {directory} is a symbolic link; refusing it")
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what} {directory} is not a directory")
    if st.st_uid not in (os.getuid(), 0):
        raise UsageError(f"{what} {directory} belongs to another user; refusing it")
    if st.st_mode & 0o022:
        raise UsageError(
            f"{what} {directory} has mode {stat.S_IMODE(st.st_mode):04o}: others can write to "
            "it, so it is refused (make it private: chmod 700)"
        )


def private_dir(directory: Path, what: str = "receipt directory") -> None:
    """Make ``directory`` (0700) if it is missing, then check it (:func:`check_directory`)."""
    try:  # (one look when it is there, as it nearly always is)
        st = os.lstat(directory)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot inspect the {what} {directory}: {exc.strerror}") from None
    else:
        _judge_directory(directory, st, what)
        return
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        pass  # a link or a file where the directory belongs: check_directory says which
    except OSError as exc:
        raise StoreError(f"cannot create the {what} {directory}: {exc.strerror}") from None
    check_directory(directory, what)


def write(receipt: Receipt, *, exclusive: bool) -> None:
    """Write ``receipt`` atomically, mode 0600, never through a symlink (STORE if it cannot).

    ``exclusive``: the file must not exist yet (a fresh receipt; USAGE if it
    does). A fresh receipt is fsynced, with its directory, before its claim is
    written: a claim recorded in the store keeps the receipt that can release it
    after a power cut (a remote store's claims outlive the boot). A rewrite
    (the token taken out after release) is not: lost, it leaves the older text,
    whose claim the store shows released. The directory is checked every time
    (:func:`check_directory`); it must exist.
    """
    path = receipt.path
    body = receipt.to_json().encode("utf-8")
    if len(body) > MAX_RECEIPT_BYTES:  # it could not be read back: refuse before any claim
        raise UsageError(
            f"the receipt would be {len(body)} bytes; at most {MAX_RECEIPT_BYTES} can be read "
            "back: claim fewer or shorter resources at once"
        )
    check_directory(path.parent)
    try:
        atomic_write(path, body, durable=exclusive, exclusive=exclusive)
    except FileExistsError:
        raise UsageError(f"receipt {path} already exists") from None
    except OSError as exc:
        raise StoreError(f"cannot write the receipt {path}: {exc.strerror or exc}") from None


def read(path: Path) -> Receipt:
    """Read a receipt, refusing one that others could read or that is not a plain file,
    or that sits in a directory others could change (:func:`check_directory`)."""
    try:
        check_directory(path.parent)
    except UsageError as exc:
        if not os.path.lexists(path.parent):
            raise ReceiptError(f"receipt {path} is missing") from None
        raise ReceiptError(f"{exc.message}: its receipts are not trusted") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ReceiptError(f"receipt {path} is missing") from None
    except OSError as exc:
        raise ReceiptError(f"cannot read the receipt {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReceiptError(f"receipt {path} is not a regular file")
        if st.st_mode & 0o077:
            raise ReceiptError(
                f"receipt {path} has mode {stat.S_IMODE(st.st_mode):04o}: others could read "
                "its token, so it is not trusted (a receipt must be 0600)"
            )
        if st.st_uid != os.getuid():
            raise ReceiptError(f"receipt {path} belongs to another user; it is not trusted")
        # (what the file holds, and one byte more to see it is all: no 1 MiB buffer a read)
        want = min(st.st_size, MAX_RECEIPT_BYTES) + 1
        raw = os.read(fd, want)
        if len(raw) == want and want <= MAX_RECEIPT_BYTES:  # it grew since: read on
            raw += os.read(fd, MAX_RECEIPT_BYTES + 1 - want)
        if len(raw) > MAX_RECEIPT_BYTES:
            raise ReceiptError(f"receipt {path} is over {MAX_RECEIPT_BYTES} bytes: not a receipt")
    finally:
        os.close(fd)
    return parse(path, raw)


def parse(path: Path, raw: bytes) -> Receipt:
    """A receipt from its bytes; :class:`ReceiptError` for anything that is not one."""
    try:
        doc = json.loads(raw)
        claims = tuple(_claim_ref(c) for c in doc["claims"])
        token = doc["token"]
        if doc.get("version") != _VERSION or not claims or not isinstance(doc["store"], str):
            raise ValueError
        if token is not None and not isinstance(token, str):
            raise ValueError
        bundle_id = doc.get("bundle_id")
        if bundle_id is not None and not isinstance(bundle_id, str):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise ReceiptError(f"receipt {path} is corrupt; it cannot prove ownership") from None
    if foreign_copy(path, doc.get("working_copy")):
        raise ReceiptError(
            f"receipt {path} was written in another working copy (this one is a copy, made "
            "with cp -a or restored from a backup?): it proves nothing here, and the "
            "original keeps its claims. Acquire your own claim in this working copy"
        )
    return Receipt(path, doc["store"], token, claims, bundle_id)


def _claim_ref(doc: Any) -> ClaimRef:
    return ClaimRef(
        str(doc["resource"]), str(doc["ref"]), str(doc["claim_id"]), int(doc["revision"])
    )


def without_token(receipt: Receipt) -> Receipt:
    """The receipt as it stays after release: everything but the token."""
    return receipt.replace(token=None)


def remove(path: Path) -> None:
    """Delete ``path`` if it is there."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
