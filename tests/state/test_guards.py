"""A resource's guard: ``free`` does not offer a resource whose guard a stalled ``exec`` holds
past its TTL, and offers it again as soon as the guard is free.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from observe import state

R = "edge/1"


def test_free_does_not_offer_a_resource_whose_guard_is_held(cli, repo: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "exec", R, "--ttl", "8s", "--", "sleep", "60"],
        cwd=repo,
        start_new_session=True,
    )
    try:
        from conftest import wait_for

        wait_for(lambda: state(cli, R) == "active", what="exec to take the claim")
        os.kill(proc.pid, signal.SIGSTOP)  # exec keeps its guard, and its TTL runs out
        wait_for(lambda: state(cli, R) == "expired", what="the TTL to run out")
        assert cli("acquire", R, "--no-bind").code == 3, "the guard is held"
        assert cli("free", R).out.strip() == "", "so free must not offer it"
        assert cli("free", R, "edge/2").out.split() == ["edge/2"], "and offers the others"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert cli("free", R).out.split() == [R], "the guard is free again at once"
