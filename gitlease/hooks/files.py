"""gitlease's hook programs as files: their text, the marker that makes a file gitlease's,
and writing one in place.

The commit hooks (:mod:`gitlease.hooks.install`) and the server's ``pre-receive``
(:mod:`gitlease.fence.server`) are installed next to hooks that belong to someone else, so both
must tell gitlease's files from the others by the same rule, and write theirs so that git
never runs half a program. Where each keeps the hook it moves aside differs (a folder for the
commit hooks, a suffix on the server), and stays with each.

No pygit2 and no click here.
"""

from __future__ import annotations

import functools
import os
import shlex
from pathlib import Path

from .._util.files import atomic_write

#: The word in the first lines of every hook program gitlease installs.
MARKER = "gitlease-managed-hook"
#: How much of a hook file is read.
_HEAD = 1 << 20
#: How far into a file the marker is looked for (it is on the second line).
_MARKER_WITHIN = 600


def program(name: str, placeholder: str, variable: str, python: str) -> str:
    """The hook program ``name`` from the project's ``hooks/`` folder, its ``placeholder``
    line replaced so that it runs ``python``. Read again only when the file changed (its
    size and time): a resident server compares it with the hooks on every ``acquire``, and
    the package can be upgraded under it, after which ``hooks install`` writes the new one."""
    from importlib.resources import files

    resource = files("gitlease.resources") / name
    try:
        seen = os.stat(str(resource))
        stamp: tuple[int, int] | None = (seen.st_mtime_ns, seen.st_size)
    except (OSError, TypeError):  # (not a plain file: a zip, say; read it every time)
        stamp = None
    if stamp is None:
        return _program(resource.read_text(encoding="utf-8"), placeholder, variable, python)
    return _program_at(str(resource), stamp, placeholder, variable, python)


@functools.lru_cache(maxsize=8)
def _program_at(
    path: str, _stamp: tuple[int, int], placeholder: str, variable: str, python: str
) -> str:
    with open(path, encoding="utf-8") as f:
        return _program(f.read(), placeholder, variable, python)


def _program(text: str, placeholder: str, variable: str, python: str) -> str:
    return text.replace(placeholder, f"{variable}={shlex.quote(python)}")


def read_head(path: Path) -> str | None:
    """The start of a hook file (its first MiB) as text, or None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size  # (a buffer of the file's size, not a MiB)
            return f.read(min(size, _HEAD) if size else _HEAD).decode("utf-8", "replace")
    except OSError:
        return None


def has_marker(text: str | None) -> bool:
    """Whether a hook file's text is one of gitlease's programs."""
    return text is not None and MARKER in text[:_MARKER_WITHIN]


def is_ours(path: Path) -> bool:
    """Whether the file at ``path`` is one of gitlease's hook programs."""
    return has_marker(read_head(path))


def write(path: Path, source: str) -> None:
    """Replace ``path`` with an executable hook program, atomically: git runs the old
    program or the new one, never a torn file. Not fsynced: a hook lost to a power cut is
    found by ``gitlease hooks status`` and put back by ``install``."""
    atomic_write(path, source.encode("utf-8"), durable=False, mode=0o755)
