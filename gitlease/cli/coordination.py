"""`gitlease remote ...`: record, deliberately, the git remote every clone of a project
coordinates through, and show who recorded it and when (docs/remote.md)."""

from __future__ import annotations

from typing import Any

import click

from .app import Options, cli, command, emit, shared_options

_LEAD = {"help_option_names": ["-h", "--help"]}


@cli.group("remote", context_settings=_LEAD)
@shared_options
def remote() -> None:
    """Record or show the git remote that coordinates this project's shared store."""


def _text(doc: dict[str, Any]) -> str:
    rec = doc.get("recorded")
    if not rec:
        return f"{doc['store']}: no coordinator recorded (every clone decides on this host alone)"
    return (
        f"{doc['store']}: coordinated through {rec['remote']}\n"
        f"  recorded by {rec['by'] or 'unknown (gitlease 0.2.0 or earlier)'}"
        f" at {rec['at'] or 'an unknown time'}"
    )


@command(remote, "set")
@click.argument("name_or_url", metavar="NAME|URL")
@click.option("--replace", is_flag=True, help="Replace a different coordinator recorded before.")
def set_(opts: Options, name_or_url: str, replace: bool) -> None:
    """Record NAME|URL (a remote of this repository, or a URL) as the coordinator of every
    clone of this project on this host; `where` then says who recorded it and when."""
    from ..api.location import set_coordinator

    doc = set_coordinator(name_or_url, store=opts.store, replace=replace)
    emit(opts, doc, _text(doc))


@command(remote, "show")
def show(opts: Options) -> None:
    """Show the coordinator recorded for this project's shared store, by whom and when."""
    from ..api.location import coordinator

    doc = coordinator(opts.store)
    emit(opts, doc, _text(doc))
