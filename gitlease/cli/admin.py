"""Commands that look after the store and the worktree: verify, prune, bind, unbind."""

from __future__ import annotations

import click

from ..errors import StoreError
from . import output
from .app import Options, cli, command, emit, open_store
from .hooks import commit_check_warning


@command(cli, "verify")
@click.option(
    "--repair",
    is_flag=True,
    help="Fix what is safe: stale locks, dead receipts, unverifiable records that "
    "can no longer be active. Never touches an active claim.",
)
def verify(opts: Options, repair: bool) -> int:
    """Check every record: parse, signature, transitions, stale locks, orphan receipts."""
    from ..maintenance import verify as do_verify

    report = do_verify(open_store(opts), repair=repair)
    doc = report.to_dict()
    lines = [
        f"checked {report.checked} refs: "
        + ("ok" if report.ok and not report.problems else f"{len(report.problems)} problem(s)")
    ]
    for p in report.problems:
        mark = "repaired" if p.repaired else "PROBLEM"
        lines.append(f"  {mark:<8} {p.kind:<18} {output.escape(p.message)}")
    # the report is the command's output, on stdout, whatever it found (`verify | less`)
    emit(opts, doc, "\n".join(lines))
    return 0 if report.ok else StoreError.exit_code


@command(cli, "prune")
@click.option(
    "--older-than",
    default="7d",
    show_default=True,
    help="Drop tombstones released longer ago than this.",
)
def prune(opts: Options, older_than: str) -> None:
    """Drop old tombstones; revisions keep increasing for every resource."""
    from ..maintenance import prune as do_prune

    dropped = do_prune(open_store(opts), older_than=older_than)
    emit(opts, {"pruned": dropped}, f"pruned {len(dropped)} tombstone(s)")


@command(cli, "bind")
@click.argument("resource")
@click.option("--receipt", type=click.Path(), help="The receipt of the claim.")
def bind(opts: Options, resource: str, receipt: str | None) -> None:
    """Tie this worktree to your active claim on RESOURCE (the commit hooks check it)."""
    from ..lease import bind as do_bind

    store = open_store(opts)
    claim = do_bind(store, resource, receipt)
    doc = claim.to_dict()
    commit_check_warning(opts, doc, store.location.worktree)
    emit(opts, doc, f"bound this worktree to {claim.describe()}")


@command(cli, "unbind")
@click.argument("resource", required=False)
def unbind(opts: Options, resource: str | None) -> None:
    """Untie this worktree from RESOURCE (from every claim if none is named)."""
    from ..lease import unbind as do_unbind

    removed = do_unbind(open_store(opts), resource)
    emit(opts, {"unbound": removed}, f"unbound {', '.join(removed) or 'nothing'}")
