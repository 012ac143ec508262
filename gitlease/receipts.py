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
import errno
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from ._files import atomic_write, flock_polling
from .errors import HeldError, ReceiptError, StoreError, UsageError
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
    """``--receipt`` or ``GITLEASE_RECEIPT``, if given: absolute, its directory resolved.

    The directory's symbolic links are resolved once, here, so that the checks of
    :func:`check_directory` and every later use see the same real directory.
    """
    if path is None:
        path = os.environ.get(RECEIPT_ENV) or None
    if not path:
        return None
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("the receipt path is not valid UTF-8; choose another --receipt") from None
    absolute = Path(text).expanduser().absolute()
    if absolute.name in ("", ".", ".."):
        raise UsageError(f"receipt {absolute} names a directory, not a file")
    return absolute.parent.resolve() / absolute.name


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


def _private_dir(directory: Path, what: str = "receipt directory") -> None:
    """Make ``directory`` (0700) if it is missing, then check it (:func:`check_directory`)."""
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        pass  # a link or a file where the directory belongs: check_directory says which
    except OSError as exc:
        raise StoreError(f"cannot create the {what} {directory}: {exc.strerror}") from None
    check_directory(directory, what)


def check_explicit_location(path: Path, store: str | None = None) -> None:
    """Refuse, before the store is touched, an explicit receipt path that must not be written.

    Its directory must pass :func:`check_directory`; the path itself must be absent
    or a spent receipt of ``store`` (a live one is judged by the caller, which knows
    the claims): see :func:`reserve`, which repeats these checks under a lock.
    """
    parent = path.parent
    if not parent.exists():
        _private_dir(parent)
    try:
        check_directory(parent)
    except UsageError as exc:
        raise UsageError(f"receipt {path}: {exc.message}") from None
    if store is None:
        return
    try:
        fd = _open_existing(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        _existing_receipt(path, fd, store)
    finally:
        os.close(fd)


class Reserved:
    """An explicit receipt path held for one acquire: locked, and known to be ours to write.

    ``previous`` is the spent or live receipt of this store that was there (None:
    the file is new, or empty); ``created``: this call made the file, and removes it
    again if nothing was written to it. The caller refuses a live one (HELD); otherwise
    :meth:`write` replaces the content in place, under the lock, so a second
    acquire racing for the same path waits for this one and then finds its
    receipt, never a half-written file.
    """

    def __init__(self, path: Path, fd: int, created: bool, previous: Receipt | None) -> None:
        self.path = path
        self.fd = fd
        self.created = created
        self.previous = previous
        self.written = False

    def write(self, receipt: Receipt) -> None:
        data = receipt.to_json().encode("utf-8")
        try:
            os.fchmod(self.fd, 0o600)
            os.ftruncate(self.fd, 0)
            if os.pwrite(self.fd, data, 0) != len(data):
                raise OSError(errno.ENOSPC, "short write")
        except OSError as exc:
            raise StoreError(f"cannot write the receipt {self.path}: {exc.strerror}") from None
        self.written = True


#: How long an acquire waits for another one that holds the same explicit receipt path.
RESERVE_WAIT_SECONDS = 2.0


@contextlib.contextmanager
def reserve(path: Path | None, store: str) -> Iterator[Reserved | None]:
    """Hold the explicit receipt ``path`` for one acquire (nothing if ``path`` is None).

    Refuses at once (USAGE), without blocking and without changing anything: a
    symbolic link, a directory, a FIFO, a device or a socket; a file that is not a
    receipt of this user's; another store's receipt; a directory that fails
    :func:`check_directory`. Another acquire holding the path: HELD. A file this
    call created is removed again if nothing was written to it.
    """
    if path is None:
        yield None
        return
    _private_dir(path.parent)
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(10):
        try:
            fd, created = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600), True
        except FileExistsError:
            try:
                fd, created = _open_existing(path, os.O_RDWR), False
            except FileNotFoundError:
                continue  # removed meanwhile (a failed racer's empty file): try again
        except OSError as exc:
            raise StoreError(f"cannot open the receipt {path}: {exc.strerror}") from None
        try:
            if not flock_polling(fd, time.monotonic() + RESERVE_WAIT_SECONDS):
                raise HeldError(
                    f"receipt {path} is being written by another acquire; "
                    "choose another --receipt, or try again"
                )
            if not _still_at(path, fd):
                os.close(fd)
                continue  # replaced or removed while we waited for the lock
            # Judged only now, under the lock: a racer may have written it meanwhile,
            # even if this call created it.
            previous = _existing_receipt(path, fd, store)
        except BaseException:
            os.close(fd)
            raise
        break
    else:
        raise HeldError(f"receipt {path} keeps changing; another process is using it")
    reserved = Reserved(path, fd, created, previous)
    try:
        yield reserved
    finally:
        if reserved.created and not reserved.written and _still_empty(path, fd):
            remove(path)  # (still under the lock: nobody else writes it meanwhile)
        os.close(fd)  # drops the lock


def _open_existing(path: Path, mode: int) -> int:
    """Open an existing path only if it is a regular file, never blocking nor following a link.

    ``lstat`` first, so that a FIFO or a device is never even opened; then the
    descriptor's own ``fstat`` decides (the path may have changed in between).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"cannot inspect the receipt path {path}: {exc.strerror}") from None
    _refuse_non_file(path, st)
    try:
        fd = os.open(path, mode | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"receipt {path} cannot be opened ({exc.strerror}); refusing it") from None
    try:
        _refuse_non_file(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_non_file(path: Path, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    kind = (
        "a symbolic link" if stat.S_ISLNK(st.st_mode)
        else "a directory" if stat.S_ISDIR(st.st_mode)
        else "a FIFO" if stat.S_ISFIFO(st.st_mode)
        else "a socket" if stat.S_ISSOCK(st.st_mode)
        else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        else "not a regular file"
    )  # fmt: skip
    raise UsageError(f"receipt path {path} is {kind}, not a receipt file; refusing it")


def _existing_receipt(path: Path, fd: int, store: str) -> Receipt | None:
    """The receipt of ``store`` in the open regular file ``fd`` (None: an empty private
    file, nothing to lose); USAGE for anything else."""
    st = os.fstat(fd)
    refuse = f"receipt path {path} holds a file that is not "
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise UsageError(refuse + "a private receipt of yours; it was left untouched")
    if st.st_size == 0:
        return None  # empty and private: what an acquire killed right after creating it leaves
    try:
        raw = os.pread(fd, 1 << 20, 0)
        rec = parse(path, raw)
    except (OSError, ReceiptError):
        raise UsageError(refuse + "a gitlease receipt; it was left untouched") from None
    if rec.store != store:
        raise UsageError(
            f"receipt {path} belongs to the store {rec.store}, not {store}; it was left "
            "untouched (use one receipt path per store)"
        )
    return rec


def _still_empty(path: Path, fd: int) -> bool:
    """Whether ``path`` still names ``fd``'s file, and it is empty (nobody wrote a receipt)."""
    return _still_at(path, fd) and os.fstat(fd).st_size == 0


def _still_at(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        st, mine = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def write(receipt: Receipt, *, exclusive: bool, reserved: Reserved | None = None) -> None:
    """Write atomically with mode 0600, never through a symlink (STORE if it cannot be written).

    ``exclusive``: the file must not exist yet (a fresh per-claim receipt).
    Otherwise the file is replaced through a private temporary file.
    ``reserved``: an explicit path held by :func:`reserve`, written in place.
    The directory is checked every time (:func:`check_directory`).
    """
    if reserved is not None:
        reserved.write(receipt)
        return
    path = receipt.path
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


def check_bindings_dir(worktree_git_dir: Path) -> None:
    """Make the worktree's bindings directory if it is missing, and refuse one that others
    could change (USAGE, :func:`check_directory`): checked before a claim is written."""
    _private_dir(bindings_dir(worktree_git_dir), "bindings directory")


def bind(worktree_git_dir: Path, binding: Binding) -> Path:
    """Write the binding (STORE if it cannot be written: a full disk, say)."""
    directory = bindings_dir(worktree_git_dir)
    _private_dir(directory, "bindings directory")
    path = directory / f"{resource_key(binding.ref)}.json"
    data = (json.dumps(binding.as_dict(), indent=2) + "\n").encode("utf-8")
    try:
        atomic_write(path, data, durable=False)  # no secret in it; mode 0600 all the same
    except OSError as exc:
        raise StoreError(f"cannot write the binding {path}: {exc.strerror or exc}") from None
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
