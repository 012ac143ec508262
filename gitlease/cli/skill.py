"""`gitlease skill`: print the agent skill, or install it where an agent loads skills."""

from __future__ import annotations

import click

from ..agents.skill import install_skill, skill_text
from .app import CONTEXT, Options, cli, command, emit, shared_options


@cli.group("skill", invoke_without_command=True, context_settings=CONTEXT)
@shared_options
@click.pass_context
def skill(ctx: click.Context) -> None:
    """Print the agent skill (SKILL.md) that teaches the claim lifecycle."""
    if ctx.invoked_subcommand is not None:
        return
    opts = ctx.find_root().ensure_object(Options)
    text = skill_text()
    if opts.json:
        emit(opts, {"name": "gitlease", "skill": text}, None)
    else:
        click.echo(text, nl=False)


@command(skill, "install")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite a different SKILL.md that is already there.")
def install(opts: Options, directory: str, force: bool) -> None:
    """Write the skill to DIRECTORY/gitlease/SKILL.md and print that path.

    DIRECTORY is where your agent loads skills from, for example ~/.claude/skills or a
    project's .claude/skills. An existing SKILL.md that differs is left alone unless --force.
    """
    path = str(install_skill(directory, force=force))
    emit(opts, {"path": path}, path)
