"""The agent skill (``SKILL.md``, shipped in :mod:`gitlease.resources`): its text, and
installing it where an agent loads skills (``gitlease skill install DIRECTORY``).

The skill teaches an agent the claim lifecycle; it is installed as
``DIRECTORY/gitlease/SKILL.md`` (for example under ``~/.claude/skills``), and a different
``SKILL.md`` already there is left alone unless the caller says to replace it.
"""

from __future__ import annotations

from pathlib import Path

from .._util.files import atomic_write
from ..errors import UsageError


def skill_text() -> str:
    """The text of the shipped SKILL.md."""
    from importlib.resources import files

    return (files("gitlease.resources") / "SKILL.md").read_text(encoding="utf-8")


def install_skill(directory: str | Path, *, force: bool = False) -> Path:
    """Write the skill to ``directory/gitlease/SKILL.md`` and return that path (absolute).

    USAGE for a different SKILL.md there (unless ``force``), for a directory in its place,
    and for a place that cannot be written."""
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
    return target.absolute()
