"""`gitlease agent-hook HARNESS` and `gitlease agents install|uninstall|status HARNESS`.

The hook itself is :mod:`gitlease.agents.hook` (lean: the harness runs it on every edit
without this CLI); `agent-hook` is the same check for people and scripts. `agents status`
answers "does this harness run gitlease's hooks here?": exit 0 if so, 6 (PRECONDITION, as
`hooks status`) if not, with what is missing and the fix. See
docs/howto/agent-harnesses.md.
"""

from __future__ import annotations

from typing import Any

import click

from ..agents.payloads import HARNESSES
from ..errors import PreconditionError
from .app import CONTEXT, Options, cli, command, emit, shared_options

_HARNESS = click.argument("harness", type=click.Choice(HARNESSES))


@command(cli, "agent-hook")
@_HARNESS
def agent_hook(opts: Options, harness: str) -> int:
    """Answer a hook call of HARNESS (its JSON payload on stdin) in that harness's format.

    Before an edit: a deny, with the reason and the next step, when the file's worktree is
    bound to a claim that lapsed, was released or replaced (or holds none under
    gitlease.requireClaim); otherwise nothing. At session start: the worktree's claims, as
    context for the model. Always exit 0 (never "allow": the person's own permission rules
    still apply). The installed hooks run `python -I -m gitlease.agents.hook HARNESS`.
    """
    from ..agents.hook import main

    return main([harness])


@cli.group("agents", context_settings=CONTEXT)
@shared_options
def agents() -> None:
    """Install, remove or inspect gitlease's hooks and MCP server in an agent harness."""


def _text(report: Any) -> str:
    verdict = "in effect" if report.in_effect else "NOT in effect"
    lines = [f"gitlease's {report.harness} hooks in {report.top} are {verdict}"]
    for f in report.files:
        parts = [f"{event} {'yes' if cmd else 'no'}" for event, cmd in f.hooks.items()]
        if f.mcp is not None:
            parts.append(f"MCP server {'yes' if f.mcp else 'no'}")
        state = "" if f.exists else " (absent)"
        lines.append(f"{f.path}{state}: " + ", ".join(parts))
    lines += [f"problem: {p}" for f in report.files for p in f.problems]
    if report.fix is not None:
        lines.append(f"fix: {report.fix}")
    return "\n".join(lines)


def _finish(opts: Options, report: Any, ok: bool, lead: list[str]) -> int:
    text = "\n".join([*lead, _text(report)])
    if ok:
        emit(opts, report.to_dict(), text)
        return 0
    if opts.json:
        emit(opts, report.to_dict(), None)
    else:
        click.echo(text, err=True)
    return PreconditionError.exit_code


@command(agents, "install")
@_HARNESS
def install(opts: Options, harness: str) -> int:
    """Merge gitlease's hooks and MCP server into HARNESS's settings in this worktree.

    Keeps everything already there; a second run changes nothing. The original files are
    kept (in the worktree's git dir) for `agents uninstall`. A settings file that is not
    valid JSON is refused (exit 2), and nothing is written.
    """
    from ..agents import settings

    report = settings.install(harness)
    return _finish(opts, report, report.in_effect, report.changed or ["nothing to change"])


@command(agents, "uninstall")
@_HARNESS
def uninstall(opts: Options, harness: str) -> int:
    """Take gitlease's hooks and MCP server out of HARNESS's settings in this worktree.

    A file still as `agents install` left it gets its original bytes back (or is removed,
    if install created it); a file changed since keeps every change but gitlease's entries.
    """
    from ..agents import settings

    report = settings.uninstall(harness)
    lines = report.changed or ["nothing of gitlease's was installed"]
    emit(opts, report.to_dict(), "\n".join(lines))
    return 0


@command(agents, "status")
@_HARNESS
def status(opts: Options, harness: str) -> int:
    """Say whether HARNESS runs gitlease's hooks in this worktree: exit 0 if so, 6 if not."""
    from ..agents.status import status as agents_status

    report = agents_status(harness)
    return _finish(opts, report, report.in_effect, [])
