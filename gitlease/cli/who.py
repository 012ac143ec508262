"""``gitlease who PATH...``: which live claims' path scopes cover each path."""

from __future__ import annotations

import click

from ..api.output import format_duration, printable
from .app import Options, cli, command, emit, open_store


@command(cli, "who")
@click.argument("paths", nargs=-1, required=True)
def who(opts: Options, paths: tuple[str, ...]) -> None:
    """Show which live claims' path scopes cover each PATH (relative to the repository's top).

    Exit 0 whether or not a claim covers it. See docs/howto/path-scopes.md.
    """
    from ..api.scopes import who as do_who
    from .arguments import note_top_relative

    note_top_relative(paths)
    doc = do_who(open_store(opts), list(paths))
    emit(opts, doc, who_text(doc))


def who_text(doc: dict[str, object]) -> str:
    """``gitlease who`` for people: one line a path and claim."""
    lines = []
    entries = doc["paths"]
    assert isinstance(entries, list)
    for item in entries:
        path = printable(item["path"])
        if not item["claims"]:
            lines.append(f"{path}  (no live claim's scope covers it)")
        for c in item["claims"]:
            left = format_duration(int((c.get("expires_in") or 0) * 1000))
            lines.append(
                f"{path}  {printable(c['resource'])}  {c['claim_id']}  "
                f"{printable(c['owner'] or '')}  expires in {left}  "
                f"[{' '.join(printable(p) for p in c['paths'] or ())}]"
            )
    return "\n".join(lines)
