"""``gitlease who PATH...``: which live claims' path scopes cover each path."""

from __future__ import annotations

import click

from .app import Options, cli, command, emit, open_store


@command(cli, "who")
@click.argument("paths", nargs=-1, required=True)
def who(opts: Options, paths: tuple[str, ...]) -> None:
    """Show which live claims' path scopes cover each PATH (relative to the repository's top).

    Exit 0 whether or not a claim covers it. See docs/howto/path-scopes.md.
    """
    from ..scopes.lookup import who as do_who
    from ..scopes.lookup import who_text

    doc = do_who(open_store(opts), list(paths))
    emit(opts, doc, who_text(doc))
