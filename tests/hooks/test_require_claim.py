"""``gitlease.requireClaim``: a commit without a claim is refused, asking to acquire one (there is
none to re-acquire).
"""

from __future__ import annotations

from pathlib import Path

from conftest import git


def test_a_required_claim_refusal_does_not_say_re_acquire(cli, repo: Path) -> None:
    assert cli("hooks", "install").code == 0
    git("config", "gitlease.requireClaim", "true", cwd=repo)
    (repo / "f").write_text("x\n")
    git("add", "f", cwd=repo)
    got = git("commit", "-qm", "x", cwd=repo, check=False)
    assert got.returncode != 0 and "requires a claim" in got.stderr
    assert "Re-acquire" not in got.stderr, got.stderr
