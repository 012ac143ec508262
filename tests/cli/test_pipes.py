"""A reader that closes early: exit 141, as docs/reference/exit-codes.md says (issue 29.14)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose `list` prints over a megabyte (--json) and 200 KB (text)."""
    from conftest import make_repo

    repo = make_repo(tmp_path_factory.mktemp("pipes") / "repo")
    for start in range(0, 500, 250):
        names = [f"pipe/{i:04d}-" + "x" * 400 for i in range(start, start + 250)]
        assert run_cli("bundle", "acquire", *names, "--no-bind", cwd=repo).code == 0
    return repo


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
@pytest.mark.parametrize("args", [["list"], ["list", "--json"]])
def test_list_into_a_reader_that_closes_early_exits_141(
    crowded: Path, args: list[str], unbuffered: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", *args],
        cwd=crowded,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(100)  # like `| head -c 100`: read a little, then go away
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert len(head) == 100
    assert "could not be written" in err and "Traceback" not in err, err
