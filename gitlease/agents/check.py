"""The pre-edit check: which worktree an edited file lies in, and why its edit must stop.

One judgement with the commit hooks (:func:`gitlease.hooks.check.worktree_problems`): a
worktree bound to a claim that is not active and ours (lapsed, released, replaced, its
receipt gone), or one under ``gitlease.requireClaim`` that holds no claim. Nothing is
copied from there, so the edit hook and the commit hook cannot disagree.

Lean, like the commit check: standard library and gitlease's lean modules only; no pygit2,
click or cryptography on this path when the binding names the record's object id
(tests/agents/test_agent_hooks.py checks it at run time).
"""

from __future__ import annotations

import os
from pathlib import Path

from .._util import TYPE_CHECKING
from .._util.text import printable_strict as printable
from ..gitio.gitdirs import find_git_dir, worktree_of
from ..hooks import check as hookcheck
from ..receipts import bindings as bindings_mod

if TYPE_CHECKING:
    from ..store.base import Store

#: Under ``gitlease.requireClaim`` with no claim bound there is nothing to re-acquire.
REQUIRE_ADVICE = (
    "Claim the work first: `gitlease acquire RESOURCE` (or `gitlease acquire --first-free`) "
    "binds this worktree; then edit."
)
#: A file another claim reserves (its path scope, or its holder's worktree): nothing of this
#: agent's to re-acquire; the file is the holder's.
OTHERS_ADVICE = (
    "Those files are another agent's: leave them to it (for a path scope, `gitlease who PATH` "
    "names its claim and holder), and edit other files or choose other work."
)

#: A file of a store: claims change through gitlease's commands only.
STORE_ADVICE = (
    "A gitlease store changes only through gitlease's commands (`gitlease acquire`, "
    "`heartbeat`, `release`): never edit its files."
)


class Worktree:
    """The edited files of one worktree, relative to its top, and what stops their edit;
    ``internal``: edited files inside its git directory (its hooks, its config), shown as
    the path given, judged by the worktree's claims but by no path scope. ``own``: what is
    wrong with the worktree's own claims (re-acquiring mends it); ``others``: why the files
    are another claim's (nothing to re-acquire: they are its holder's)."""

    __slots__ = ("git_dir", "internal", "others", "own", "paths", "store", "top")

    def __init__(self, git_dir: Path, top: Path, *, store: bool = False) -> None:
        self.git_dir = git_dir
        self.top = top
        self.store = store  # a gitlease store, not a worktree: no edit of it is an agent's
        self.paths: list[str] = []
        self.internal: list[str] = []
        self.own: list[str] = []
        self.others: list[str] = []

    @property
    def problems(self) -> list[str]:
        """Every reason the edit is denied, as the model reads them."""
        return [*self.others, *self.own]


def problems(
    git_dir: Path, paths: list[str], *, top: Path | None = None
) -> tuple[list[str], list[str]]:
    """Why the edit of ``paths`` (relative to the worktree's top folder ``top``) in the
    worktree whose private git dir is ``git_dir`` must be denied: (what is wrong with its
    own claims, which paths another claim's scope reserves); both empty: let it be.

    The one place every reason to deny an edit is asked for: the worktree's own claims
    (the commit check's judgement), and each path inside a live path scope of a claim this
    worktree is not bound to (docs/howto/path-scopes.md; the commit hooks ask the same).
    """
    from ..scopes.lookup import foreign_scope_problems

    opened: list[Store] = []  # (the store the claim check opens, for the scope check too)
    own = hookcheck.worktree_problems(git_dir, top, opened=opened)
    return own, foreign_scope_problems(git_dir, paths, store=opened[0] if opened else None)


def locate(cwd: Path, path: str) -> tuple[Path, Path, str | None] | None:
    """(git dir, worktree top, path relative to the top) of the file ``path`` (relative to
    ``cwd``); None when it lies in no git worktree (not gitlease's business). A file inside
    a worktree's git directory (its hooks, its config: what an agent whose claim lapsed
    could change to slip past the checks) belongs to that worktree, with no path (None).
    The file need not exist: a new file's nearest existing folder decides."""
    full = Path(os.path.realpath(cwd / path))
    return _placed(full, _around(full))


def _placed(
    full: Path, found: tuple[Path, Path | None] | None
) -> tuple[Path, Path, str | None] | None:
    """:func:`locate` of the file ``full``, from the repository around it (``found``)."""
    if found is None:
        return None
    git_dir, top = found
    if top is None:  # inside a git directory: the worktree it serves, if any
        top = worktree_of(git_dir)
        return None if top is None else (git_dir, top, None)
    try:
        rel = full.relative_to(top)
    except ValueError:
        return None
    if rel.parts and rel.parts[0] == ".git":
        return git_dir, top, None
    return git_dir, top, rel.as_posix()


def _around(full: Path) -> tuple[Path, Path | None] | None:
    """(git dir, worktree top or None) of the repository around the file ``full``."""
    folder = full.parent
    while not folder.is_dir():
        if folder.parent == folder:
            return None
        folder = folder.parent
    return find_git_dir(folder)


def _store(found: tuple[Path, Path | None] | None) -> Path | None:
    """The gitlease store that is the repository around a file (``found``: a bare
    repository with gitlease's refs or scope index, serving no worktree), or None. Its
    records, refs and scope index are gitlease's alone to write: an edit there could blank
    the path scopes for everyone."""
    if found is None or found[1] is not None or worktree_of(found[0]) is not None:
        return None
    git_dir = found[0]
    if (git_dir / "worktrees").exists():  # (a bare repository with worktrees: not a store)
        return None
    if (git_dir / "refs" / "worklease").is_dir() or (git_dir / "worklease" / "scopes").is_dir():
        return git_dir  # (not `worklease/` alone: every repository gitlease works in has one)
    return None


def worktrees(cwd: Path, paths: list[str]) -> list[Worktree]:
    """The worktrees the edited ``paths`` lie in, each with its files (in the given order);
    a gitlease store an edited file lies in comes as one more, with the file as internal."""
    out: dict[Path, Worktree] = {}
    for path in paths:
        full = Path(os.path.realpath(cwd / path))
        found = _around(full)
        where = _placed(full, found)
        if where is None:
            store = _store(found)
            if store is not None:
                out.setdefault(store, Worktree(store, store, store=True)).internal.append(path)
            continue
        git_dir, top, rel = where
        wt = out.setdefault(git_dir, Worktree(git_dir, top))
        if rel is None:
            wt.internal.append(path)
        else:
            wt.paths.append(rel)
    return list(out.values())


def edit_problems(cwd: Path, paths: list[str]) -> list[Worktree]:
    """The worktrees of ``paths`` whose edit must be denied, each with its problems.

    A file in another worktree than the agent's own (``cwd``'s) that is bound to a claim
    is that claim's holder's to edit: denied, whatever its claim's state (judged there, it
    would pass as the holder's own edit)."""
    here = find_git_dir(cwd)
    own_top = here[1] if here is not None else None
    own = here[0] if here is not None and own_top is not None else None
    found = worktrees(cwd, paths)
    # a git directory another worktree shares (the common hooks, the config): judged by this
    # agent's own claims too, as an edit here
    shared = [p for wt in found if wt.git_dir != own for p in wt.internal]
    if own is not None and own_top is not None and shared:
        mine = next((wt for wt in found if wt.git_dir == own), None)
        if mine is None:
            mine = Worktree(own, own_top)
            found.append(mine)
        mine.internal += shared
    denied = []
    for wt in found:
        if wt.store:
            wt.others = [
                "the file lies in a gitlease store: its records, refs and path scope index are "
                "written by gitlease alone"
            ]
            denied.append(wt)
            continue
        try:
            wt.own, wt.others = problems(wt.git_dir, wt.paths, top=wt.top)
        except Exception as exc:  # fail closed on anything unexpected, as the commit check
            wt.own = [
                f"the claim check failed ({type(exc).__name__}: {exc}); refusing (fail closed)"
            ]
        # (an agent in no worktree of its own, started in a parent folder say, has none of
        # them: every bound worktree is another's to it)
        if wt.git_dir != own and bindings_mod.bindings(wt.git_dir):
            # (its claims are that agent's: nothing here for this agent to re-acquire)
            wt.others = [
                "the file lies in another agent's worktree, which is bound to a claim: only "
                "that worktree's agent edits it",
                *wt.others,
                *wt.own,
            ]
            wt.own = []
        if wt.problems:
            denied.append(wt)
    return denied


def guarded(cwd: Path) -> Worktree | None:
    """The worktree around ``cwd`` if its edits are checked: it is bound to a claim (a
    binding file, readable or not) or ``gitlease.requireClaim`` asks for one. There an
    unreadable payload makes the edit hook deny (fail closed); elsewhere it says nothing."""
    found = find_git_dir(cwd)
    if found is None or found[1] is None:
        return None
    git_dir, top = found[0], found[1]
    if not bindings_mod.bindings(git_dir) and not hookcheck.worktree_problems(git_dir, top):
        return None  # (unbound: its only judgement is requireClaim's)
    return Worktree(git_dir, top)


def deny_reason(denied: list[Worktree]) -> str:
    """What the model reads when its edit is denied: what is wrong, and the next step."""
    lines = []
    for wt in denied:
        files = ", ".join(printable(p) for p in [*wt.paths, *wt.internal]) or "this file"
        top = printable(str(wt.top))
        place = "the gitlease store" if wt.store else "the worktree"
        lines.append(f"gitlease denied the edit of {files} in {place} {top}:")
        lines += [f"  - {printable(p)}" for p in wt.problems]
    own = [p for wt in denied for p in wt.own]
    advice = []
    if own:
        advice.append(
            REQUIRE_ADVICE if set(own) == {hookcheck.REQUIRE_PROBLEM} else hookcheck.ADVICE
        )
    if any(wt.others and not wt.store for wt in denied):
        advice.append(OTHERS_ADVICE)
    if any(wt.store for wt in denied):
        advice.append(STORE_ADVICE)
    lines.append(
        f"Next step: {' '.join(advice)} Do not retry the edit before that: it would be "
        "refused again, and so would its commit."
    )
    return "\n".join(lines)
