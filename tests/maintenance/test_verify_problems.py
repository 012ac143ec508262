"""`verify` names store problems, not housekeeping (issues 29.16 and 29.20)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli

R = "verify/1"


def test_a_routine_release_and_reacquire_by_someone_else_is_no_problem(
    worktrees: tuple[Path, Path],
) -> None:
    """verify exited 7 ('PROBLEM orphan-receipt') for the spent receipt of a claim released
    and then taken by someone else: a spent receipt is housekeeping, tidied a day later."""
    a, b = worktrees
    assert run_cli("acquire", R, cwd=a).code == 0
    assert run_cli("release", R, cwd=a).code == 0
    assert run_cli("acquire", R, cwd=b).code == 0
    got = run_cli("verify", "--json", cwd=a)
    assert got.code == 0, got
    assert got.json["ok"] is True and got.json["problems"] == [], got
    assert run_cli("release", R, cwd=b).code == 0
