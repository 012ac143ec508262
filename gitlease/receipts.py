"""Receipts (the only place a bearer token is written) and worktree bindings.

A receipt is a small JSON file, mode 0600 in a 0700 directory, written before
the claim it describes becomes visible, so an interrupted acquire can be
settled by comparing it with ``gitlease show``. Default place: the private git
dir of the current worktree (``<git-dir>/worklease/receipts/``), or the per-user
state directory outside a repository. One file per claim attempt, so two
processes acquiring in one worktree never overwrite each other's receipt.

A binding ties a worktree to a claim it holds (``<git-dir>/worklease/bindings/``);
the commit hook reads them. Bindings hold no secret: the receipt path only.

This module must stay importable without pygit2, click or cryptography: the
commit hook uses it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any, ClassVar

from .errors import ReceiptError, StoreError, UsageError
from .value import Value

RECEIPT_ENV = "GITLEASE_RECEIPT"
_VERSION = 1
#: A released claim's receipt (no token) is kept this long, for a retried release.
SPENT_RECEIPT_SECONDS = 86_400


class ClaimRef(Value):
    """One claim named by a receipt: enough to find it and to fence against it."""

    __slots__ = ("resource", "ref", "claim_id", "revision")
    resource: str
    ref: str
    claim_id: str
    revision: int


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
        for claim in self.claims:
            if claim.resource == resource:
                return claim
        return None

    def to_json(self) -> str:
        doc = {
            "version": _VERSION,
            "store": self.store,
            "bundle_id": self.bundle_id,
            "claims": [c.as_dict() for c in self.claims],
            "token": self.token,
        }
        return json.dumps(doc, indent=2) + "\n"


def resource_key(ref: str) -> str:
    """Short stable file-name stem for a resource's receipts and binding."""
    return hashlib.sha256(ref.encode("utf-8")).hexdigest()[:16]


def default_dir(worktree_git_dir: Path | None, state_home: Path) -> Path:
    base = worktree_git_dir / "worklease" if worktree_git_dir else state_home
    return base / "receipts"


def default_path(directory: Path, ref: str, claim_id: str) -> Path:
    return directory / f"{resource_key(ref)}-{claim_id}.json"


def bundle_path(directory: Path, bundle_id: str) -> Path:
    return directory / f"bundle-{bundle_id}.json"


def explicit_path(path: str | os.PathLike[str] | None) -> Path | None:
    """``--receipt`` or ``GITLEASE_RECEIPT``, if given."""
    if path is None:
        path = os.environ.get(RECEIPT_ENV) or None
    return Path(path).expanduser().absolute() if path else None


def _private_dir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = directory.lstat()
    except OSError as exc:
        raise StoreError(f"cannot create the receipt directory {directory}: {exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"receipt directory {directory} is not a directory")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise UsageError(f"receipt directory {directory} can be written by others; refusing it")


def check_explicit_location(path: Path) -> None:
    """Refuse a receipt path in a directory that others can write (SPEC §3)."""
    parent = path.parent
    try:
        st = parent.stat()
    except OSError:
        _private_dir(parent)
        return
    if st.st_mode & 0o022:
        raise UsageError(
            f"receipt {path} would sit in {parent}, which others can write; "
            "choose a private directory"
        )


def write(receipt: Receipt, *, exclusive: bool) -> None:
    """Write atomically with mode 0600, never through a symlink (STORE if it cannot be written).

    ``exclusive``: the file must not exist yet (a fresh per-claim receipt).
    Otherwise the file is replaced through a private temporary file.
    """
    path = receipt.path
    if not path.parent.exists():
        _private_dir(path.parent)
    data = receipt.to_json().encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    target = path if exclusive else path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise UsageError(f"receipt {target} already exists") from None
    except OSError as exc:
        raise StoreError(f"cannot write the receipt {target}: {exc.strerror}") from None
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)  # no fsync: a receipt lost to a power cut only lets its claim expire
    except OSError as exc:
        os.close(fd)
        os.unlink(target)
        raise StoreError(f"cannot write the receipt {target}: {exc.strerror}") from None
    os.close(fd)
    if not exclusive:
        try:
            os.replace(target, path)
        except OSError as exc:
            os.unlink(target)
            raise StoreError(f"cannot write the receipt {path}: {exc.strerror}") from None


def read(path: Path) -> Receipt:
    """Read a receipt, refusing one that others could read or that is not a plain file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
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
        raw = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    return parse(path, raw)


def parse(path: Path, raw: bytes) -> Receipt:
    try:
        doc = json.loads(raw)
        claims = tuple(
            ClaimRef(str(c["resource"]), str(c["ref"]), str(c["claim_id"]), int(c["revision"]))
            for c in doc["claims"]
        )
        token = doc["token"]
        if doc.get("version") != _VERSION or not claims or not isinstance(doc["store"], str):
            raise ValueError
        if token is not None and not isinstance(token, str):
            raise ValueError
        bundle_id = doc.get("bundle_id")
    except (ValueError, KeyError, TypeError):
        raise ReceiptError(f"receipt {path} is corrupt; it cannot prove ownership") from None
    return Receipt(path, doc["store"], token, claims, bundle_id)


def without_token(receipt: Receipt) -> Receipt:
    return receipt.replace(token=None)


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def remove_spent(directory: Path, older_than: float = SPENT_RECEIPT_SECONDS) -> int:
    """Delete receipts of released claims (no token) older than ``older_than`` seconds.

    They prove nothing, and a retried release has long been answered; without
    this an agent working through a long backlog would keep one file per resource
    forever, and every lookup lists the directory. Receipts with a token are never
    touched (``verify`` reports orphans).
    """
    cutoff = time.time() - older_than
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.endswith(".json"):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_mtime > cutoff:
                continue
            spent = read(Path(entry.path)).token is None
        except (OSError, ReceiptError):
            continue
        if spent:
            remove(Path(entry.path))
            removed += 1
    return removed


def candidates(directory: Path, ref: str) -> list[Path]:
    """Receipts in ``directory`` that may hold a claim on ``ref``, newest first."""
    found: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    stem = resource_key(ref) + "-"
    for entry in entries:
        if entry.name.startswith(stem) and entry.name.endswith(".json"):
            found.append(Path(entry.path))
    for entry in entries:
        if entry.name.startswith("bundle-") and entry.name.endswith(".json"):
            found.append(Path(entry.path))
    return sorted(found, key=_mtime, reverse=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# -------------------------------------------------------------------- bindings


class Binding(Value):
    """This worktree works on a claim: the commit hooks check it (no secret: a receipt path)."""

    __slots__ = ("resource", "ref", "claim_id", "receipt")
    resource: str
    ref: str
    claim_id: str
    receipt: str


def bindings_dir(worktree_git_dir: Path) -> Path:
    return worktree_git_dir / "worklease" / "bindings"


def bind(worktree_git_dir: Path, binding: Binding) -> Path:
    directory = bindings_dir(worktree_git_dir)
    _private_dir(directory)
    path = directory / f"{resource_key(binding.ref)}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(binding.as_dict(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def unbind(worktree_git_dir: Path, ref: str, claim_id: str | None = None) -> bool:
    """Remove the binding of ``ref`` (only if it is for ``claim_id``, when given)."""
    path = bindings_dir(worktree_git_dir) / f"{resource_key(ref)}.json"
    if claim_id is not None:
        current = _read_binding(path)
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
    for name in names:
        if name.endswith(".json") and not name.startswith("."):
            binding = _read_binding(directory / name)
            found.append(binding if binding is not None else directory / name)
    return found


def _read_binding(path: Path) -> Binding | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return Binding(
            str(doc["resource"]), str(doc["ref"]), str(doc["claim_id"]), str(doc["receipt"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
