"""A store for several users: two real users in one group take turns on one
``git init --bare --shared=group`` store, and every file gitlease makes there gets git's
shared modes (docs/reference/store.md; docs/reliability.md, "Truth, round three").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, Result, git, run_cli


def _two_users_reason() -> str | None:
    if os.geteuid() != 0:
        return "creating two real users (useradd) needs root"
    for tool in ("useradd", "groupadd", "userdel", "groupdel", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@pytest.fixture
def team(tmp_path: Path) -> Iterator[tuple[Path, list[tuple[str, Path]]]]:
    """Two real users in one group, each with a home of their own, and a shared store made
    as docs/reference/store.md says (``git init --bare --shared=group``), named for both."""
    why = _two_users_reason()
    if why:
        pytest.skip(why)
    tag = os.urandom(3).hex()
    group = f"glt{tag}"
    users = [f"gla{tag}", f"glb{tag}"]
    subprocess.run(["groupadd", group], check=True)
    made: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="gitlease-team-"))
    try:
        for user in users:
            subprocess.run(["useradd", "-M", "-N", "-g", group, "-s", "/bin/sh", user], check=True)
            made.append(user)
        root.chmod(0o755)
        store = root / "claims.git"
        git("init", "-q", "--bare", "--shared=group", str(store), cwd=root)
        subprocess.run(["chgrp", "-R", group, str(store)], check=True)
        homes = []
        for user in users:
            home = root / user
            home.mkdir()
            (home / ".gitconfig").write_text(f"[safe]\n\tdirectory = {store}\n")
            shutil.chown(home, user, group)
            shutil.chown(home / ".gitconfig", user, group)
            home.chmod(0o700)
            homes.append((user, home))
        python = _python_for(users[0], group)
        if python is None:
            pytest.skip(
                f"no Python {sys.version_info.major}.{sys.version_info.minor} that another user "
                f"can run with this checkout's packages ({sys.executable} is not reachable)"
            )
        yield store, [(user, home, python) for user, home in homes]
    finally:
        for user in made:
            subprocess.run(["userdel", user], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


_ROOT = ROOT  # the checkout
_SITE = [p for p in sys.path if p.endswith("site-packages")]


def _python_for(user: str, group: str) -> str | None:
    """An interpreter of this version that ``user`` can run, importing this checkout."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    spawn = (
        "import subprocess, sys; "
        "subprocess.run([sys.executable, '-c', 'import gitlease'], check=True)"
    )
    for candidate in dict.fromkeys([f"/usr/bin/{version}", shutil.which(version), sys.executable]):
        if not candidate:
            continue
        probe = subprocess.run(
            ["setpriv", f"--reuid={user}", f"--regid={group}", "--init-groups",
             "sh", "-c", 'exec "$@"', "sh", candidate, "-c",
             f"import gitlease, pygit2, click, cryptography; {spawn}"],
            capture_output=True, env={"PYTHONPATH": _pythonpath(), "PATH": os.environ["PATH"]},
        )  # fmt: skip
        if probe.returncode == 0:
            return candidate
    return None


def _pythonpath() -> str:
    return os.pathsep.join([str(_ROOT), *_SITE])


def _env_for(user: str, home: Path, store: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"], "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), "GITLEASE_STORE": str(store),
        "GITLEASE_OWNER": user, "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": _pythonpath(),
    }  # fmt: skip
    return env


def _as(user: str, home: Path, store: Path, python: str, *args: str) -> Result:
    """The real CLI run as ``user`` (its own uid, its group, umask 022), outside any repo."""
    env = _env_for(user, home, store)
    proc = subprocess.run(
        ["setpriv", f"--reuid={user}", f"--regid={user_group(user)}", "--init-groups",
         "sh", "-c", 'umask 022; exec "$@"', "sh", python, "-m", "gitlease", *args],
        cwd=home, text=True, capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    return Result(proc)


def _start_as(user: str, home: Path, store: Path, python: str, *args: str):
    """Like :func:`_as`, started in the background."""
    env = _env_for(user, home, store)
    return subprocess.Popen(
        ["setpriv", f"--reuid={user}", f"--regid={user_group(user)}", "--init-groups",
         "sh", "-c", 'umask 022; exec "$@"', "sh", python, "-m", "gitlease", *args],
        cwd=home, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip


def _until(event, proc, limit_s: float = 60) -> None:
    """Wait for ``event()`` (a file, a state), failing if ``proc`` ends first or it never comes."""
    deadline = time.monotonic() + limit_s
    while not event():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the event never came"
        time.sleep(0.05)


def user_group(user: str) -> str:
    import grp
    import pwd

    return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name


def test_two_users_take_turns_on_one_shared_store(team) -> None:
    """Each user acquires, waits, keeps alive, releases, verifies and prunes in turn on one
    ``--shared=group`` store: neither is ever locked out (exit 7) by the other's files."""
    store, ((a, home_a, py), (b, home_b, _)) = team
    for rnd in range(2):
        for (me, mine), (other, theirs) in (((a, home_a), (b, home_b)), ((b, home_b), (a, home_a))):
            unit = f"unit/{rnd}/{me}"
            took = _as(me, mine, store, py, "acquire", unit, "--ttl", "1m", "--json")
            assert took.code == 0, (me, took)
            refused = _as(other, theirs, store, py, "acquire", unit, "--json")
            assert refused.code == 3, (other, refused)
            assert _as(me, mine, store, py, "heartbeat", unit).code == 0
            waiter = _start_as(other, theirs, store, py, "acquire", unit, "--wait", "2m")
            try:
                _until(lambda: any((store / "worklease" / "waiters").glob("*")), waiter)
                assert _as(me, mine, store, py, "release", unit).code == 0, me
                out, err = waiter.communicate(timeout=120)
            finally:
                waiter.kill()
            assert waiter.returncode == 0, (other, out, err)
            kept = _as(other, theirs, store, py, "acquire", f"kept/{rnd}/{other}", "--ttl", "30s",
                       "--keepalive", "--json")  # fmt: skip
            assert kept.code == 0, (other, kept)
            assert _as(other, theirs, store, py, "release", f"kept/{rnd}/{other}").code == 0
            both = _as(me, mine, store, py, "bundle", "acquire", f"b/{rnd}/{me}/1",
                       f"b/{rnd}/{me}/2", "--ttl", "1m", "--json")  # fmt: skip
            assert both.code == 0, (me, both)
            assert _as(me, mine, store, py, "bundle", "release",
                       both.json["bundle_id"]).code == 0  # fmt: skip
            assert _as(other, theirs, store, py, "release", unit).code == 0
            for who, where in ((me, mine), (other, theirs)):
                checked = _as(who, where, store, py, "verify")
                # (a spent receipt reads as PROBLEM orphan-receipt, issue 29.16, not this one)
                problems = [ln for ln in checked.out.splitlines() if "PROBLEM" in ln]
                assert all("orphan-receipt" in ln for ln in problems), (who, checked)
                assert checked.code in (0, 7) and "ermission" not in checked.err, (who, checked)
                pruned = _as(who, where, store, py, "prune")
                assert pruned.code == 0, (who, pruned)


@pytest.mark.parametrize(
    ("shared", "file_bits", "dir_bits"),
    [("group", 0o060, 0o2070), ("all", 0o064, 0o2075), ("0640", 0o040, 0o2050), ("umask", 0, 0)],
)
def test_files_in_a_shared_store_get_gits_shared_modes(
    tmp_path: Path, shared: str, file_bits: int, dir_bits: int
) -> None:
    """Every file and folder gitlease makes under ``worklease/`` in a ``--shared=X`` store
    gets the bits git gives its own (files: X's group and world bits; folders: searchable
    where readable, set-gid); an octal X is the exact mode; with ``umask`` they stay as
    before (no group write). A user's verified-records cache stays theirs alone (0600): the
    reads trust it only if nobody else can write it."""
    store = tmp_path / "claims.git"
    git("init", "-q", "--bare", f"--shared={shared}", str(store), cwd=tmp_path)
    env = {"GITLEASE_STORE": str(store)}
    for args in (("acquire", "m/1", "--ttl", "1m"), ("release", "m/1"), ("prune",)):
        got = run_cli(*args, cwd=tmp_path, env=env)
        assert got.code == 0, (args, got)
    made = [store / "worklease", *(store / "worklease").rglob("*"), *(store / "logs").rglob("*")]
    assert len(made) > 3, made
    for path in made:
        mode = path.stat().st_mode & 0o7777
        if path.name.startswith("verified-"):  # (one user's cache: theirs alone, 0600)
            assert mode == 0o600, (path, oct(mode))
            continue
        bits = dir_bits if path.is_dir() else file_bits
        if bits:
            assert mode & bits == bits, (path, oct(mode))
            if shared == "0640" and not path.is_dir():
                assert mode == 0o640, (path, oct(mode))
        else:
            assert not mode & 0o020, (path, oct(mode))
