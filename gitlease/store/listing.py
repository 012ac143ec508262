"""A local store's reads of many refs through plain git (no pygit2): ``list``, the board,
the commit check's fallbacks, ``read_many`` before a write opens the repository.

Kept apart from :mod:`gitlease.store.local` because the commit check reads one ref and
never needs them. git alone knows every rule of refs, so the refs are named by ``git
for-each-ref`` (their ids, no blob), except in a small store of plain refs, which is read
from its files (:mod:`gitlease.gitio.refwalk`, which leaves anything else to git); the
records are then read by the one reader of many
objects (:class:`~gitlease.gitio.catfile.BatchReader`: loose ones from their files, the
rest through one ``git cat-file --batch`` stream).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._util.files import unnamed_file
from ..errors import StoreError
from ..gitio.catfile import BatchReader, Found
from ..gitio.gitread import (
    SYMBOLIC,
    UNREADABLE_OID,
    Snapshot,
    broken_refs,
    git_env,
    parse_for_each_ref,
    stderr_text,
    unreadable_error,
    unreadable_folder,
)
from ..gitio.refwalk import ref_ids
from ..model.bootclock import stamp_foreign
from ..model.refname import PREFIX
from .base import BlobRead

if TYPE_CHECKING:
    import subprocess

#: One ``git`` call in the store: its arguments, and what is written to its input.
Git = Callable[..., "subprocess.CompletedProcess[bytes]"]


def snapshot(ref: str, oid: str, found: Found) -> Snapshot:
    """A listed ref's snapshot from its object's type and bytes (None: missing), with the
    problem a listing names for it."""
    if found is None:
        return Snapshot(ref, oid, None, f"object {oid} is missing")
    kind, body = found
    if kind != "blob":
        return Snapshot(ref, oid, None, f"the ref points at a {kind}, not a blob")
    return Snapshot._of((ref, oid, body, None, None))


def readable(git_dir: Path, prefix: str) -> None:
    """STORE when a folder of refs under ``prefix`` cannot be listed by this user: git skips
    it without a word, and a listing that took git's word would show the claims in it as
    free (a store shared by several users, one of whose umask made a folder 0700)."""
    folder = unreadable_folder(git_dir, prefix)
    if folder is not None:
        raise unreadable_error(git_dir, folder)


def read_many(git_dir: Path, git: Git, refs: Sequence[str]) -> list[Snapshot]:
    """Several refs, in the order given, in two git calls whatever their number.

    One ``for-each-ref`` lists the object id of every ref in the store (it reads no
    blob, so it stays cheap with many claims; a small store of plain refs is read from its
    files, :func:`gitlease.gitio.refwalk.ref_ids`), then the blobs of the refs asked for are
    read in one stream. (Naming the refs to ``cat-file`` answers "missing" alike for an
    absent ref, a broken ref file and a missing object; a read of one ref is a process.)
    """
    oids: dict[str, str] = {}
    symbolic: set[str] = set()
    broken = {}
    walked = ref_ids(git_dir, PREFIX)
    if walked is not None:
        oids = dict(walked)
    else:
        readable(git_dir, PREFIX)
        listed = git("for-each-ref", "--format=%(objectname) %(refname) %(symref)", PREFIX)
        if listed.returncode != 0:
            raise StoreError(f"cannot read the store {git_dir}: {stderr_text(listed)}")
        for line in listed.stdout.decode("utf-8", "replace").splitlines():
            oid, _, rest = line.partition(" ")
            ref, _, target = rest.partition(" ")
            oids[ref] = oid
            if target:
                symbolic.add(ref)
        if b"ignoring broken ref" in listed.stderr:
            broken = {s.ref: s for s in broken_refs(listed.stderr, PREFIX)}
    wanted = list(dict.fromkeys(oids[r] for r in refs if r in oids and r not in symbolic))
    reader = BatchReader(git_dir)
    try:
        blobs = reader.blobs(wanted) if wanted else {}
    finally:
        reader.close()
    out = []
    for ref in refs:
        if ref in broken:
            out.append(broken[ref])
        elif ref in symbolic:
            out.append(Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC))
        elif ref not in oids:
            out.append(Snapshot(ref, None, None))
        else:
            data, problem = blobs.get(oids[ref], (None, f"object {oids[ref]} is missing"))
            out.append(Snapshot(ref, oids[ref], data, problem))
    return stamp_foreign(git_dir, out)


def listed(
    git_dir: Path, prefix: str, seen: Mapping[str, Snapshot], batch: int, stamped: bool
) -> Iterator[list[Snapshot]]:
    """The refs under ``prefix`` as one ``git for-each-ref`` names them, read a batch at a
    time as git writes them (broken refs last); the records of ``seen`` whose ids did not
    change are not read at all. Each snapshot is what a listing gives for the ref (a blob,
    or the problem), stamped with its first sighting unless ``stamped`` is False."""
    errors: list[bytes] = []
    reader = BatchReader(git_dir)
    try:
        for lines in _listed_ids(git_dir, prefix, batch, errors):
            out: list[Snapshot] = []
            unread: list[tuple[int, str, str]] = []
            for line in lines:
                oid, _, rest = line.partition(" ")
                ref, _, target = rest.partition(" ")
                before = seen.get(ref)
                if target:
                    out.append(Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC))
                elif before is not None and before.oid == oid and before.data is not None:
                    if before.first_seen_ms is not None:  # (stamped afresh below)
                        before = before.replace(first_seen_ms=None)
                    out.append(before)
                else:
                    unread.append((len(out), ref, oid))
                    out.append(Snapshot(ref, oid, None))
            if unread:
                found = reader.objects([oid for _, _, oid in unread])
                for i, ref, oid in unread:
                    out[i] = snapshot(ref, oid, found[oid])
            yield stamp_foreign(git_dir, out) if stamped else out
    finally:
        reader.close()
    if b"ignoring broken ref" in b"".join(errors):
        yield broken_refs(b"".join(errors), prefix)


def _listed_ids(git_dir: Path, prefix: str, batch: int, errors: list[bytes]) -> Iterator[list[str]]:
    """``git for-each-ref``'s lines of ``%(objectname) %(refname) %(symref)``, a batch at
    a time as git writes them (what git said on stderr, appended to ``errors``; STORE
    if it failed: nothing read before then is to be used). A small store of plain refs is
    read from its files instead, the same lines (:func:`gitlease.gitio.refwalk.ref_ids`)."""
    walked = ref_ids(git_dir, prefix)
    if walked is not None:
        for start in range(0, len(walked), batch):
            yield [f"{oid} {ref} " for ref, oid in walked[start : start + batch]]
        return
    readable(git_dir, prefix)
    import subprocess  # (a read loads subprocess only when it runs git: 1.5-2 ms a process)

    fmt = "--format=%(objectname) %(refname) %(symref)"
    with unnamed_file(git_dir) as stderr:  # (a pipe could fill and stall git)
        try:
            proc = subprocess.Popen(
                ["git", "for-each-ref", fmt, prefix],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=git_env(git_dir),
            )
        except OSError as exc:
            raise StoreError(f"cannot run git: {exc}") from None
        try:
            assert proc.stdout is not None
            lines: list[str] = []
            for raw in proc.stdout:
                lines.append(raw.rstrip(b"\n").decode("utf-8", "surrogateescape"))
                if len(lines) >= batch:
                    yield lines
                    lines = []
            code = proc.wait()
        finally:
            if proc.poll() is None:  # (the reader stopped early)
                proc.kill()
                proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]
        stderr.seek(0)
        errors.append(stderr.read())
    if code != 0:
        why = errors[-1].decode("utf-8", "replace").strip() or f"git exited {code}"
        raise StoreError(f"cannot read the store {git_dir}: {why}")
    if lines:
        yield lines


def for_each_ref(git_dir: Path, git: Git, pattern: str, read_blob: BlobRead) -> list[Snapshot]:
    """Every ref matching ``pattern`` with its blob, from one ``git for-each-ref`` (or, when
    an object behind a ref is missing, names and ids first, then each blob)."""
    readable(git_dir, pattern)
    fmt = "%(refname) %(objectname) %(objecttype) %(raw:size) %(symref)%0a%(raw)"
    result = git("for-each-ref", f"--format={fmt}", pattern)
    if result.returncode != 0:
        if b"missing object" in result.stderr:
            return _for_each_ref_slow(git_dir, git, pattern, read_blob)
        raise StoreError(f"cannot read the store {git_dir}: {stderr_text(result)}")
    snapshots = parse_for_each_ref(result.stdout)
    if b"ignoring broken ref" in result.stderr:
        snapshots.extend(broken_refs(result.stderr, pattern))
    return snapshots


def _for_each_ref_slow(
    git_dir: Path, git: Git, pattern: str, read_blob: BlobRead
) -> list[Snapshot]:
    """Names and ids first, then each blob: survives a missing object behind a ref."""
    fmt = "--format=%(refname) %(objectname) %(symref)"
    result = git("for-each-ref", fmt, pattern)
    if result.returncode != 0:
        raise StoreError(f"cannot read the store {git_dir}: {stderr_text(result)}")
    snapshots = []
    for line in result.stdout.decode("utf-8", "surrogateescape").splitlines():
        ref, _, rest = line.partition(" ")
        oid, _, target = rest.partition(" ")
        if target:
            snapshots.append(Snapshot(ref, UNREADABLE_OID, None, SYMBOLIC))
            continue
        data, problem = read_blob(oid)
        snapshots.append(Snapshot(ref, oid, data, problem))
    if b"ignoring broken ref" in result.stderr:
        snapshots.extend(broken_refs(result.stderr, pattern))
    return snapshots
