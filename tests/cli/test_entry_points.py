"""The console scripts (``gitlease``, ``worklease``), ``git lease`` and ``python -m gitlease``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_console_scripts_and_git_lease(repo: Path) -> None:
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    for argv in (
        ["gitlease", "where"],
        ["worklease", "where"],
        ["git", "lease", "where"],
        ["git", "lease", "acquire", "--help"],
        [sys.executable, "-m", "gitlease", "where"],
    ):
        out = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True)
        assert out.returncode == 0, (argv, out.stderr)
    usage = subprocess.run(
        ["git", "lease", "acquire", "--help"], cwd=repo, env=env, capture_output=True, text=True
    ).stdout
    assert "Usage: git lease acquire" in usage
