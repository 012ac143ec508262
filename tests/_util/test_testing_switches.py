"""The test-only switches (``GITLEASE_TESTING_*``, gitlease/_util/testing.py) count only with
the explicit ``GITLEASE_TESTING`` gate, and then every command and the commit hook warn; a
malformed one never crashes a command (docs/reliability.md, "At the edges", item 14).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import git
from observe import no_crash

R = "edge/1"


def test_a_test_only_boot_offset_alone_is_ignored(cli, worktrees) -> None:
    a, b = worktrees
    env = {"GITLEASE_TESTING_BOOT_OFFSET_MS": "3600000000"}
    took = cli("acquire", R, "--ttl", "1s", cwd=a, env=env)
    assert took.code == 0 and "ignoring the test-only GITLEASE_TESTING_BOOT_OFFSET_MS" in took.err
    time.sleep(1.2)
    assert cli("acquire", R, cwd=b).code == 0, "a 1-second claim must not live 1000 hours"


@pytest.mark.parametrize("gate", [None, "yes", "1"], ids=["no-gate", "yes", "one"])
def test_a_test_only_boot_id_alone_is_ignored(cli, gate: str | None) -> None:
    assert cli("acquire", R).code == 0
    env = {"GITLEASE_TESTING_BOOT_ID": "x", **({"GITLEASE_TESTING": gate} if gate else {})}
    got = cli("list", "--json", env=env)
    assert got.json["claims"][0]["state"] == "active", got
    assert "WARNING" in got.err and "ignor" in got.err, got


def test_with_the_explicit_test_switch_the_switches_count_and_every_command_warns(
    cli, repo: Path
) -> None:
    from conftest import TESTING

    assert cli("acquire", R).code == 0
    other_host = {**TESTING, "GITLEASE_TESTING_BOOT_ID": "x"}
    for args in (["list", "--json"], ["show", R, "--json"], ["free", "edge/9"]):
        got = cli(*args, env=other_host)
        assert got.code == 0, got
        assert got.err.startswith("gitlease: WARNING: GITLEASE_TESTING is set"), got
        assert "GITLEASE_TESTING_BOOT_ID" in got.err
    assert cli("show", R, "--json", env=other_host).json["state"] == "expired", "it counted"
    alone = cli("list", env=TESTING)
    assert "WARNING: GITLEASE_TESTING is set" in alone.err, "even with no switch in force"
    assert cli("list").err == "", "and nothing without it"


def test_a_malformed_test_only_switch_never_crashes_a_command(cli) -> None:
    got = cli("list", env={"GITLEASE_TESTING_BOOT_OFFSET_MS": "abc"})
    no_crash(got)
    assert got.code == 0, got


def test_the_commit_hook_says_when_test_only_switches_count(cli, repo: Path) -> None:
    """With the explicit test gate set, a boot offset makes an expired claim look live: every
    command warns that the switches count, so that they never change a decision silently;
    the commit check changes one (it lets the commit through), so it must warn too."""
    from conftest import TESTING

    assert cli("hooks", "install").code == 0
    assert cli("acquire", R, "--ttl", "1s").code == 0
    time.sleep(1.3)
    (repo / "change").write_text("x\n")
    git("add", "change", cwd=repo)
    env = {**os.environ, **TESTING, "GITLEASE_TESTING_BOOT_OFFSET_MS": "-100000"}
    committed = subprocess.run(
        ["git", "commit", "-qm", "x"], cwd=repo, capture_output=True, text=True, env=env
    )
    if committed.returncode == 0:
        assert "GITLEASE_TESTING is set" in committed.stderr, committed.stderr
