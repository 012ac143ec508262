"""Bindings: this worktree works on a claim, and the commit hooks check it.

A binding (``<git-dir>/worklease/bindings/<hash16>.json``, one per resource)
names the resource, the claim id and the receipt's path; it holds no secret.
It also names the object id of the last record of that claim that this
worktree wrote and saw land (``oid``, written after the compare-and-swap, by
acquire and by every heartbeat): git's object ids are content hashes, so a
record whose bytes hash to it is byte for byte the holder's own, and the
commit check and ``check`` need no signature check for it
(:func:`gitlease.model.claim.is_ours`). That id counts only from a binding file that
nobody else could have written (this user's, not writable by others, in a
private directory); otherwise the binding still works, and the record is
verified. The commit hook reads bindings with plain file reads, so this
module must stay importable without pygit2, click or cryptography.
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
from .receipt import (
    ClaimRef,
    Receipt,
    check_directory,
    foreign_copy,
    private_dir,
    resource_key,
    working_copy_of,
)
from .receipt import read as read_receipt

if TYPE_CHECKING:
    from typing import Any, ClassVar


_HEX = frozenset("0123456789abcdef")


class Binding(Value):
    """This worktree works on a claim: the commit hooks check it (no secret: a receipt path).

    ``oid``: the object id of the holder's last record, when the binding file can
    be trusted to say it (None otherwise). ``token_digest``: :func:`token_digest` of the
    token of the receipt that wrote it (a one-way digest, never the token): the id speaks
    for a receipt only when its token is that one (:func:`written_oid`).
    """

    __slots__ = ("resource", "ref", "claim_id", "receipt", "oid", "token_digest")
    _defaults: ClassVar[dict[str, Any]] = {"oid": None, "token_digest": None}
    resource: str
    ref: str
    claim_id: str
    receipt: str  # the receipt file's path (its token stays in the file)
    oid: str | None
    token_digest: str | None


def token_digest(token: str | None) -> str | None:
    """A one-way digest of a receipt's bearer token, for a binding: it tells a receipt that
    holds the token which wrote a record from one whose token was replaced, and gives
    nothing of the token away (SHA-256 of 256 random bits, with a context of its own)."""
    if token is None:
        return None
    return sha256(
        b"gitlease binding token\0" + token.encode("utf-8", "surrogateescape")
    ).hexdigest()


def unreadable(path: Path) -> str:
    """What the commit hooks say of a binding file they cannot read (they refuse the commit)."""
    return (
        f"the binding {path} is unreadable, or was written in another working copy (a copy "
        "made with cp -a holds none of the original's claims); run `gitlease unbind`"
    )


def bound_claim(binding: Binding) -> tuple[Receipt, ClaimRef]:
    """The receipt a binding names, and its claim on the bound resource: :class:`ReceiptError`
    when the receipt cannot be read or no longer holds the bound claim (a later acquire of
    the resource wrote another receipt there, or it was replaced by hand)."""
    receipt = read_receipt(Path(binding.receipt))
    claim = receipt.claim_for(binding.resource)
    if claim is None or claim.claim_id != binding.claim_id:
        raise ReceiptError(
            f"receipt {binding.receipt} does not hold claim {binding.claim_id} on "
            f"{binding.resource}"
        )
    return receipt, claim


def bindings_dir(worktree_git_dir: Path) -> Path:
    """Where a worktree's bindings live."""
    return layout.bindings_dir(worktree_git_dir)


def _path(worktree_git_dir: Path, ref: str) -> Path:
    return bindings_dir(worktree_git_dir) / f"{resource_key(ref)}.json"


def check_bindings_dir(worktree_git_dir: Path) -> None:
    """Make the worktree's bindings directory if it is missing, and refuse one that others
    could change (USAGE, :func:`gitlease.receipts.receipt.check_directory`): checked before a claim
    is written, so that a refusal leaves nothing claimed."""
    private_dir(bindings_dir(worktree_git_dir), "bindings directory")


def bind(worktree_git_dir: Path, binding: Binding) -> Path:
    """Write (or replace) the binding of ``binding.ref``, atomically, mode 0600; its path."""
    directory = bindings_dir(worktree_git_dir)
    private_dir(directory, "bindings directory")
    path = _path(worktree_git_dir, binding.ref)
    doc = {**binding.as_dict(), "working_copy": working_copy_of(path)}  # (see receipts)
    data = (json.dumps(doc, indent=2) + "\n").encode("utf-8")
    try:
        atomic_write(path, data, durable=False)  # lost to a power cut: the hook checks less
    except OSError as exc:
        raise StoreError(f"cannot write the binding {path}: {exc.strerror or exc}") from None
    return path


def note_written(
    worktree_git_dir: Path, ref: str, claim_id: str, oid: str, digest: str | None
) -> None:
    """After a write of ``claim_id`` landed: its binding (if this worktree is bound to that
    claim) names the new record, and the :func:`token_digest` of the receipt that signed
    it. A binding that cannot be rewritten keeps its old id: the commit check then
    verifies, as without one."""
    current = _read_binding(_path(worktree_git_dir, ref), trusted=False)
    if current is None or current.claim_id != claim_id:
        return
    if current.oid == oid and current.token_digest == digest:
        return
    with contextlib.suppress(StoreError, UsageError):
        bind(worktree_git_dir, current.replace(oid=oid, token_digest=digest))


def written_oid(
    worktree_git_dir: Path, ref: str, claim_id: str | None = None, token: str | None = None
) -> str | None:
    """The object id of this worktree's last record of the claim bound on ``ref`` (of
    ``claim_id``, when given), if a binding that can be trusted says it.

    ``token``: a receipt's token; given, the id is returned only if the binding was written
    for that token (an id names the record, not who may act on it: a receipt whose token
    was replaced must not pass for the holder's). None names the record alone."""
    if not _private(bindings_dir(worktree_git_dir)):
        return None
    binding = _read_binding(_path(worktree_git_dir, ref))
    if binding is None or (claim_id is not None and binding.claim_id != claim_id):
        return None
    return binding.oid if token is None else oid_for(binding, token)


def oid_for(binding: Binding, token: str | None) -> str | None:
    """The binding's object id when it speaks for a receipt holding ``token``: the binding was
    written for that token (:func:`token_digest`); None otherwise, and for an older binding
    without a digest (the record is then checked in full)."""
    digest = binding.token_digest
    return binding.oid if digest is not None and digest == token_digest(token) else None


def unbind(worktree_git_dir: Path, ref: str, claim_id: str | None = None) -> bool:
    """Remove the binding of ``ref`` (only if it is for ``claim_id``, when given)."""
    path = _path(worktree_git_dir, ref)
    if claim_id is not None:
        current = _read_binding(path, trusted=False)
        if current is None or current.claim_id != claim_id:
            return False
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def bindings(worktree_git_dir: Path) -> list[Binding | Path]:
    """Every binding of the worktree; an unreadable binding file is returned as its path."""
    directory = bindings_dir(worktree_git_dir)
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    found: list[Binding | Path] = []
    private = _private(directory)
    for name in names:
        if name.endswith(".json") and not name.startswith("."):
            binding = _read_binding(directory / name, trusted=private)
            found.append(binding if binding is not None else directory / name)
    return found


def _private(directory: Path) -> bool:
    try:
        check_directory(directory, "bindings directory")
    except (UsageError, StoreError):
        return False
    return True


def _read_binding(path: Path, *, trusted: bool = True) -> Binding | None:
    """The binding in ``path`` (None if unreadable); its ``oid`` and ``token_digest`` only if
    ``trusted`` (the directory was checked) and the file is this user's and writable by
    nobody else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        trusted = trusted and st.st_uid == os.getuid() and not st.st_mode & 0o022
        doc = json.loads(os.read(fd, 1 << 16))
        if foreign_copy(path, doc.get("working_copy")):
            return None  # written in another working copy (a cp -a): refused, never followed
        oid = doc.get("oid") if trusted else None
        if not (isinstance(oid, str) and len(oid) in (40, 64) and _HEX.issuperset(oid)):
            oid = None
        digest = doc.get("token_digest") if trusted else None
        if not (isinstance(digest, str) and len(digest) == 64 and _HEX.issuperset(digest)):
            digest = None
        return Binding(
            str(doc["resource"]),
            str(doc["ref"]),
            str(doc["claim_id"]),
            str(doc["receipt"]),
            oid,
            digest,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    finally:
        os.close(fd)
