"""A local store's kept history and housekeeping: the claims' reflogs and ``git gc``.

git's reflog of each claim ref is the claim's history (``log``, ``verify``), and the
retention pass (:mod:`gitlease.maintenance.prune`) trims it itself (git's own expiry can
keep neither "the last N records" nor an active claim's records back to its acquire).
These functions are the store's side of that pass: reading a reflog, telling the lines of
writes that landed from those that never did, rewriting one under the ref's lock, and
collecting the garbage. They are kept apart from the reads and the compare-and-swap
because only ``log``, ``verify`` and the retention pass need them; a remote store's
mirror has the same history, read through the same functions.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from .._util import sharing as perms
from .._util.files import atomic_write
from ..errors import StoreError
from ..gitio.gitread import OID, git_env, landed_ids, parse_reflog, stderr_text, with_settings
from ..model.refname import PREFIX

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

#: git's own reflog expiry stays off for the claims: it can keep neither "the last N records"
#: nor an active claim's records back to its acquire, so the retention pass does it
#: (:mod:`gitlease.maintenance.retention`), and a plain ``git gc`` of the store drops no history.
#: Each store writer sets these (and :data:`LOG_KEY`) before a claim's first reflog line.
GC_KEYS = (
    "gc.refs/worklease/*.reflogExpireUnreachable",
    "gc.refs/worklease/*.reflogExpire",
)
#: Reflogs written in a bare store (libgit2 writes none there by default).
LOG_KEY = "core.logAllRefUpdates"

#: Unreferenced objects younger than this survive the pass's ``git gc``: a write stores its
#: blob before the ref (or a remote) takes it, and a push may take up to the network timeout.
GC_GRACE = "1.hour.ago"


def reflog_path(git_dir: Path, ref: str) -> Path:
    """The reflog file of ``ref``."""
    return git_dir / "logs" / ref


def make_reflog(git_dir: Path, ref: str, settings: Callable[[], None]) -> None:
    """Make the reflog file of ``ref`` if it has none, after ``settings()`` (the writer's way
    to set :data:`GC_KEYS` and :data:`LOG_KEY`): git and libgit2 append a line to a reflog
    file that exists, and make none for a ref outside ``refs/heads`` unless told."""
    log = reflog_path(git_dir, ref)
    if log.exists():
        return
    settings()
    try:
        with perms.shared_umask(git_dir):
            log.parent.mkdir(parents=True, exist_ok=True)
            log.touch()
        perms.widen_parents(log)
    except OSError as exc:
        raise StoreError(f"cannot write to the store {git_dir}: {exc}") from None


def reflog_refs(git_dir: Path) -> list[str]:
    """Every ref under ``refs/worklease/`` that has a reflog file (existing or not)."""
    base = git_dir / "logs" / PREFIX
    if not base.is_dir():
        return []
    root = git_dir / "logs"
    return sorted(
        str(p.relative_to(root))
        for p in base.rglob("*")
        if p.is_file() and not p.name.endswith(".lock")
    )


def read_reflog(git_dir: Path, ref: str) -> bytes:
    """The reflog of ``ref`` as git wrote it (empty if there is none)."""
    try:
        return reflog_path(git_dir, ref).read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StoreError(f"cannot read the reflog of {ref}: {exc.strerror or exc}") from None


def reflog_landed(git_dir: Path, ref: str, current: str | None) -> list[str]:
    """The object ids the ref's reflog shows it pointing at, oldest first, without the
    line of a write that never happened: libgit2 appends a reflog line before it renames
    the lock into place, so a process killed in between leaves a line that the next one
    (or, for the last, the ref itself: ``current``) contradicts. Deletions are left out.
    (For finding a ref moved back below what it held: :mod:`gitlease.state.highwater`.)
    """
    try:
        lines = parse_reflog(read_reflog(git_dir, ref))
    except StoreError:
        return []
    return landed_ids(lines, current)


def history_start(git_dir: Path, ref: str) -> str | None:
    """The record where ``ref``'s kept history starts, if the retention pass cut it: the
    record that the reflog's first line writes over the zero id. (An untrimmed history's
    first record has no predecessor anyway; ``log`` and ``verify`` stop at this one even
    while ``git gc`` has not dropped the expired records yet, :data:`GC_GRACE`.)"""
    try:
        with reflog_path(git_dir, ref).open("rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    lines = parse_reflog(first)
    if not lines or lines[0].old.strip("0") or not OID.fullmatch(lines[0].new):
        return None
    return lines[0].new


def rewrite_reflog(
    git_dir: Path,
    locked: Callable[[str], AbstractContextManager[None]],
    ref: str,
    change: Callable[[bytes], bytes | None],
) -> bool:
    """Replace ``ref``'s reflog with ``change(current)`` while holding the ref's lock
    (``locked``: the store writer's), so that no writer (gitlease's, git's or libgit2's,
    which append under that lock) adds a line meanwhile; None leaves it. The caller holds
    the guard. Whether it changed."""
    path = reflog_path(git_dir, ref)
    try:
        with locked(ref):
            current = read_reflog(git_dir, ref)
            new = change(current)
            if new is None or new == current:
                return False
            try:
                mode = path.stat().st_mode & 0o777
            except FileNotFoundError:
                return False
            atomic_write(path, new, durable=False, mode=mode)
            return True
    except OSError as exc:
        raise StoreError(f"cannot rewrite the reflog of {ref}: {exc}") from None


def delete_reflog(git_dir: Path, ref: str) -> None:
    """Remove the reflog of a ref that no longer exists (the caller holds the guard), and
    the directories it leaves empty. libgit2 leaves it behind when it deletes a ref."""
    path = reflog_path(git_dir, ref)
    with suppress(FileNotFoundError):
        path.unlink()
    stop = git_dir / "logs" / PREFIX.rstrip("/")
    parent = path.parent
    while parent != stop and stop in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def collect_garbage(git_dir: Path, grace: str = GC_GRACE, *, trimmed: bool = False) -> None:
    """``git gc`` of the store: pack what is kept, drop what no ref or reflog names.

    Objects younger than ``grace`` survive, so a write in flight keeps its blob. A
    store that is not bare (a repository named as the store outright, with a project
    in it) gets ``git gc --auto`` instead: its own history is not ours to repack daily.

    ``trimmed``: for the retention pass, which has just trimmed the claims' reflogs
    itself: git's own reflog expiry is skipped when the store keeps no other reflog
    (``gc.reflogExpire`` and ``gc.reflogExpireUnreachable`` set to ``never`` for the one
    ``git gc``; git then runs no ``reflog expire``). That expiry keeps nothing of the
    claims' anyway but rewrites every reflog to say so, a lock and a rename a resource:
    most of a pass over a big store (docs/performance.md, ``prune``). A store that holds
    other reflogs (a repository named as the store outright) keeps git's expiry for them.
    """
    env = git_env(git_dir)
    if trimmed and _only_claim_reflogs(git_dir):
        settings = ("gc.reflogExpire", "gc.reflogExpireUnreachable")
        env = with_settings(env, tuple((k, "never") for k in settings))

    def git(*args: str) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(["git", *args], capture_output=True, env=env)
        except OSError as exc:
            raise StoreError(f"cannot run git: {exc}") from None

    bare = git("rev-parse", "--is-bare-repository").stdout.strip() == b"true"
    result = git("gc", "--quiet", f"--prune={grace}", *([] if bare else ["--auto"]))
    if result.returncode != 0:
        raise StoreError(f"git gc of the store {git_dir} failed: {stderr_text(result)}")


def _only_claim_reflogs(git_dir: Path) -> bool:
    """Whether every reflog of the store is a claim's (under ``logs/refs/worklease``)."""
    logs = git_dir / "logs"
    try:
        top = os.listdir(logs)
        refs = os.listdir(logs / "refs") if "refs" in top else []
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return set(top) <= {"refs"} and set(refs) <= {PREFIX.split("/")[1]}
