"""The skill tells exec's pass-through exit codes from gitlease's own (issue 29.18), and
what it says is true of the program."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT, run_cli

SKILL = (ROOT / "gitlease" / "resources" / "SKILL.md").read_text(encoding="utf-8")


def test_the_skill_says_how_to_tell_execs_exit_codes_from_gitleases() -> None:
    table = SKILL[SKILL.index("## What to do on each exit code") :]
    assert "`gitlease exec` passes its command's exit status through" in table
    assert '{"claim": ..., "exit": N}' in table and '{"error": {"code"' in table
    assert "`gitlease:`" in table


def test_what_the_skill_says_of_exec_holds(repo: Path, worktrees: tuple[Path, Path]) -> None:
    a, b = worktrees
    failing = run_cli("exec", "sk/1", "--", "sh", "-c", "echo failed >&2; exit 1", cwd=a)
    assert failing.code == 1
    assert not any(line.startswith("gitlease:") for line in failing.err.splitlines()), failing
    doc = run_cli("exec", "sk/1", "--json", "--", "sh", "-c", "exit 1", cwd=a)
    assert doc.code == 1 and json.loads(doc.out)["exit"] == 1 and "error" not in doc.json
    assert run_cli("acquire", "sk/2", cwd=b).code == 0
    held = run_cli("exec", "sk/2", "--", "true", cwd=a)
    assert held.code == 3 and held.err.startswith("gitlease: HELD"), held
    held = run_cli("exec", "sk/2", "--json", "--", "true", cwd=a)
    assert held.code == 3 and held.json["error"]["code"] == "HELD", held
    assert held.json["error"]["exit"] == 3 and "claim" not in held.json, held
