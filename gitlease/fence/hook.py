"""Fenced pushes: commits name the claims they were made under, and the server refuses work
whose claim is no longer the resource's current claim (see docs/fencing.md).

The parts, one module each:

* :mod:`gitlease.fence.trailer`: the ``Gitlease-Claim`` trailer, and the prepare-commit-msg step
  that names the worktree's bound claims in every commit.
* :mod:`gitlease.fence.git`: what the check reads from git (the push, the commits, the records).
* :mod:`gitlease.fence.check`: the check of a push or a range against the current claims.
* :mod:`gitlease.fence.report`: its verdict, and the refusal people read.
* this module: the hooks' entry points.

They run inside git hooks on every push and commit, so they stay lean: no pygit2, no click,
and cryptography only when a record is verified. Entry points::

    python -m gitlease.fence pre-receive                         # stdin: old new ref lines
    python -m gitlease.fence prepare-commit-msg FILE [SOURCE [SHA]]
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import GitleaseError
from .check import check_push
from .git import TRAILER, Git, parse_updates
from .trailer import add_trailers


def pre_receive(stdin: str) -> int:
    """The server hook: 0 lets the push through; 1 refuses it, saying why on stderr."""
    try:
        report = check_push(parse_updates(stdin), commits=Git(), claims=Git())
    except GitleaseError as exc:
        sys.stderr.write(f"gitlease: push refused: {exc} (fail closed)\n")
        return 1
    except Exception as exc:  # fail closed on anything unexpected
        sys.stderr.write(f"gitlease: push refused: the fence check failed ({exc!r}); fail closed\n")
        return 1
    if report.ok:
        return 0
    sys.stderr.write(report.explain("gitlease: push"))
    return 1


def prepare_commit_msg(args: list[str]) -> int:
    """The commit hook's prepare-commit-msg with trailers on: the claim check, then the
    trailers, in one process. A trailer that cannot be added refuses the commit: a claim is
    bound, and a strict server would refuse the commit without it."""
    from ..hooks import check as hookcheck

    code = hookcheck.main(["prepare-commit-msg", *args])
    if code:
        return code
    if not args:
        sys.stderr.write("gitlease (prepare-commit-msg): no commit message file given\n")
        return 1
    try:
        add_trailers(Path(args[0]))
    except GitleaseError as exc:
        sys.stderr.write(f"gitlease (prepare-commit-msg): commit refused: cannot add the {TRAILER} "
                         f"trailer: {exc}\n")  # fmt: skip
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m gitlease.fence HOOK [ARGS]``: the hook named first, with its arguments."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["pre-receive"]:
        return pre_receive(sys.stdin.buffer.read().decode("utf-8", "surrogateescape"))
    if args[:1] == ["prepare-commit-msg"]:
        return prepare_commit_msg(args[1:])
    sys.stderr.write("usage: python -m gitlease.fence pre-receive | prepare-commit-msg FILE\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
