"""A record written on another boot clock: inside a time namespace (``unshare --time``), on a VM
clone sharing the boot id with a clock a week ahead, and across hosts through a remote.
Each is judged on the reader's own clock, by sightings where the writer's clock cannot be
trusted: no double grant, no wedge (issue 34.1; docs/reliability.md, "Truth, round three").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TESTING, Result, run_cli, store_git

R = "shop/issue-1"


def _unshare_time_works() -> str | None:
    """Why ``unshare --time --boottime`` cannot run here, or None when it can."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    try:
        probe = subprocess.run(
            ["unshare", "--time", "--boottime", "3600", "cat", "/proc/uptime"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare --time failed: {exc}"
    if probe.returncode != 0:
        return f"unshare --time is not permitted here: {probe.stderr.strip()}"
    outside = float(Path("/proc/uptime").read_text().split()[0])
    if float(probe.stdout.split()[0]) - outside < 3000:
        return "unshare --time ran, but its boot clock is not offset"
    return None


_NO_TIME_NAMESPACE = _unshare_time_works()
NEEDS_TIME_NAMESPACE = pytest.mark.skipif(
    _NO_TIME_NAMESPACE is not None, reason=str(_NO_TIME_NAMESPACE)
)


def _inside(*args: str, cwd: Path, offset: str = "3600") -> Result:
    """The real CLI in a new time namespace whose boot clock runs ``offset`` seconds ahead."""
    proc = subprocess.run(
        ["unshare", "--time", "--boottime", offset, sys.executable, "-m", "gitlease", *args],
        cwd=cwd, text=True, capture_output=True, env=dict(os.environ), timeout=60,
    )  # fmt: skip
    return Result(proc)


def _until_granted(resource: str, cwd: Path, limit_s: float, run=run_cli) -> tuple[Result, int]:
    """Acquire ``resource`` until granted (event: exit 0), at most ``limit_s`` seconds; the
    answer and how many HELD answers came before."""
    deadline = time.monotonic() + limit_s
    held = 0
    while True:
        got = run("acquire", resource, "--ttl", "1m", "--json", cwd=cwd)
        if got.code != 3 or time.monotonic() > deadline:
            return got, held
        held += 1
        time.sleep(0.2)


@NEEDS_TIME_NAMESPACE
def test_a_live_claim_taken_outside_a_time_namespace_is_held_inside(repo: Path) -> None:
    """Outside takes a 10-minute claim; inside, the boot clock is an hour ahead, so on its
    clock that claim expired 50 minutes ago: it must still be held (no double grant)."""
    outside = run_cli("acquire", "live/1", "--ttl", "10m", "--json", cwd=repo)
    assert outside.code == 0, outside
    inside = _inside("acquire", "live/1", "--json", cwd=repo)
    assert inside.code == 3, inside
    assert inside.json["error"]["claim"]["claim_id"] == outside.json["claim_id"]
    shown = _inside("show", "live/1", "--json", cwd=repo)
    assert shown.json["state"] == "active", shown


@NEEDS_TIME_NAMESPACE
def test_a_live_claim_taken_inside_a_time_namespace_is_held_outside(repo: Path) -> None:
    """Inside takes a 10-minute claim (the other way round): held outside too."""
    inside = _inside("acquire", "live/2", "--ttl", "10m", "--json", cwd=repo)
    assert inside.code == 0, inside
    outside = run_cli("acquire", "live/2", "--json", cwd=repo)
    assert outside.code == 3, outside
    for offset in ("3600", "7200", "5400"):  # another namespace, maybe the same inode
        again = _inside("acquire", "live/2", "--json", cwd=repo, offset=offset)
        assert again.code == 3, (offset, again)


@NEEDS_TIME_NAMESPACE
def test_an_abandoned_claim_of_a_time_namespace_is_not_a_wedge(
    worktrees: tuple[Path, Path],
) -> None:
    """A 1 s claim taken inside (worktree a), abandoned: outside (worktree b), on a clock an
    hour behind, it read as held for the whole hour. Now outside reads it on its own clock:
    taken over within seconds, never after the namespace's offset; the holder inside then
    knows it lost it."""
    a, b = worktrees
    inside = _inside("acquire", "dead/1", "--ttl", "1s", "--json", cwd=a)
    assert inside.code == 0, inside
    taken, _ = _until_granted("dead/1", b, limit_s=120)
    assert taken.code == 0, taken
    assert _inside("heartbeat", "dead/1", cwd=a).code == 4


@NEEDS_TIME_NAMESPACE
def test_a_claim_of_a_time_namespace_reads_its_own_ttl_outside(
    worktrees: tuple[Path, Path],
) -> None:
    """A 10-minute claim taken inside shows about 10 minutes left outside and in another
    namespace (not 70, not expired): its expiry is read on each reader's clock."""
    a, b = worktrees
    assert _inside("acquire", "kept/1", "--ttl", "10m", cwd=a).code == 0
    for shown in (
        run_cli("show", "kept/1", "--json", cwd=b),
        _inside("show", "kept/1", "--json", cwd=b, offset="1800"),
    ):
        assert shown.json["state"] == "active", shown
        assert 60 < shown.json["expires_in"] <= 600, shown
    assert _inside("heartbeat", "kept/1", "--ttl", "10m", cwd=a).code == 0


def test_records_of_the_initial_time_namespace_keep_the_plain_boot_id(repo: Path) -> None:
    """Old readers compare the boot id byte for byte: outside any time namespace it is
    the kernel's boot id, exactly."""
    assert run_cli("acquire", "plain/1", "--ttl", "1m", cwd=repo).code == 0
    raw = store_git("for-each-ref", "--format=%(raw)", "refs/worklease/", cwd=repo).stdout
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert f"\nboot-id {boot}\n" in raw


VM_CLONE = {**TESTING, "GITLEASE_TESTING_BOOT_OFFSET_MS": str(7 * 86_400_000)}


def test_a_vm_clone_sharing_the_boot_id_with_a_clock_a_week_ahead(repo: Path) -> None:
    """VM clones restored from one memory snapshot share a boot id, not a boot clock: a
    clone whose boot clock is 7 days ahead (the test switch plays it, same boot id) must
    not be granted a live 10-minute claim, nor hold an abandoned 1 s claim for 7 days."""
    live = run_cli("acquire", "vm/live", "--ttl", "10m", "--json", cwd=repo)
    assert live.code == 0, live
    ahead = run_cli("acquire", "vm/live", "--json", cwd=repo, env=VM_CLONE)
    assert ahead.code == 3, ahead
    dead = run_cli("acquire", "vm/dead", "--ttl", "1s", "--json", cwd=repo, env=VM_CLONE)
    assert dead.code == 0, dead
    taken, _ = _until_granted("vm/dead", repo, limit_s=120)
    assert taken.code == 0, taken


def test_hosts_sharing_a_boot_id_through_a_remote_judge_each_other_by_sightings(
    tmp_path: Path,
) -> None:
    """Issue 34.1 across hosts: two hosts coordinating through one remote share a boot id
    (VM clones), host B's boot clock 7 days ahead. B must not be granted A's live claim, and
    A takes over B's abandoned 1 s claim within seconds, not 7 days."""
    from hosts import make_host, make_server

    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    b_env = {**VM_CLONE, "XDG_STATE_HOME": str(tmp_path / "host-b-state")}
    live = run_cli("acquire", "r/live", "--ttl", "10m", "--json", cwd=a)
    assert live.code == 0, live
    on_b = run_cli("acquire", "r/live", "--json", cwd=b, env=b_env)
    assert on_b.code == 3, on_b
    dead = run_cli("acquire", "r/dead", "--ttl", "1s", "--json", cwd=b, env=b_env)
    assert dead.code == 0, dead
    taken, _ = _until_granted("r/dead", a, limit_s=120)
    assert taken.code == 0, taken
