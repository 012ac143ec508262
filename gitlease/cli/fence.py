"""fence-check: the server hook's verdict anywhere, e.g. a CI job on a hosting service."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from ..errors import LostError, StoreError, UsageError
from .app import Options, cli, command, emit, open_store

if TYPE_CHECKING:
    from .. import Store


@command(cli, "fence-check")
@click.argument("revisions", nargs=-1, metavar="[RANGE]...")
@click.option(
    "--stdin",
    "from_stdin",
    is_flag=True,
    help="Read pre-receive's `OLD NEW REF` lines from stdin and judge the commits they bring "
    "that no ref here has yet (where the refs have not moved: a pre-receive of any kind).",
)
@click.option(
    "--require-claim/--no-require-claim",
    default=None,
    help="Refuse commits without a Gitlease-Claim trailer too: every commit of RANGE, or with "
    "--stdin those a protected ref receives (default: git config gitlease.requireClaim).",
)
@click.option(
    "--protect",
    multiple=True,
    metavar="PATTERN",
    help="With --stdin: a protected ref pattern, such as refs/heads/main or refs/heads/* "
    "(repeatable; default: git config gitlease.protect, else refs/heads/*).",
)
def fence_check(
    opts: Options,
    revisions: tuple[str, ...],
    from_stdin: bool,
    require_claim: bool | None,
    protect: tuple[str, ...],
) -> int:
    """Refuse commits made under a claim that is not the resource's current claim.

    Judges the Gitlease-Claim trailers of the commits in RANGE (git log arguments, such as
    BASE..HEAD) against the claims in the store, as the server's pre-receive hook does
    (`gitlease hooks install --server`). With a remote (--remote, GITLEASE_REMOTE or git config
    gitlease.remote) the claims are fetched first. Exit 0: every claim is current; 4: refused;
    7: a record does not verify. See docs/fencing.md.
    """
    from ..fence.check import check_push, check_range
    from ..fence.git import Git, parse_updates

    if from_stdin == bool(revisions):
        raise UsageError("give a RANGE (such as BASE..HEAD) or --stdin, not both or neither")
    if protect and not from_stdin:
        raise UsageError("--protect goes with --stdin; with a RANGE, --require-claim covers it all")
    fetchable: Store | None = None  # a store read without fetching, for the hint below
    if from_stdin and opts.store is None and not os.environ.get("GITLEASE_STORE"):
        # pre-receive's lines: the repository receiving the push holds the claims
        claims = Git()
    else:
        store = open_store(opts)
        store.refresh()
        claims = Git(store.git_dir)
        fetchable = store if store.remote is None else None
    commits = Git()
    if from_stdin:
        updates = parse_updates(sys.stdin.buffer.read().decode("utf-8", "surrogateescape"))
        report = check_push(
            updates,
            commits=commits,
            claims=claims,
            require_claim=require_claim,
            protect=protect or None,
        )
    else:
        report = check_range(revisions, commits=commits, claims=claims, require_claim=require_claim)
    if report.ok:
        emit(opts, report.to_dict(), f"fence-check: {report.summary()}")
        return 0
    code = StoreError.exit_code if report.untrusted else LostError.exit_code
    if opts.json:
        emit(opts, report.to_dict(), None)
    else:
        click.echo(report.explain("gitlease fence-check:").rstrip(), err=True)
        if fetchable is not None and any(f.verdict == "unknown" for f in report.findings):
            click.echo(
                f"(The claims were read from {fetchable.git_dir}, without fetching: where they "
                "live at a git remote, name it with --remote.)",
                err=True,
            )
    return code
