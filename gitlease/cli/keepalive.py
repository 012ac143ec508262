"""`gitlease keepalive`: keep your claim alive in a detached process while the agent lives."""

from __future__ import annotations

import os

import click

from .app import Options, cli, command, emit, open_store
from .arguments import key_option, resolve_resource

WHILE_PID_HELP = (
    "Keep it alive while this process lives (default: the agent, the nearest process above "
    "this one that is neither a shell nor gitlease)."
)
MAX_HELP = "Stop after this long at the latest, leaving the claim to expire (default 4h)."


@command(cli, "keepalive")
@click.argument("resource", required=False)
@click.option("--while-pid", type=int, metavar="PID", help=WHILE_PID_HELP)
@click.option("--max", "max_", metavar="D", help=MAX_HELP)
@click.option(
    "--receipt", type=click.Path(), help="The receipt of the claim (default: this worktree's)."
)
@key_option
def keepalive(
    opts: Options,
    resource: str | None,
    while_pid: int | None,
    max_: str | None,
    receipt: str | None,
    key_: str | None,
) -> None:
    """Renew your claim at a third of its TTL, in a detached process, while the agent lives.

    It stops, leaving the claim to expire, when the watched process ends, after --max, when
    the claim is released, lost or replaced; `release` stops it. Exit 3 if a keepalive
    already keeps the claim alive, 4 if you do not hold it.
    """
    from ..keepalive.start import keep_alive

    claim = keep_alive(
        open_store(opts),
        resolve_resource(resource, key_),
        receipt=receipt,
        while_pid=while_pid,
        max_duration=max_,
        watch_from=os.getppid(),
    )
    assert claim.keepalive is not None
    emit(opts, claim.to_dict(), f"{claim.describe()}\n{claim.keepalive.describe()}")
