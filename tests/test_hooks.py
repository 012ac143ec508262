"""Real worktrees, real `git commit` through the installed hooks."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git, store_git, store_path

R = "github/acme/api/7"


def commit(worktree: Path, *extra: str, name: str = "change") -> tuple[bool, str]:
    path = worktree / f"{name}.txt"
    path.write_text(f"{time.time_ns()}\n")
    git("add", path.name, cwd=worktree)
    result = git("commit", "-qm", f"edit {name}", *extra, cwd=worktree, check=False)
    if result.returncode != 0:
        git("reset", "-q", cwd=worktree)
    return result.returncode == 0, result.stderr


def test_bound_worktree_lifecycle(cli, worktrees) -> None:
    a, b = worktrees
    assert cli("hooks", "install", cwd=a).code == 0
    assert commit(a)[0], "an unbound worktree commits freely"

    assert cli("acquire", R, "--ttl", "2s", cwd=a).code == 0
    ok, _ = commit(a)
    assert ok, "a live claim lets the bound worktree commit"

    time.sleep(2.2)
    ok, err = commit(a)
    assert not ok and "commit refused" in err and R in err and "expired" in err
    assert "test-agent" in err and "revision 1" in err and "Re-acquire" in err
    ok, err = commit(a, "--no-verify")
    assert not ok and "prepare-commit-msg" in err, "--no-verify does not skip the check"

    assert cli("acquire", R, "--ttl", "1m", cwd=b).code == 0
    ok, err = commit(a)
    assert not ok and "replaced" in err, "the claim now belongs to another: foreign"
    assert commit(b)[0], "the new holder's worktree commits"

    assert cli("release", R, cwd=b).code == 0
    assert commit(b)[0], "after release the worktree commits freely"
    assert not cli("list", "--json", cwd=b).json["claims"][0]["bound"]


def test_require_claim(cli, worktrees) -> None:
    a, _ = worktrees
    cli("hooks", "install", cwd=a)
    git("config", "gitlease.requireClaim", "true", cwd=a)
    ok, err = commit(a)
    assert not ok and "requireClaim" in err
    assert cli("acquire", "x/1", cwd=a).code == 0
    assert commit(a)[0]
    shown = cli("show", "x/1", "--json", cwd=a).json
    assert shown["bound"] is True


def test_no_bind_and_manual_bind(cli, worktrees) -> None:
    a, _ = worktrees
    cli("hooks", "install", cwd=a)
    assert cli("acquire", R, "--ttl", "1s", "--no-bind", cwd=a).code == 0
    time.sleep(1.2)
    assert commit(a)[0], "--no-bind: the hook does not check this claim"
    assert cli("bind", R, cwd=a).code == 4, "an expired claim cannot be bound"
    assert cli("acquire", "y/2", "--no-bind", cwd=a).code == 0
    assert cli("bind", "y/2", cwd=a).code == 0
    assert cli("list", "--json", cwd=a).json["claims"][-1]["bound"]
    assert cli("unbind", "y/2", cwd=a).code == 0
    assert not cli("list", "--json", cwd=a).json["claims"][-1]["bound"]


def test_tampered_record_and_missing_receipt_refuse(cli, worktrees) -> None:
    a, _ = worktrees
    cli("hooks", "install", cwd=a)
    doc = cli("acquire", R, "--json", cwd=a).json
    assert commit(a)[0]
    receipt = Path(doc["receipt"])
    saved = receipt.read_bytes()
    receipt.unlink()
    ok, err = commit(a)
    assert not ok and "missing" in err
    receipt.write_bytes(saved)
    receipt.chmod(0o644)
    ok, err = commit(a)
    assert not ok and "not trusted" in err
    receipt.chmod(0o600)
    assert commit(a)[0]

    raw = store_git("cat-file", "blob", doc["oid"], cwd=a).stdout.replace(
        "revision 1", "revision 9"
    )
    forged = subprocess.run(
        ["git", f"--git-dir={store_path(a)}", "hash-object", "-w", "--stdin"],
        cwd=a,
        input=raw,
        text=True,
        capture_output=True,
    ).stdout.strip()
    store_git("update-ref", doc["ref"], forged, cwd=a)
    ok, err = commit(a)
    assert not ok and "signature" in err


def test_foreign_hook_is_kept_chained_and_restored(cli, repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    marker = repo / "foreign-ran"
    hook.write_text(f"#!/bin/sh\necho ran >> {marker}\nexit 0\n")
    hook.chmod(0o750)
    before = hook.read_bytes()
    assert cli("hooks", "install").code == 0
    first = {p.name: p.read_bytes() for p in hook.parent.iterdir()}
    assert cli("hooks", "install").code == 0  # twice changes nothing
    assert {p.name: p.read_bytes() for p in hook.parent.iterdir()} == first
    assert commit(repo)[0]
    assert marker.read_text() == "ran\n"

    hook.parent.joinpath("pre-commit.gitlease-chained").write_text("#!/bin/sh\nexit 1\n")
    assert not commit(repo)[0], "a failing foreign hook still refuses the commit"
    hook.parent.joinpath("pre-commit.gitlease-chained").write_bytes(before)

    status = {h["hook"]: h for h in cli("hooks", "status", "--json").json["hooks"]}
    assert status["pre-commit"]["state"] == "installed" and status["pre-commit"]["chained"]
    assert cli("hooks", "uninstall").code == 0
    assert hook.read_bytes() == before
    assert stat.S_IMODE(hook.stat().st_mode) == 0o750
    assert not (hook.parent / "prepare-commit-msg").exists()


def test_core_hooks_path_is_honoured(cli, repo: Path) -> None:
    git("config", "core.hooksPath", ".githooks", cwd=repo)
    assert cli("hooks", "install").code == 0
    assert (repo / ".githooks" / "prepare-commit-msg").exists()
    assert not (repo / ".git" / "hooks" / "prepare-commit-msg").exists()
    assert cli("acquire", R, "--ttl", "1s").code == 0
    time.sleep(1.2)
    assert not commit(repo)[0]


def test_hook_check_imports_neither_pygit2_nor_click(cli, repo: Path) -> None:
    assert cli("acquire", R).code == 0  # bound: the check reads, parses and verifies
    code = (
        "import sys, gitlease.hookcheck as h; assert h.problems() == []; "
        "bad = [m for m in ('pygit2', 'click') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        capture_output=True,
        text=True,
        env=os.environ,
        check=True,
    ).stdout.strip()
    assert out == "[]"


@pytest.fixture
def python_calls(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hooks' Python, wrapped to log which hook started it; returns the log's path."""
    calls = repo.parent / "calls"
    wrapper = repo.parent / "python-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$3" >> {calls}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("GITLEASE_PYTHON", str(wrapper))
    return calls


def test_one_check_per_commit_with_or_without_no_verify(cli, repo: Path, python_calls) -> None:
    cli("hooks", "install")
    assert cli("acquire", R).code == 0
    assert commit(repo)[0]
    assert python_calls.read_text().split() == ["pre-commit"]
    python_calls.unlink()
    assert commit(repo, "--no-verify")[0]
    assert python_calls.read_text().split() == ["prepare-commit-msg"]


def test_an_unbound_worktree_starts_no_python(cli, repo: Path, python_calls) -> None:
    cli("hooks", "install")
    assert commit(repo)[0]
    assert not python_calls.exists(), "the shell hook exits before starting Python"
