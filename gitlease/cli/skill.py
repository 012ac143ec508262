"""`gitlease skill`: print the agent skill, or install it where an agent loads skills."""

from __future__ import annotations

from pathlib import Path

import click

from .._util.files import atomic_write
from ..errors import UsageError
from .app import CONTEXT, Options, cli, command, emit, shared_options


def skill_text() -> str:
    """The text of the shipped SKILL.md."""
    from importlib.resources import files

    return (files("gitlease.resources") / "SKILL.md").read_text(encoding="utf-8")


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
    text = skill_text()
    target = Path(directory).expanduser() / "gitlease" / "SKILL.md"
    try:
        if target.is_dir():
            raise UsageError(f"{target} is a directory")
        if target.exists() and not force and target.read_text(encoding="utf-8") != text:
            raise UsageError(
                f"{target} exists and differs from this version's skill; pass --force to replace it"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, text.encode("utf-8"), durable=False, mode=0o644)
    except UnicodeDecodeError:
        raise UsageError(f"{target} exists and is not text; pass --force to replace it") from None
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    path = str(target.absolute())
    emit(opts, {"path": path}, path)
