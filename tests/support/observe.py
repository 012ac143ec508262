"""What a test looks at after a command through the CLI: the refs, a claim's state, a
receipt, and whether anything crashed or wrote a control character.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import git

CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # anything but a newline


def ref_of(resource: str) -> str:
    """The ref of a plain resource (docs/reference/store.md)."""
    return f"refs/worklease/{resource}.lease"


def refs(repo: Path) -> str:
    return git(
        "for-each-ref", "--format=%(refname) %(objectname)", "refs/worklease/", cwd=repo
    ).stdout


def no_crash(got) -> None:
    """Never ERROR (1), never a traceback."""
    assert got.code != 1, got
    assert "Traceback" not in got.err and "unexpected error" not in got.err, got


def state(cli, resource: str, **kw) -> str:
    got = cli("show", resource, "--json", **kw)
    return got.json["state"] if got.code == 0 else f"exit {got.code}"


def receipt_doc(path: Path) -> dict:
    return json.loads(path.read_text())
