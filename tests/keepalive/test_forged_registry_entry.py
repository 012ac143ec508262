"""``release`` signals only keepalives: a forged ``worklease/keepalive.json`` entry naming an
unrelated process of ours never makes it send SIGTERM there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import run_cli


def _stat_start(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw.rpartition(b")")[2].split()[19])


def test_a_forged_keepalive_entry_never_makes_release_signal_another_process(repo: Path) -> None:
    """Anyone who can write the store can edit ``worklease/keepalive.json``: an entry naming
    an unrelated process of ours (its true pid and start time, the claim being released)
    must not make ``release`` SIGTERM it. A real keepalive is still stopped."""
    import json

    took = run_cli("acquire", "k/1", "--ttl", "1m", "--json", cwd=repo)
    assert took.code == 0, took
    store = Path(run_cli("where", "--json", cwd=repo).json["store"])
    victim = subprocess.Popen(["sleep", "600"])
    try:
        entry = {
            "pid": victim.pid, "start": _stat_start(victim.pid),
            "boot": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
            "claims": [["k/1", took.json["ref"], took.json["claim_id"]]], "bundle_id": None,
            "watched_pid": os.getpid(), "watched_start": _stat_start(os.getpid()),
            "watched_name": "pytest", "started_at": took.json["acquired_at"],
            "until": took.json["expires_at"], "log": "/dev/null",
        }  # fmt: skip
        (store / "worklease").mkdir(exist_ok=True)
        (store / "worklease" / "keepalive.json").write_text(json.dumps({"keepers": [entry]}))
        assert run_cli("release", "k/1", cwd=repo).code == 0
        assert victim.poll() is None, "release signalled a process that is no keepalive"
    finally:
        victim.kill()
        victim.wait()
