"""Commands that act only while holding a claim: exec and replace-file."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from ..errors import UsageError
from . import output
from .app import Options, cli, command, emit, open_store
from .arguments import key_option, resolve_resource


@command(cli, "exec")
@click.argument("words", nargs=-1, type=click.UNPROCESSED, metavar="[RESOURCE] -- CMD [ARGS]...")
@click.option("--receipt", type=click.Path(), help="Use the claim of this receipt.")
@click.option("--ttl", help="TTL when exec acquires the claim itself (default 15m).")
@click.option("--coordination-only", is_flag=True, help="Record the claim as coordination only.")
@click.option("--owner", help="Owner label when exec acquires.")
@click.option("--note", help="Note when exec acquires.")
@key_option
def exec_(
    opts: Options,
    words: tuple[str, ...],
    receipt: str | None,
    ttl: str | None,
    coordination_only: bool,
    owner: str | None,
    note: str | None,
    key_: str | None,
) -> int:
    """Run CMD while holding the claim: `gitlease exec RESOURCE -- CMD ARGS...`.

    Uses your active claim if its receipt is here (it stays held), else acquires one and
    releases it when CMD ends. Heartbeats at a third of the TTL; if ownership is lost, stops
    CMD's process group and exits 4. Otherwise exits with CMD's status. With --json, CMD's
    stdout goes to stderr and stdout gets one document: {"claim": ..., "exit": N}.
    """
    from ..api import answering as window
    from ..api.guarded import execute

    window.arm()  # a signal after exec's own acquire: the command never starts, the claim goes
    if "--" not in opts.argv:
        raise UsageError("put the command after --: gitlease exec RESOURCE -- CMD ARGS...")
    cmd = opts.argv[opts.argv.index("--") + 1 :]
    before = list(words[: len(words) - len(cmd)])
    if len(before) > 1:
        raise UsageError(f"exec takes one RESOURCE before --, not {before}")
    resource = resolve_resource(before[0], key_) if before else None
    if resource is None and receipt is None:
        raise UsageError("name a RESOURCE or pass --receipt")
    done = execute(
        open_store(opts),
        cmd,
        resource,
        receipt=receipt,
        ttl=ttl,
        coordination_only=coordination_only,
        owner=owner,
        note=note,
        stdout=sys.stderr.fileno() if opts.json else None,  # stdout is for the one document
        on_start=None if opts.json else _say_mode,
    )
    if opts.json:
        emit(opts, done.to_dict(), None)
    return done.exit


def _say_mode(claim: Any) -> None:
    """Before the command's own output: a coordination-only claim says so (on stderr,
    since stdout is the command's)."""
    if claim.coordination_only:
        said = f"gitlease: exec under {claim.describe()}\n{claim.guarantee}"
        with contextlib.suppress(OSError):
            click.echo(output.safe_text(said), err=True)


@command(cli, "replace-file")
@click.argument("path", type=click.Path(dir_okay=False))
@click.argument("resource", required=False)
@click.option("--expect-sha256", metavar="HEX", help="The file's current SHA-256.")
@click.option("--expect-absent", is_flag=True, help="The file must not exist yet.")
@click.option(
    "--from",
    "source",
    type=click.Path(allow_dash=True),
    default="-",
    show_default=True,
    help="Where the new content comes from.",
)
@click.option("--receipt", type=click.Path(), help="The receipt of the claim.")
@key_option
def replace_file(
    opts: Options,
    path: str,
    resource: str | None,
    expect_sha256: str | None,
    expect_absent: bool,
    source: str,
    receipt: str | None,
    key_: str | None,
) -> None:
    """Replace PATH atomically, only if you hold the claim and PATH is as expected.

    Exit 6 (PRECONDITION) if the content is not what you expected, 4 (LOST) if you do
    not hold the claim; the file is untouched in both cases. Prints the new SHA-256.
    """
    from ..api.guarded import replace_file as do_replace

    if resource is None and receipt is None:
        raise UsageError("name a RESOURCE or pass --receipt")
    if source == "-":
        content = sys.stdin.buffer.read()
    else:
        try:
            with open(source, "rb") as f:
                content = f.read()
        except OSError as exc:
            raise UsageError(f"cannot read --from {source}: {exc.strerror}") from None
    digest = do_replace(
        open_store(opts),
        path,
        content,
        expect_sha256=expect_sha256,
        expect_absent=expect_absent,
        resource=resolve_resource(resource, key_),
        receipt=receipt,
    )
    emit(opts, {"path": path, "sha256": digest}, digest)
