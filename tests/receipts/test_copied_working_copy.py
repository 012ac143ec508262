"""A working copy copied with ``cp -a`` does not hold the original's claim: receipts and
bindings name the working copy they were written in (issue 29.19).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import run_cli

R = "review/1"


def test_a_copied_working_copy_does_not_hold_the_originals_claim(tmp_path: Path) -> None:
    """Issue 29.19: `cp -a` of a working copy copied its receipts (tokens) and bindings into
    a working copy sharing the store: the copy passed `check` and committed under the
    original's claim. Receipts and bindings now name the working copy they were written in."""
    import shutil

    from conftest import git, make_repo

    origin = tmp_path / "origin.git"
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    repo = make_repo(tmp_path / "repo")
    git("remote", "add", "origin", str(origin), cwd=repo)
    assert run_cli("hooks", "install", cwd=repo).code == 0
    assert run_cli("acquire", R, cwd=repo).code == 0
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    assert run_cli("where", "--path", cwd=copy).out == run_cli("where", "--path", cwd=repo).out
    assert run_cli("check", R, cwd=copy).code == 4, "the copy holds the original's claim"
    (copy / "change").write_text("x\n")
    git("add", "change", cwd=copy)
    committed = subprocess.run(["git", "commit", "-qm", "x"], cwd=copy, capture_output=True)
    assert committed.returncode != 0, "a commit in the copy passed the check"
    assert run_cli("check", R, cwd=repo).code == 0, "the original still holds its claim"
    assert run_cli("heartbeat", R, cwd=repo).code == 0
    (repo / "change").write_text("x\n")
    git("add", "change", cwd=repo)
    assert subprocess.run(["git", "commit", "-qm", "x"], cwd=repo).returncode == 0
