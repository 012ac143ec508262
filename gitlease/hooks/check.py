"""The commit check run by the git hooks: refuse a commit without a live claim.

See docs/howto/hook-managers.md, docs/howto/pre-commit.md and docs/concepts.md (hooks).

It runs on every commit, so it stays lean: no pygit2, no click. It reads this
worktree's bindings with plain file reads, each bound record with one
``git cat-file`` call, and imports cryptography only when a bound record is
not the one this worktree last wrote (its binding names that record's object
id). Anything it cannot read makes it refuse (fail closed).

Usage (from a hook): ``python -m gitlease.hookcheck HOOK-NAME [ARGS...]``, or the
``gitlease-hook HOOK-NAME [ARGS...]`` command, which a hook manager's configuration or
someone else's hook script calls (see docs/howto/hook-managers.md).
Exit 0 lets the commit proceed; exit 1 refuses it with a message on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .._util import TYPE_CHECKING
from .._util import testing as _testing
from ..errors import GitleaseError
from ..receipts import bindings as bindings_mod

if TYPE_CHECKING:
    from ..model.claim import Claim
    from ..store.base import Store
    from ..store.projects import RepoConfig

ADVICE = (
    "Re-acquire the resource and resume from the provider's state, or choose other work "
    "(`gitlease unbind RESOURCE` if this worktree no longer works on it)."
)
#: Under ``gitlease.requireClaim`` with no claim bound there is nothing to re-acquire.
REQUIRE_ADVICE = (
    "Acquire the resource you work on (`gitlease acquire RESOURCE` binds this worktree), "
    "then commit again."
)
REQUIRE_PROBLEM = (
    "this repository requires a claim for every commit (gitlease.requireClaim) and "
    "this worktree holds none: run `gitlease acquire RESOURCE` first"
)


def problems(cwd: Path | None = None, opened: list[Store] | None = None) -> list[str]:
    """Why a commit from this worktree must be refused (empty: it may proceed); ``opened``
    as for :func:`worktree_problems`."""
    from ..gitio.gitdirs import find_git_dir

    found = find_git_dir(cwd or Path.cwd())
    if found is None:
        return []
    return worktree_problems(found[0], cwd, opened=opened)


def worktree_problems(
    git_dir: Path,
    cwd: Path | None = None,
    held: list[Claim] | None = None,
    opened: list[Store] | None = None,
) -> list[str]:
    """Why work in the worktree whose private git dir is ``git_dir`` must stop (empty: it may
    go on): the one judgement of the commit hooks, also used by the agents' edit hooks
    (:mod:`gitlease.agents`). ``cwd``: where the store is looked for (inside the worktree).
    ``held``, when given, gains each bound claim found active and ours; ``opened`` the store,
    when one was opened (the scope check then reads it without locating it again)."""
    from ..store.location import open_store

    bound = bindings_mod.bindings(git_dir)
    if not bound:
        return [REQUIRE_PROBLEM] if _require_claim(git_dir) else []
    try:
        # A remote store's mirror, read without the network: the bound claims are this
        # host's own, judged on its own clock, and each write of theirs updated the mirror.
        store = open_store(cwd=cwd, remote="")
    except GitleaseError as exc:
        return [f"the claim store cannot be read ({exc}); refusing (fail closed)"]
    from ..claims.engine import check_claims

    if opened is not None:  # (the scope check then needs no second look)
        opened.append(store)
    if store.location.config is not None:  # (and the trailers note none either)
        _CONFIGS[git_dir] = store.location.config

    out = []
    for binding in bound:
        if isinstance(binding, Path):
            out.append(bindings_mod.unreadable(binding))
            continue
        try:
            receipt, claim_ref = bindings_mod.bound_claim(binding)
            # the binding's id of this worktree's last record spares the signature check
            # when the record is that one, byte for byte, and the receipt's token wrote it
            # (docs/design.md)
            oid = bindings_mod.oid_for(binding, receipt.token)
            claims = check_claims(store, receipt, [claim_ref.replace(oid=oid)], 0)
        except GitleaseError as exc:
            out.append(f"{binding.resource} (claim {binding.claim_id}): {exc}")
            continue
        if held is not None:
            held.extend(claims)
    return out


SCOPE_ADVICE = (
    "Those files are reserved by another agent's claim (`gitlease who PATH` shows it): leave "
    "them to its holder, or unstage them (`git restore --staged PATH`) and commit the rest."
)


def scope_problems(hook: str, cwd: Path | None = None, store: Store | None = None) -> list[str]:
    """Why the staged commit must be refused for touching another claim's path scope
    (docs/howto/path-scopes.md): empty, at the cost of one file read, when no claim has
    scopes. ``store``: the worktree's store, if the claim check opened it."""
    from ..gitio.gitdirs import find_git_dir
    from ..scopes.lookup import commit_problems

    found = find_git_dir(cwd or Path.cwd())
    if found is None:
        return []
    return commit_problems(hook, found[0], cwd, store)


def _require_claim(git_dir: Path) -> bool:
    """``gitlease.requireClaim``, from the cached configuration read (no git process when
    nothing it depends on changed)."""
    from ..store.projects import read_config

    return read_config(git_dir).require_claim


#: The configuration the check read for a worktree's git dir, in this process.
_CONFIGS: dict[Path, RepoConfig] = {}
#: The note the hook script reads to know, without a git process, that gitlease.trailers is
#: on (gitlease/resources/gitlease-hook, step 3): kept true by every check.
TRAILERS_NOTE = "trailers-on"


def note_trailers(git_dir: Path) -> None:
    """Keep ``worklease/trailers-on`` in the worktree's git dir present exactly when
    ``gitlease.trailers`` is on. Best effort: a stale note costs one more check, never a
    skipped one (prepare-commit-msg always checks when it is there)."""
    from ..store.projects import read_config

    note = git_dir / "worklease" / TRAILERS_NOTE
    try:
        config = _CONFIGS.get(git_dir) or read_config(git_dir)
    except GitleaseError:
        return
    on = config.trailers
    try:
        if on and not note.exists():
            note.touch(mode=0o644)
        elif not on and note.exists():
            note.unlink()
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    """``python -m gitlease.hookcheck HOOK [ARGS]``: 0 lets the commit proceed, 1 refuses it."""
    args = sys.argv[1:] if argv is None else argv
    hook = args[0] if args else "pre-commit"
    for line in _testing.warnings():  # a test-only switch never changes a decision silently
        sys.stderr.write(line + "\n")
    _CONFIGS.clear()
    opened: list[Store] = []  # (the store the claim check opens, for the scope check too)
    try:
        found = problems(opened=opened)
    except Exception as exc:  # fail closed on anything unexpected
        found = [f"the claim check failed ({type(exc).__name__}: {exc}); refusing (fail closed)"]
    _note_trailers_here()
    try:
        scoped = scope_problems(hook, store=opened[0] if opened else None)
    except Exception as exc:  # fail closed on anything unexpected
        scoped = [f"the scope check failed ({type(exc).__name__}: {exc}); refusing (fail closed)"]
    if not found and not scoped:
        return 0
    lines = [f"gitlease ({hook}): commit refused."]
    lines += [f"  - {p}" for p in found + scoped]
    if found:
        lines.append(REQUIRE_ADVICE if found == [REQUIRE_PROBLEM] else ADVICE)
    if scoped:
        lines.append(SCOPE_ADVICE)
    sys.stderr.write("\n".join(lines) + "\n")
    return 1


def _note_trailers_here() -> None:
    from ..gitio.gitdirs import find_git_dir

    try:
        found = find_git_dir(Path.cwd())
    except (OSError, GitleaseError):
        return
    if found is not None and bindings_mod.bindings(found[0]):
        note_trailers(found[0])


def run() -> None:
    """``gitlease-hook HOOK-NAME [ARGS...]``: the check, for a hook someone else owns."""
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.stderr.write(
            "usage: gitlease-hook HOOK-NAME [ARGS...]  (from a git hook: the hook's own name "
            "and its arguments; exit 0 lets the commit proceed, 1 refuses it)\n"
        )
        sys.exit(2)
    sys.exit(main(args))


if __name__ == "__main__":
    sys.exit(main())
