"""``acquire --wait`` retries until the holder lets go, then answers at once; a shorter wait
answers HELD.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import git, store_path

R = "github/acme/api/42"


def test_wait_retries_until_the_holder_lets_go(cli, repo: Path) -> None:
    import json

    from conftest import wait_for

    assert cli("acquire", R, "--ttl", "5m").code == 0  # held until the waiter waits
    other = repo.parent / "other"
    git("worktree", "add", "-q", "-b", "other", str(other), cwd=repo)
    waiter = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "acquire", R, "--wait", "60s", "--json"],
        cwd=other, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = store_path(repo) / "worklease" / "waiters"
        wait_for(lambda: line.is_dir() and any(n[0] != "." for n in os.listdir(line)),
                 what="the waiter to join the line")  # fmt: skip
        assert waiter.poll() is None, "it waits while the claim is held"
        assert cli("heartbeat", R, "--ttl", "1s").code == 0  # the holder's last: it lapses
        out, _ = waiter.communicate(timeout=90)
    finally:
        waiter.kill()
    assert waiter.returncode == 0 and json.loads(out)["revision"] == 2, out
    short = cli("acquire", R, "--wait", "1s", "--json")
    assert short.code == 3
