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


def _forge(store: Path, took: dict[str, str], pid: int) -> None:
    """A registry entry naming ``pid`` (its true start time) as the keeper of ``took``."""
    import json

    entry = {
        "pid": pid, "start": _stat_start(pid),
        "boot": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
        "claims": [[took["resource"], took["ref"], took["claim_id"]]], "bundle_id": None,
        "watched_pid": os.getpid(), "watched_start": _stat_start(os.getpid()),
        "watched_name": "pytest", "started_at": took["acquired_at"],
        "until": took["expires_at"], "log": "/dev/null",
    }  # fmt: skip
    (store / "worklease").mkdir(exist_ok=True)
    (store / "worklease" / "keepalive.json").write_text(json.dumps({"keepers": [entry]}))


def test_a_forged_keepalive_entry_never_makes_release_signal_another_process(repo: Path) -> None:
    """Anyone who can write the store can edit ``worklease/keepalive.json``: an entry naming
    an unrelated process of ours (its true pid and start time, the claim being released)
    must not make ``release`` SIGTERM it. A real keepalive is still stopped."""
    took = run_cli("acquire", "k/1", "--ttl", "1m", "--json", cwd=repo)
    assert took.code == 0, took
    store = Path(run_cli("where", "--json", cwd=repo).json["store"])
    victim = subprocess.Popen(["sleep", "600"])
    try:
        _forge(store, took.json, victim.pid)
        assert run_cli("release", "k/1", cwd=repo).code == 0
        assert victim.poll() is None, "release signalled a process that is no keepalive"
    finally:
        victim.kill()
        victim.wait()


def test_a_forged_keepalive_entry_never_stops_a_claim_being_kept(repo: Path) -> None:
    """An entry naming any live process (pid 1) as the claim's keeper made ``keepalive``
    answer HELD ("already kept alive by the keepalive process 1") and ``acquire
    --keepalive`` release the new claim again: anyone who can write the store could stop
    every claim from being kept. Only a process that is provably this user's keeper counts."""
    took = run_cli("acquire", "k/2", "--ttl", "1m", "--json", cwd=repo)
    assert took.code == 0, took
    store = Path(run_cli("where", "--json", cwd=repo).json["store"])
    _forge(store, took.json, 1)
    watched = subprocess.Popen(["sleep", "600"])
    try:
        kept = run_cli("keepalive", "k/2", "--while-pid", str(watched.pid), cwd=repo)
        assert kept.code == 0, kept
    finally:
        watched.kill()
        watched.wait()
    assert run_cli("release", "k/2", cwd=repo).code == 0


def test_a_link_planted_at_the_keepers_pidfile_is_never_followed(repo: Path, tmp_path) -> None:
    """The keeper opened its pidfile following links and overwrote what a link there named
    (with its pid): whoever controls a parent of the keeper's folder could make a keeper
    truncate any file of the user's. A link there is refused; the file it names is kept."""
    import shutil
    import tempfile

    from conftest import wait_for

    run = Path(tempfile.mkdtemp(prefix="gl-run-", dir="/tmp"))  # (a socket's path is short)
    env = {"XDG_RUNTIME_DIR": str(run)}
    watched = subprocess.Popen(["sleep", "600"])
    try:
        assert run_cli("acquire", "k/3", "--ttl", "1m", cwd=repo, env=env).code == 0
        kept = run_cli("keepalive", "k/3", "--while-pid", str(watched.pid), cwd=repo, env=env)
        assert kept.code == 0, kept
        (pidfile,) = (run / "gitlease").glob("keeper-*.pid")
        keeper = int(pidfile.read_text())
        assert run_cli("release", "k/3", cwd=repo, env=env).code == 0  # (the keeper ends)
        wait_for(lambda: not Path(f"/proc/{keeper}").exists(), what="the keeper to end")
        victim = tmp_path / "precious"
        victim.write_text("precious data\n")
        pidfile.unlink()
        pidfile.symlink_to(victim)
        assert run_cli("acquire", "k/4", "--ttl", "1m", cwd=repo, env=env).code == 0
        again = run_cli("keepalive", "k/4", "--while-pid", str(watched.pid), cwd=repo, env=env)
        assert "Traceback" not in again.err, again
        assert victim.read_text() == "precious data\n", "the keeper wrote through the link"
    finally:
        watched.kill()
        watched.wait()
        shutil.rmtree(run, ignore_errors=True)


def test_a_runtime_folder_others_can_write_is_passed_over(repo: Path, tmp_path) -> None:
    """``$XDG_RUNTIME_DIR`` was taken when it was this user's, even open to others: another
    user could rename its ``gitlease/`` folder and put one of theirs in its place. The
    keeper's files then go to the private state folder instead."""
    import shutil
    import tempfile

    run = Path(tempfile.mkdtemp(prefix="gl-run-", dir="/tmp"))
    run.chmod(0o777)
    state = Path(tempfile.mkdtemp(prefix="gl-state-", dir="/tmp"))
    env = {"XDG_RUNTIME_DIR": str(run), "XDG_STATE_HOME": str(state)}
    watched = subprocess.Popen(["sleep", "600"])
    try:
        assert run_cli("acquire", "k/5", "--ttl", "1m", cwd=repo, env=env).code == 0
        kept = run_cli("keepalive", "k/5", "--while-pid", str(watched.pid), cwd=repo, env=env)
        assert kept.code == 0, kept
        assert not (run / "gitlease").exists(), "the keeper used a folder others can write"
        assert list((state / "gitlease" / "run").glob("keeper-*.sock"))
        assert run_cli("release", "k/5", cwd=repo, env=env).code == 0
    finally:
        watched.kill()
        watched.wait()
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
