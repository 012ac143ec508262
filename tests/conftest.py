"""Hermetic git for every test: an isolated HOME, no system or global git config.

The environment is set when this module is imported, before anything loads
pygit2 (libgit2 reads HOME once), and every subprocess inherits it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_HOME = Path(tempfile.mkdtemp(prefix="gitlease-test-home-"))
(_HOME / ".gitconfig").write_text(
    "[user]\n\tname = Test Agent\n\temail = agent@example.invalid\n"
    "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
)
for _name in list(os.environ):
    if _name.startswith(("GITLEASE_", "GIT_")) or _name in ("NO_COLOR",):
        del os.environ[_name]
os.environ.update(
    HOME=str(_HOME),
    XDG_STATE_HOME=str(_HOME / "state"),
    XDG_CONFIG_HOME=str(_HOME / "config"),
    GIT_CONFIG_NOSYSTEM="1",
    GIT_CONFIG_GLOBAL=str(_HOME / ".gitconfig"),
    GIT_TERMINAL_PROMPT="0",
    GITLEASE_OWNER="test-agent",
    LC_ALL="C.UTF-8",
)

ROOT = Path(__file__).resolve().parent.parent


def git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, text=True, capture_output=True, check=check)


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", str(path), cwd=path.parent)
    (path / "README").write_text("backlog\n")
    git("add", "README", cwd=path)
    git("commit", "-qm", "initial", cwd=path)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def worktrees(repo: Path) -> tuple[Path, Path]:
    """Two linked worktrees of one repository (they share one store)."""
    a, b = repo.parent / "wt-a", repo.parent / "wt-b"
    git("worktree", "add", "-q", "-b", "agent-a", str(a), cwd=repo)
    git("worktree", "add", "-q", "-b", "agent-b", str(b), cwd=repo)
    return a, b


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def json(self):
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out[:500]!r}, err={self.err[:500]!r})"


def run_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float = 60,
) -> Result:
    """Run the real CLI in a subprocess, as an agent would."""
    proc = subprocess.run(
        [sys.executable, "-m", "gitlease", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
        input=input,
        timeout=timeout,
    )
    return Result(proc)


@pytest.fixture
def cli(repo: Path):
    """``cli("acquire", "x", cwd=...)``: the CLI in a subprocess, cwd defaulting to the repo."""

    def call(*args: str, cwd: Path | None = None, **kw) -> Result:
        return run_cli(*args, cwd=cwd or repo, **kw)

    return call


@pytest.fixture
def store(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The library's store for ``repo``, with the working directory inside it."""
    from gitlease.location import open_store

    monkeypatch.chdir(repo)
    yield open_store()
