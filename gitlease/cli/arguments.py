"""What several commands take beyond the shared options: items one a line from stdin, a
resource read as a provider's reference (``--key``), and the options of an acquire.

Apart from :mod:`gitlease.cli.app` (the group, the shared options, exit codes), which every
start of the CLI loads, ``gitlease --version`` included; these load with the commands that
take them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, overload

import click


def read_items(items: tuple[str, ...]) -> list[str]:
    """Arguments, or one item a line from stdin when the only argument is ``-``."""
    if items == ("-",):
        from ..api.reads import iter_resources

        return list(iter_resources(sys.stdin))
    return list(items)


def note_top_relative(paths: tuple[str, ...] | list[str]) -> None:
    """Say on stderr, from a folder below the worktree's top, that ``paths`` are read from
    the top: ``who app.py`` in ``src/`` asks of ``app.py``, not ``src/app.py``, and would
    answer "free" of a reserved file without a word. (Paths stay top-relative, as documented
    and as a scope is written in the record, whichever folder an agent runs in.)"""
    if not paths:
        return
    from ..api.output import printable
    from ..api.scopes import folder_below_top

    folder = folder_below_top()
    if folder is None:
        return
    # (a path that already starts with the folder, or with `**`, reads the same either way)
    meant = [p for p in paths if not p.startswith((f"{folder}/", "**", "/"))]
    if not meant:
        return
    click.echo(
        f"gitlease: note: paths are read from the repository's top folder, not from "
        f"{printable(folder)}/: if you meant a file here, give "
        f"{printable(folder)}/{printable(meant[0])}",
        err=True,
    )


def _paths_from_top(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    note_top_relative(value or ())
    if value and any("[" in str(v) for v in value):
        from ..api.output import printable
        from ..api.scopes import bracketed_names

        for pattern, meant in bracketed_names([str(v) for v in value]):
            click.echo(
                f"gitlease: note: {printable(pattern)} reads each bracket as a class of one "
                f"character, not the folder of that name here: for that folder, give "
                f"{printable(meant)}",
                err=True,
            )
    return value


KEY_HELP = "Read RESOURCE as a reference of this provider (see `gitlease key`)."
#: ``--key PROVIDER``: RESOURCE read as a reference of the provider (:func:`resolve_resource`).
key_option = click.option("--key", "key_", metavar="PROVIDER", help=KEY_HELP)


@overload
def resolve_resource(resource: str, key: str | None) -> str: ...
@overload
def resolve_resource(resource: None, key: str | None) -> None: ...
def resolve_resource(resource: str | None, key: str | None) -> str | None:
    """RESOURCE as given, or read as a reference of the provider ``key`` (``--key``)."""
    if resource is None or key is None:
        return resource
    from ..providers import canonical_key

    return canonical_key(key, resource)


def acquire_options(
    what: str, keepalive_help: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options shared by ``acquire`` and ``bundle acquire`` (``what`` is taken: "the
    claim", "every claim"; ``--keepalive``'s help says which keepalive command it runs)."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(
            [
                click.option("--ttl", help=f"How long {what} lasts without a heartbeat (15m)."),
                click.option(
                    "--owner",
                    help=(
                        "A non-secret label (default: GITLEASE_OWNER, else "
                        "user@host:<worktree>, user@host:pid outside a repository)."
                    ),
                ),
                click.option("--note", help=f"A note shown with {what}."),
                click.option(
                    "--wait",
                    help="While HELD, wait this long, in turn with the other waiters on this host.",
                ),
                click.option(
                    "--coordination-only",
                    is_flag=True,
                    help="The durable mutation happens elsewhere (e.g. a remote API): "
                    "recorded as the mode.",
                ),
                click.option(
                    "--paths",
                    "paths",
                    multiple=True,
                    metavar="PATTERN",
                    callback=_paths_from_top,
                    help="Reserve files: a path scope (git wildmatch, from the repository's "
                    "top; repeatable). HELD if it overlaps a live claim's scope on another "
                    "resource. See docs/howto/path-scopes.md.",
                ),
                click.option("--receipt", type=click.Path(), help="Where to write the receipt."),
                click.option("--no-bind", is_flag=True, help="Do not bind this worktree."),
                key_option,
                click.option("--keepalive", is_flag=True, help=keepalive_help),
            ]
        ):
            f = option(f)
        return f

    return decorate
