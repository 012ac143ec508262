"""Reading refs and blobs with plain git: output parsers and the checks libgit2 lacks.

The store reads with ``git`` processes (no pygit2 import: it costs more than a
whole read), so the parsing of their output, and of ``packed-refs`` where
libgit2 would silently skip a damaged line, lives here. No I/O but the files
and bytes it is given (and ``worklease/packed-refs-checked``, see
:func:`packed_refs_problem`).
"""

from __future__ import annotations

import mmap
import os
from contextlib import suppress
from itertools import pairwise
from pathlib import Path

from .._util import TYPE_CHECKING, lazy
from .._util.files import atomic_write
from .._util.value import Value
from ..errors import StoreError
from . import layout

if TYPE_CHECKING:  # (the commit check runs no git process: it never loads subprocess)
    import subprocess
    from collections.abc import Iterator
    from typing import Any, ClassVar

#: The object id a snapshot gives a ref that exists but cannot be read (corrupt, symbolic).
UNREADABLE_OID = "0" * 40
#: A full object id, SHA-1 or SHA-256.
OID = lazy(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_PACKED_REFS_SHA1 = lazy(rb"(?:(?:#[^\n]*|\^[0-9a-f]{40}|[0-9a-f]{40} refs/\S+)?\n)*")
_PACKED_REFS_SHA256 = lazy(rb"(?:(?:#[^\n]*|\^[0-9a-f]{64}|[0-9a-f]{64} refs/\S+)?\n)*")


#: What git exports to the hooks it runs that would point another git process at a different
#: repository, index, object directory (a push's quarantine) or ref namespace than it names.
_REPOSITORY_ENV = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_PREFIX",
    "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH",
    "GIT_NAMESPACE",
})  # fmt: skip


def git_env(git_dir: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment for a git process on one repository of gitlease's (a store, the
    repository here): without the location variables a surrounding git hook exported, so
    gitlease run from a hook (a commit check, a server's pre-receive) reads and writes
    exactly the repository it names; with ``GIT_DIR`` when ``git_dir`` is given."""
    env = {k: v for k, v in os.environ.items() if k not in _REPOSITORY_ENV}
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
    env.update(extra)
    return env


def with_settings(env: dict[str, str], settings: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """``env`` with git configuration added through ``GIT_CONFIG_COUNT`` (after any the
    caller set): in the environment rather than as ``-c`` arguments, because a credential
    setting or an HTTP header may be a secret, and any user can read a process's arguments."""
    if not settings:
        return env
    try:
        first = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        first = 0
    out = dict(env, GIT_CONFIG_COUNT=str(first + len(settings)))
    for i, (key, value) in enumerate(settings, first):
        out[f"GIT_CONFIG_KEY_{i}"] = key
        out[f"GIT_CONFIG_VALUE_{i}"] = value
    return out


class Snapshot(Value):
    """What a ref held when it was read: its object id and the blob's bytes."""

    __slots__ = ("ref", "oid", "data", "problem", "first_seen_ms")
    _defaults: ClassVar[dict[str, Any]] = {"problem": None, "first_seen_ms": None}
    ref: str
    oid: str | None  # None: the ref does not exist
    data: bytes | None  # None: absent ref
    problem: str | None  # set when the ref exists but cannot be read as a blob
    #: Remote stores only: when this host first saw this object id at this ref (boot clock).
    first_seen_ms: int | None


#: Where a store remembers the identity of the last ``packed-refs`` found well formed.
#: The same, in this process: identities already read from that file or checked here.
_KNOWN_GOOD: set[str] = set()


def packed_refs_problem(git_dir: Path, ref: str) -> str | None:
    """Why ``packed-refs`` cannot back libgit2's "``ref`` is absent", or None.

    libgit2 skips lines it cannot parse, so a damaged line could hide ``ref``:
    every line must have the repository's object id length, and no line may
    name ``ref`` at all.

    Checking every line costs a scan of the whole file, which grows with the store
    (docs/performance.md, figure 10), and an acquire of a new resource asks three
    times. So the file is checked whole once per identity (device, inode, size,
    modification and change times: git replaces ``packed-refs`` through a lock file
    and a rename, and any edit in place changes its change time), the identity of a
    well-formed one kept in ``worklease/packed-refs-checked``; then only whether a line
    names ``ref`` is looked up, by binary search when git wrote the file sorted.
    """
    try:
        fd = os.open(git_dir / "packed-refs", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"packed-refs cannot be read ({exc.strerror})"
    try:
        st = os.fstat(fd)
        if st.st_size == 0:
            return None
        sha256 = sha256_store(git_dir)
        ident = _identity(st, sha256)
        name = ref.encode("utf-8", "surrogateescape")
        if _known_good(git_dir, ident):
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
                if not _names(data, name):
                    return None
        data_bytes = _read_all(fd, st.st_size)
    except OSError as exc:
        return f"packed-refs cannot be read ({exc.strerror})"
    finally:
        os.close(fd)
    return _scan(git_dir, data_bytes, name, ref, ident, sha256)


def packed_ids(git_dir: Path, prefix: str, max_bytes: int) -> dict[str, str] | None:
    """The object id of every ref under ``prefix`` that ``packed-refs`` names, by ref (empty
    when there is no such file), or None when git must read the file: it is not well formed
    or not sorted as its header says (the check of :func:`packed_refs_problem`, remembered by
    the same identity), holds a line git would refuse (a comment that is not the header, a
    peeled line after no ref, a blank line, the null id), names a ref twice, or is larger than
    ``max_bytes`` (a small store's walk, :mod:`gitlease.gitio.refwalk`, leaves a big one to
    git)."""
    try:
        fd = os.open(git_dir / "packed-refs", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_size > max_bytes:
            return None
        data = _read_all(fd, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not data:
        return {}
    sha256 = sha256_store(git_dir)
    ident = _identity(st, sha256)
    if not _known_good(git_dir, ident):
        pattern = _PACKED_REFS_SHA256 if sha256 else _PACKED_REFS_SHA1
        if not (pattern.fullmatch(data) and _sorted_as_claimed(data)):
            return None
        _remember_good(git_dir, ident)
    lines = data.split(b"\n")
    if lines[-1]:
        return None  # (a last line without its newline)
    start = prefix.encode("utf-8", "surrogateescape")
    found: dict[str, str] = {}
    after_ref = False
    for number, line in enumerate(lines[:-1]):
        if line.startswith(b"#"):
            if number or not line.startswith(b"# pack-refs with:"):
                return None  # (git reads only its header as a comment: "unexpected line")
            continue
        if line.startswith(b"^"):
            if not after_ref:
                return None  # (a peeled line that follows no ref: git refuses the file)
            after_ref = False
            continue
        oid, _, name = line.partition(b" ")
        if not name or oid.strip(b"0") == b"":
            return None  # (a blank line, or the null id: git's to judge)
        after_ref = True
        if not name.startswith(start):
            continue  # (a ref elsewhere)
        ref = name.decode("utf-8", "surrogateescape")
        if ref in found:
            return None
        found[ref] = oid.decode("ascii")
    return found


def surely_absent(git_dir: Path, ref: str) -> bool:
    """Whether the repository at ``git_dir`` holds no ``ref``, known without running git: no
    file or link at its name, and a ``packed-refs`` that is well formed and names it nowhere
    (:func:`packed_refs_problem`). A ``reftable/`` folder (git's other ref backend, which keeps
    no ref files) or anything unusual leaves the answer to git (False)."""
    if not ref.startswith("refs/") or "\0" in ref or "/." in ref:
        return False
    try:
        if os.path.isdir(git_dir / "reftable"):
            return False
        os.lstat(git_dir / ref)
        return False  # (a file or link at its name)
    except (FileNotFoundError, NotADirectoryError):
        pass  # (nothing at its name: an absent ref, or a packed one)
    except (OSError, ValueError):
        return False  # (a folder this user cannot enter, say: unsure, and git may skip it)
    return packed_refs_problem(git_dir, ref) is None


def unreadable_ref(git_dir: Path, ref: str) -> str | None:
    """Why this user cannot read ``ref``'s loose file, or whether it has one (a folder on its
    way that cannot be entered, a file that cannot be opened), or None. git answers "no such
    ref" for both, as for an absent one."""
    path = git_dir / ref
    try:
        os.lstat(path)
    except PermissionError:
        return "the ref's folder cannot be read by this user (permission denied)"
    except (OSError, ValueError):
        return None  # (nothing there)
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC))
    except PermissionError:
        return "the ref file cannot be read by this user (permission denied)"
    except OSError:
        pass  # (a link, a folder: git judges those; gone since: absent, as git said)
    return None


def unreadable_error(git_dir: Path, where: str) -> StoreError:
    """STORE for a part of the refs this user cannot read: git skips such a folder without a
    word, and a held claim in it would be listed as free (fail closed instead)."""
    return StoreError(
        f"cannot read the store {git_dir}: {where} cannot be read by this user (permission "
        "denied); a claim there could be missed: fix the store's permissions"
    )


def ref_folders(git_dir: Path, prefix: str) -> Iterator[tuple[str, list[os.DirEntry[str]]]]:
    """Each folder of refs under ``prefix`` (its name under ``git_dir``) with its entries; a
    folder gone meanwhile is skipped. ``PermissionError`` naming the folder (its ``filename``)
    at one this user cannot list or enter: git skips such a folder without a word, and a
    listing that took git's word would miss the claims in it. Other errors as they come."""
    pending = [prefix.rstrip("/")]
    while pending:
        folder = pending.pop()
        path = git_dir / folder
        try:
            if os.path.isdir(path) and not os.access(path, os.R_OK | os.X_OK):
                raise PermissionError(13, "Permission denied")  # (listed but not entered)
            with os.scandir(path) as found:
                entries = list(found)
        except PermissionError:
            raise PermissionError(13, "Permission denied", folder) from None
        except (FileNotFoundError, NotADirectoryError):
            continue
        yield folder, entries
        pending.extend(f"{folder}/{e.name}" for e in entries if e.is_dir(follow_symlinks=False))


def unreadable_folder(git_dir: Path, prefix: str) -> str | None:
    """The first folder of refs under ``prefix`` this user cannot list or enter, or None
    (:func:`ref_folders`: one ``scandir`` a folder, no file read)."""
    try:
        for _ in ref_folders(git_dir, prefix):
            pass
    except PermissionError as exc:
        return str(exc.filename)
    except OSError:
        pass  # (a folder that cannot be read for another reason: git says what it says)
    return None


def _scan(
    git_dir: Path, data: bytes, name: bytes, ref: str, ident: str, sha256: bool
) -> str | None:
    """The whole check of one ``packed-refs``; remembers a well-formed file's identity."""
    pattern = _PACKED_REFS_SHA256 if sha256 else _PACKED_REFS_SHA1
    if pattern.fullmatch(data) and _sorted_as_claimed(data):
        _remember_good(git_dir, ident)
        if b" " + name + b"\n" not in data:
            return None
    for number, line in enumerate(data.split(b"\n"), 1):
        if line and not line.startswith(b"#") and not pattern.fullmatch(line + b"\n"):
            return f"packed-refs is corrupt at line {number}"
        if line.endswith(b" " + name):
            return f"packed-refs line {number} names {ref}, which libgit2 cannot read"
    return None


def _sorted_as_claimed(data: bytes) -> bool:
    """Whether a ``packed-refs`` whose header says ``sorted`` is sorted (a file without the
    claim is searched whole). git, libgit2 and :func:`_names` binary-search a file that
    says so, and all three miss a line out of order: such a file is never remembered as
    well formed, so each look scans it whole and finds the ref wherever it is."""
    header_end = data.find(b"\n")
    header = data[: max(header_end, 0)]
    if not (header.startswith(b"# pack-refs with:") and b" sorted" in header):
        return True
    lines = data[header_end + 1 : -1].split(b"\n") if data.endswith(b"\n") else [b""]
    if b"" in lines and data[header_end + 1 :]:  # (an empty line reads as a ref named "")
        return False
    names = [line.partition(b" ")[2] for line in lines if not line.startswith((b"^", b"#"))]
    return all(a < b for a, b in pairwise(names))


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    pos = 0
    while True:
        chunk = os.pread(fd, max(size - pos, 1 << 16), pos)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        pos += len(chunk)


def _known_good(git_dir: Path, ident: str) -> bool:
    key = f"{git_dir}\0{ident}"
    if key in _KNOWN_GOOD:
        return True
    try:
        stored = layout.packed_refs_checked(git_dir).read_bytes().decode("ascii", "replace").strip()
    except OSError:
        return False
    if stored != ident:
        return False
    _KNOWN_GOOD.add(key)
    return True


def _remember_good(git_dir: Path, ident: str) -> None:
    """Best effort: a store this process cannot write to is checked whole again next time."""
    _KNOWN_GOOD.add(f"{git_dir}\0{ident}")
    path = layout.packed_refs_checked(git_dir)
    with suppress(OSError):
        if path.read_bytes().decode("ascii", "replace").strip() == ident:
            return
    with suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, ident.encode("ascii") + b"\n", durable=False, mode=0o644)


def _names(data: mmap.mmap, name: bytes) -> bool:
    """Whether a line of a well-formed ``packed-refs`` names the ref ``name``: a binary
    search over the lines if git wrote the file sorted (its header says so), else a find."""
    header_end = data.find(b"\n")
    header = data[: header_end if header_end >= 0 else 0]
    if not (header.startswith(b"# pack-refs with:") and b" sorted" in header):
        return data.find(b" " + name + b"\n") >= 0  # (a well-formed file ends with one)
    lo, hi = header_end + 1, len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        start = max(lo, data.rfind(b"\n", lo, mid) + 1)
        line_start = start
        while line_start < hi and data[line_start : line_start + 1] in (b"^", b"#"):
            end = data.find(b"\n", line_start, hi)
            line_start = hi if end < 0 else end + 1
        if line_start >= hi:
            hi = start
            continue
        end = data.find(b"\n", line_start, hi)
        end = hi if end < 0 else end
        named = data[line_start:end].partition(b" ")[2]
        if named == name:
            return True
        if named < name:
            lo = end + 1
        else:
            hi = start
    return False


def _identity(st: os.stat_result, sha256: bool) -> str:
    """What tells one ``packed-refs`` from another without reading it (see
    :func:`packed_refs_problem`), with the id length it was checked for."""
    return (
        f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} "
        f"{'sha256' if sha256 else 'sha1'} sorted-checked"
    )


def sha256_store(git_dir: Path) -> bool:
    """Whether the repository at ``git_dir`` names its objects by SHA-256 (its config says
    ``objectformat = sha256``), so that a ref's id is 64 hex digits, not 40."""
    try:
        config = (git_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "objectformat = sha256" in config.lower().replace("\t", " ")


def stderr_text(result: subprocess.CompletedProcess[bytes]) -> str:
    """What a git command said on stderr (or its exit status), for a message."""
    return result.stderr.decode("utf-8", "replace").strip() or f"git exited {result.returncode}"


#: Why a symbolic ref under ``refs/worklease/`` is an invalid record: gitlease never writes
#: one, git reads through it to whatever it names, and libgit2 cannot write it. Every
#: command judges it alike (``check``, ``list``, ``verify``, ``heartbeat``).
SYMBOLIC = "the ref is symbolic (gitlease never writes one)"


def is_symbolic(git_dir: Path, ref: str) -> bool:
    """Whether the loose ref file of ``ref`` is a symbolic ref (``ref: ...``); packed refs
    cannot be."""
    try:
        with open(git_dir / ref, "rb") as f:
            return f.read(5) == b"ref: "
    except OSError:
        return False


def parse_for_each_ref(out: bytes) -> list[Snapshot]:
    """Snapshots from ``for-each-ref --format='%(refname) %(objectname) %(objecttype)
    %(raw:size) %(symref)%0a%(raw)'`` (the ``%(symref)`` field may be left out)."""
    snapshots = []
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        # git allows any byte from 0x80 up in a ref name: one that is not UTF-8 keeps its
        # bytes as lone surrogates, so that it can be reported (never a crash)
        fields = out[pos:end].decode("utf-8", "surrogateescape").split(" ")
        ref, oid, kind, size = fields[:4]
        start = end + 1
        stop = start + int(size)
        data = out[start:stop]
        pos = stop + 1  # for-each-ref ends every entry with a newline
        if len(fields) > 4 and fields[4]:  # %(symref): git read through it
            snapshots.append(Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC))
        elif kind == "blob":  # (every field given: once per ref of the store)
            snapshots.append(Snapshot._of((ref, oid, data, None, None)))
        else:
            snapshots.append(Snapshot(ref, oid, None, f"the ref points at a {kind}, not a blob"))
    return snapshots


def broken_refs(stderr: bytes, pattern: str) -> list[Snapshot]:
    """Refs git reported as broken (and skipped) under ``pattern``: unreadable snapshots."""
    broken = []
    for line in stderr.decode("utf-8", "surrogateescape").splitlines():
        if "ignoring broken ref" in line:
            ref = line.rsplit(" ", 1)[-1]
            if ref == pattern or (pattern.endswith("/") and ref.startswith(pattern)):
                broken.append(Snapshot(ref, UNREADABLE_OID, None, "the ref file is corrupt"))
    return broken


class ReflogLine(Value):
    """One reflog line: the record it replaced, the record it wrote, when (seconds)."""

    __slots__ = ("old", "new", "when", "raw")
    old: str
    new: str
    when: int | None  # None: the line does not parse (it counts as old)
    raw: bytes  # the line as written, with its newline


def parse_reflog(data: bytes) -> list[ReflogLine]:
    """A reflog file's lines, oldest first (``old new name <email> seconds tz\\tmessage``)."""
    lines = []
    for raw in data.split(b"\n"):
        if not raw:
            continue
        head = raw.split(b"\t", 1)[0].split(b" ")
        old = head[0].decode("ascii", "replace")
        new = head[1].decode("ascii", "replace") if len(head) > 1 else ""
        stamp = head[-2] if len(head) >= 5 else b""
        when = int(stamp) if stamp.isdigit() and len(stamp) <= 19 else None
        lines.append(ReflogLine(old, new, when, raw + b"\n"))
    return lines


def landed_ids(lines: list[ReflogLine], current: str | None) -> list[str]:
    """The ids a ref pointed at, oldest first, from its reflog's lines: a line's write happened
    when the next line (for the last, the ref's ``current`` id) starts from what it wrote.
    libgit2 appends a line before it renames the lock into place, so a process killed in
    between leaves a line the next one contradicts. Deletions are left out."""
    landed = []
    for i, line in enumerate(lines):
        after = lines[i + 1].old if i + 1 < len(lines) else (current or "0" * len(line.new))
        if line.new == after and line.new.strip("0"):
            landed.append(line.new)
    return landed


def named_ids(lines: list[ReflogLine]) -> frozenset[str]:
    """Every record id a reflog still names (both ids of each line; not the zero id)."""
    return frozenset(o for line in lines for o in (line.old, line.new) if o.strip("0"))
