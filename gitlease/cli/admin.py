"""Commands that look after the store and the worktree: verify, prune, bind, unbind."""

from __future__ import annotations

import click

from ..api.output import printable
from ..errors import StoreError
from .app import Options, cli, command, emit, open_store
from .hooks import commit_check_warning, stale_binding_warnings


@command(cli, "verify")
@click.option(
    "--repair",
    is_flag=True,
    help="Fix what is safe: stale locks, dead receipts, unverifiable records that "
    "can no longer be active. Never touches an active claim.",
)
def verify(opts: Options, repair: bool) -> int:
    """Check every record: parse, signature, transitions, stale locks, orphan receipts."""
    from ..maintenance.verify import verify as do_verify

    report = do_verify(open_store(opts, writes="many"), repair=repair)
    doc = report.to_dict()
    lines = [
        f"checked {report.checked} refs: "
        + ("ok" if report.ok and not report.problems else f"{len(report.problems)} problem(s)")
    ]
    for p in report.problems:
        mark = "repaired" if p.repaired else "PROBLEM"
        lines.append(f"  {mark:<8} {p.kind:<18} {printable(p.message)}")
    # the report is the command's output, on stdout, whatever it found (`verify | less`)
    emit(opts, doc, "\n".join(lines))
    return 0 if report.ok else StoreError.exit_code


@command(cli, "prune")
@click.option(
    "--older-than",
    default=None,
    metavar="DURATION",
    help="Remove tombstones released longer ago than this ('never': keep them). "
    "Default: git config gitlease.tombstoneAge, else 7d.",
)
@click.option(
    "--auto",
    is_flag=True,
    help="Run as the automatic daily pass does: nothing if gitlease.autoPrune is false or "
    "a pass is running; with a remote, compact this host's mirror only.",
)
def prune(opts: Options, older_than: str | None, auto: bool) -> None:
    """Apply the retention policy: drop old tombstones and expired history, tidy the store's
    files, then git gc. Never touches an active claim; revisions keep increasing."""
    from ..maintenance.prune import retain

    report = retain(open_store(opts, writes="many"), older_than=older_than, auto=auto)
    emit(opts, report.to_dict(), report.describe())


@command(cli, "bind")
@click.argument("resource")
@click.option("--receipt", type=click.Path(), help="The receipt of the claim.")
def bind(opts: Options, resource: str, receipt: str | None) -> None:
    """Tie this worktree to your active claim on RESOURCE (the commit hooks check it)."""
    from ..api.lease import bind as do_bind

    store = open_store(opts)
    claim = do_bind(store, resource, receipt)
    doc = claim.to_dict()
    commit_check_warning(opts, doc, store.location.worktree)
    stale_binding_warnings(opts, doc, store, [claim.ref])
    emit(opts, doc, f"bound this worktree to {claim.describe()}")


@command(cli, "unbind")
@click.argument("resource", required=False)
def unbind(opts: Options, resource: str | None) -> None:
    """Untie this worktree from RESOURCE (from every claim if none is named)."""
    from ..api.lease import unbind as do_unbind

    removed = do_unbind(open_store(opts), resource)
    emit(opts, {"unbound": removed}, f"unbound {', '.join(removed) or 'nothing'}")
