"""The CLI on a pseudo-terminal, as a person sees it: colours, tables, the live status line."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from conftest import store_path


def tty_run(args: list[str], cwd: Path, extra_env: dict[str, str]) -> str:
    """Run the CLI with stdout on a pseudo-terminal, as a person would see it."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", **extra_env}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", *args],
        cwd=cwd,
        env=env,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait()
    os.close(leader)
    return b"".join(chunks).decode()


def tty_run_while_waiting(args: list[str], repo: Path, lapse: dict[str, str]) -> str:
    """``tty_run`` of a waiting command: once it stands in the line of waiters, the claims
    it waits for lapse (``lapse``: resource -> receipt; their holders' last heartbeat, with a
    1 s TTL); what it printed."""
    import threading

    from conftest import run_cli, wait_for

    out: list[str] = []
    waiter = threading.Thread(target=lambda: out.append(tty_run(args, repo, {})), daemon=True)
    waiter.start()
    line = store_path(repo) / "worklease" / "waiters"
    wait_for(lambda: (line.is_dir() and any(n[0] != "." for n in os.listdir(line))) or out,
             what="the waiter to join the line")  # fmt: skip
    for resource, receipt in lapse.items():
        got = run_cli("heartbeat", resource, "--receipt", receipt, "--ttl", "1s", cwd=repo)
        assert got.code == 0, got
    waiter.join(timeout=90)
    assert out, "the waiter never ended"
    return out[0]
