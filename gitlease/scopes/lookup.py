"""Which live claims' scopes cover a path: ``gitlease who``, and the check the commit hooks
(and the harness's pre-edit hooks) make before a change to another agent's reserved file.

Lean, since it runs on every commit: standard library, the store's plain reads, and
cryptography only when a changed path lies in some claim's scope (that claim's record is
then verified). The store's scope index (:mod:`gitlease.scopes.index`) names the few claims
whose patterns cover a path; only their refs are read.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from pathlib import Path

from .._util.text import printable
from ..gitio.gitdirs import worktree_of
from ..model.claim import Claim, judge
from ..model.clock import Now, format_duration
from ..model.refname import SCOPES_INDEX_REF
from ..store.base import Store
from .index import Index, index_path, note_store, read_index, read_mirrored, rebuild, sighted
from .syntax import prefix_of
from .wildmatch import check_path, compile_pattern, is_repository_path

#: The hooks whose commit is the index as staged: they check the paths it changes.
SCOPE_HOOKS = ("pre-commit", "pre-merge-commit", "prepare-commit-msg", "pre-applypatch")


def covering(
    store: Store,
    paths: Sequence[str],
    *,
    index: Index | None = None,
    known: Container[str | None] = (),
    check: bool = True,
) -> list[tuple[str, list[Claim]]]:
    """For each path (relative to the repository's top; USAGE if not a valid one), the live
    claims whose scopes cover it, by resource. ``index``: the store's, if already read
    (:func:`stored_index`). ``known``: object ids of records known to be good (this
    worktree's own last writes: no signature to check). ``check``: refuse a path with a
    control character too (a person's input; git allows them)."""
    if check:
        for path in paths:
            check_path(path)
    if index is None:
        index = stored_index(store)
    hits = [_candidates(index, path) for path in paths]
    refs = sorted({e for found in hits for e in found})
    now = Now.read()
    claims: dict[str, Claim] = {}
    if refs:
        # (one process a ref for a few, which is what a commit in one's own scope reads;
        # two processes for any number)
        snaps = [store.read(r) for r in refs] if len(refs) <= 2 else store.read_many(refs)
        for snap in sighted(store, snaps, mirrored=index.mirrored):
            claim = judge(snap, now, known=known)
            if claim.active and claim.record is not None and claim.record.paths:
                claims[snap.ref] = claim
    out = []
    for path, found in zip(paths, hits, strict=True):
        covered = [
            claims[ref]
            for ref in sorted(found)
            if ref in claims and _pattern_for(claims[ref], path) is not None
        ]
        covered.sort(key=lambda c: c.resource)
        out.append((path, covered))
    return out


def _candidates(index: Index, path: str) -> set[str]:
    """The refs of index entries with a pattern covering ``path`` (the literal prefix first:
    most patterns are ruled out without being compiled)."""
    found = set()
    for entry in index.entries:
        for pattern in entry.paths:
            if path.startswith(prefix_of(pattern)) and _matches(pattern, path):
                found.add(entry.ref)
                break
    return found


def _matches(pattern: str, path: str) -> bool:
    try:
        return compile_pattern(pattern).matches(path)
    except ValueError:  # (UsageError) a forged entry: its record decides
        return True


def _pattern_for(claim: Claim, path: str) -> str | None:
    """The first of the claim's own patterns (its record's) that covers ``path``."""
    record = claim.record
    for pattern in (record.paths if record is not None else None) or ():
        try:
            if compile_pattern(pattern).matches(path):
                return pattern
        except ValueError:
            continue  # not a pattern gitlease writes: it covers nothing
    return None


def stored_index(store: Store) -> Index:
    """Every scope index the store holds, to look with: its file and, in a remote store's
    mirror, its index ref (entries of both, if a store has both). One that cannot be read
    is made afresh from every record, in memory; none at all, an empty index."""
    return _index_of(store.git_dir, lambda: store) or Index([], 0)


# ------------------------------------------------------------------ the commit check


def _store_dir(git_dir: Path, store: Store | None) -> Path:
    """The store's git dir: ``store``'s, when the caller opened it (the commit check did, to
    judge the bindings), else the one the worktree whose git dir is ``git_dir`` uses (one
    ``git config`` call)."""
    if store is not None:
        return store.git_dir
    from ..store.location import locate

    worktree = worktree_of(git_dir)
    return locate(cwd=worktree if worktree is not None else git_dir).git_dir


def _plain_store(store_dir: Path, git_dir: Path) -> Store:
    """The store at ``store_dir``, read as it is on disk (a remote store's mirror: the
    commit check never waits for the network)."""
    from ..store.base import Location
    from ..store.local import LocalStore

    return LocalStore(Location(store_dir, "the commit check", git_dir, None))


def _index_of(store_dir: Path, store: Callable[[], Store]) -> Index | None:
    """The store's index file, and its index ref when it is a remote store's mirror (one
    fetch brings the ref with the claims); None if it has neither (no claim there ever had
    scopes). One that exists but cannot be read (not as gitlease writes it) is made afresh
    from every record, in memory: slower, never blind. ``store``: makes the store to read
    the ref and the records with, when they are needed."""
    from ..gitio.gitread import surely_absent

    index = read_index(store_dir)
    if index is None and index_path(store_dir).exists():
        index = rebuild(store())
    if surely_absent(store_dir, SCOPES_INDEX_REF):  # (unsure: read it, and fail closed)
        return index
    mirror = read_mirrored(store())
    if index is None:
        return mirror
    return mirror.replace(entries=[*index.entries, *mirror.entries])


def foreign_scope_problems(
    git_dir: Path | str, paths: list[str], index: Index | None = None, store: Store | None = None
) -> list[str]:
    """Why changing ``paths`` (relative to the worktree's top) from the worktree whose git
    dir is ``git_dir`` must be refused: each path inside a live scope of a claim this
    worktree is not bound to, naming the claim and its holder (empty: no such path).
    ``index``: the store's scope index, if the caller read it already; ``store``: that
    worktree's store, if the caller opened it (else it is located here, at the cost of a
    ``git config`` call).

    The commit hooks call it with the paths a commit changes; the harness's pre-edit hooks
    with the file about to be edited. A store that cannot be read is a problem (fail closed).
    A remote store's mirror is read as it is (as fresh as this host's last fetch).
    """
    from ..errors import GitleaseError
    from ..receipts import bindings as bindings_mod

    git_dir = Path(git_dir)  # (the git dir as `git rev-parse` prints it, from a script)
    try:
        store_dir = _store_dir(git_dir, store)
        if index is None:
            index = _index_of(store_dir, lambda: store or _plain_store(store_dir, git_dir))
        if index is None or not index.entries or not paths:
            return []
        store = store or _plain_store(store_dir, git_dir)
        out = []
        # (no scope covers a path that cannot be a file of the repository; a control
        # character in a file's name is git's to allow, and a pattern still covers it)
        valid = [p for p in paths if isinstance(p, str) and is_repository_path(p)]
        bound = [b for b in bindings_mod.bindings(git_dir) if not isinstance(b, Path)]
        # this worktree's own last records, by the ids its bindings hold: no signature check
        found = covering(
            store, valid, index=index, known={b.oid for b in bound if b.oid}, check=False
        )
    except GitleaseError as exc:
        return [f"the path scopes cannot be read ({exc}); refusing (fail closed)"]
    mine = {b.claim_id for b in bound}
    for path, claims in found:
        for claim in claims:
            record = claim.record
            if record is None or record.claim_id in mine:
                continue
            pattern = _pattern_for(claim, path) or "?"
            left = format_duration(claim.expires_in_ms or 0)
            out.append(
                f"{printable(path)} is inside the path scope {printable(pattern)!r} of claim "
                f"{record.claim_id} on {printable(claim.resource)}, held by "
                f"{printable(record.owner)} (expires in {left}); this worktree is not bound "
                "to it"
            )
    return out


def staged_changes(cwd: Path | None = None) -> list[str]:
    """The paths the staged commit changes, relative to the top: added, modified, deleted,
    type-changed, and both sides of a rename (``git diff --cached --name-status -M -z``;
    against the empty tree before the first commit). Whatever the configuration says, every
    change is listed: a moved gitlink too (``submodule.NAME.ignore`` in ``.gitmodules``, a
    file outside the scope, or ``diff.ignoreSubmodules`` would hide it), and from the top
    (not ``diff.relative``). Fails closed: raises on a git error."""
    import subprocess  # (only with live scopes: the common commit check runs no git)

    result = subprocess.run(
        [
            "git",
            "diff",
            "--cached",
            "--name-status",
            "-M",
            "-z",
            "--no-ext-diff",
            "--ignore-submodules=none",
            "--no-relative",
        ],
        cwd=cwd,
        capture_output=True,
    )
    if result.returncode != 0:
        raise OSError(result.stderr.decode("utf-8", "replace").strip() or "git diff failed")
    fields = result.stdout.split(b"\0")
    paths: list[str] = []
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i].decode("ascii", "replace")
        if status[:1] in ("R", "C"):
            if status[:1] == "R":
                paths.append(fields[i + 1].decode("utf-8", "surrogateescape"))
            paths.append(fields[i + 2].decode("utf-8", "surrogateescape"))
            i += 3
        else:
            paths.append(fields[i + 1].decode("utf-8", "surrogateescape"))
            i += 2
    return list(dict.fromkeys(paths))


def commit_problems(
    hook: str, git_dir: Path, cwd: Path | None = None, store: Store | None = None
) -> list[str]:
    """The commit hook's scope check: nothing to do (no git call) when no claim has scopes.
    ``store``: the worktree's store, if the claim check opened it already."""
    if hook not in SCOPE_HOOKS:
        return []
    try:
        store_dir = _store_dir(git_dir, store)
        note_store(git_dir, store_dir, confirmed=True)  # (the hook's fast path reads it)
        index = _index_of(store_dir, lambda: store or _plain_store(store_dir, git_dir))
        if index is None or not index.entries:
            return []  # (no claim has scopes: no list of the changed paths is needed)
        store = store or _plain_store(store_dir, git_dir)  # (located once, for both looks)
    except Exception as exc:  # fail closed
        return [f"the path scopes cannot be read ({exc}); refusing (fail closed)"]
    return foreign_scope_problems(git_dir, staged_changes(cwd), index, store)
