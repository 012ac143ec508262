"""Truth, round three (part a): one store under every spelling, any clock, one user or many.

Each test here failed before its fix; the rows are in docs/reliability.md
("Truth, round three"). Real clones, real processes, real users where a test needs them.
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
from conftest import TESTING, Result, git, make_repo, run_cli, store_git

R = "shop/issue-1"


def _clone(source: str, path: Path) -> Path:
    git("clone", "-q", source, str(path), cwd=path.parent)
    return path


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "seed")


def _bare(seed: Path, path: Path) -> Path:
    git("init", "-q", "--bare", str(path), cwd=path.parent)
    git("push", "-q", str(path), "main", cwd=seed)
    return path


@pytest.mark.parametrize(
    ("layout", "spellings"),
    [
        ("bare", ["srv/shop.git", "srv/shop", "file://{tmp}/srv/shop", "srv/shop.git/"]),
        ("worktree", ["srv/shop", "srv/shop/.git", "srv/shop/", "file://{tmp}/srv/shop/.git"]),
        ("bare-in-dotgit", ["srv/shop.git/.git", "srv/shop", "srv/shop.git"]),
        ("gitfile", ["srv/shop", "srv/shop/.git", "file://{tmp}/srv/shop"]),
    ],
)
def test_clones_by_every_spelling_git_accepts_share_one_store(
    seed: Path, tmp_path: Path, layout: str, spellings: list[str]
) -> None:
    """``git clone /srv/shop`` finds ``shop/.git``, ``shop``, ``shop.git/.git``, ``shop.git``
    (and a ``.git`` file naming the git dir): every spelling is one project, one store."""
    srv = tmp_path / "srv"
    srv.mkdir()
    if layout == "bare":
        _bare(seed, srv / "shop.git")
    elif layout == "worktree":
        git("clone", "-q", str(seed), str(srv / "shop"), cwd=tmp_path)
    elif layout == "bare-in-dotgit":
        (srv / "shop.git").mkdir()
        _bare(seed, srv / "shop.git" / ".git")
    else:  # a worktree whose .git is a file naming its git dir elsewhere
        git("clone", "-q", "--separate-git-dir", str(tmp_path / "elsewhere.git"), str(seed),
            str(srv / "shop"), cwd=tmp_path)  # fmt: skip
        assert (srv / "shop" / ".git").is_file()
    clones = []
    for n, spelling in enumerate(spellings):
        source = spelling.format(tmp=tmp_path)
        source = source if "://" in source else str(tmp_path / source)
        clones.append(_clone(source, tmp_path / f"c{n}"))
    held = run_cli("acquire", R, "--ttl", "5m", "--json", cwd=clones[0])
    assert held.code == 0, held
    stores = {run_cli("where", "--json", cwd=c).json["store"] for c in clones}
    assert len(stores) == 1, stores
    for other in clones[1:]:
        second = run_cli("acquire", R, "--json", cwd=other)
        assert second.code == 3, (other, second)


# --------------------------------------------------------------- 2. a foreign boot clock


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


# --------------------------------------------------------------- 3. a store for several users


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


_ROOT = Path(__file__).resolve().parent.parent
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
    before (no group write)."""
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
        bits = dir_bits if path.is_dir() else file_bits
        if bits:
            assert mode & bits == bits, (path, oct(mode))
            if shared == "0640" and not path.is_dir():
                assert mode == 0o640, (path, oct(mode))
        else:
            assert not mode & 0o020, (path, oct(mode))


# --------------------------------------------------------------- 6. GIT_DEFAULT_HASH=sha256


def test_a_store_made_under_git_default_hash_sha256_still_takes_writes(repo: Path) -> None:
    """The first call's environment says GIT_DEFAULT_HASH=sha256: the store is made sha1
    anyway (libgit2 reads no sha256), so that call and every later write work."""
    sha = {"GIT_DEFAULT_HASH": "sha256"}
    first = run_cli("acquire", "h/1", "--ttl", "1m", "--json", cwd=repo, env=sha)
    assert first.code == 0, first
    store = Path(run_cli("where", "--json", cwd=repo).json["store"])
    fmt = git("--git-dir", str(store), "rev-parse", "--show-object-format", cwd=repo)
    assert fmt.stdout.strip() == "sha1"
    for args in (("acquire", "h/2", "--ttl", "1m"), ("release", "h/1"), ("release", "h/2")):
        got = run_cli(*args, cwd=repo, env=sha)
        assert got.code == 0, (args, got)


# --------------------------------------------------------------- 8. the hooks' own Python

_IMPOSTOR = "import sys\nsys.exit(0)\n"


def _plant_impostor(folder: Path) -> None:
    """A ``gitlease`` package whose commit check and fence let everything through."""
    pkg = folder / "gitlease"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "hookcheck.py").write_text(_IMPOSTOR)
    (pkg / "fence.py").write_text(_IMPOSTOR)


def _lapse(resource: str, cwd: Path) -> None:
    """A claim bound here that lapses: taken for 1 s, then seen expired (a state, polled)."""
    assert run_cli("acquire", resource, "--ttl", "1s", cwd=cwd).code == 0
    deadline = time.monotonic() + 60
    while run_cli("show", resource, "--json", cwd=cwd).json["state"] != "expired":
        assert time.monotonic() < deadline
        time.sleep(0.2)


def _commit(repo: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[bool, str]:
    path = repo / "change.txt"
    path.write_text(f"{time.time_ns()}\n")
    git("add", "change.txt", cwd=repo)
    done = subprocess.run(
        ["git", "commit", "-qm", "edit", *extra], cwd=repo, text=True, capture_output=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    if done.returncode != 0:
        git("reset", "-q", cwd=repo)
    return done.returncode == 0, done.stderr


@pytest.mark.parametrize("trailers", [False, True])
def test_a_gitlease_package_in_the_checkout_or_pythonpath_cannot_replace_the_check(
    repo: Path, tmp_path: Path, trailers: bool
) -> None:
    """The hooks run ``python -m gitlease.hookcheck`` (or ``gitlease.fence``, with trailers)
    in the worktree's top: a ``gitlease/`` package there, or on PYTHONPATH, was imported
    instead of the installed one, and a lapsed claim's commit went through."""
    assert run_cli("hooks", "install", cwd=repo).code == 0
    if trailers:
        git("config", "gitlease.trailers", "true", cwd=repo)
    _plant_impostor(repo)
    elsewhere = tmp_path / "elsewhere"
    _plant_impostor(elsewhere)
    _lapse("e/1", repo)
    for env in (None, {"PYTHONPATH": str(elsewhere)}, {"PYTHONSAFEPATH": ""}):
        for extra in ((), ("--no-verify",)):
            ok, err = _commit(repo, *extra, env=env)
            assert not ok and "commit refused" in err, (env, extra, err)


def test_hooks_installed_by_0_2_0_keep_working(repo: Path) -> None:
    """A repository whose hooks 0.2.0 installed (the text kept in tests/support), used
    with this version: a live claim commits, a lapsed one is refused; `hooks status` calls
    them outdated, and `hooks install` brings the current text."""
    assert run_cli("hooks", "install", cwd=repo).code == 0
    old = (Path(__file__).parent / "support" / "gitlease-hook-0.2.0").read_text()
    old = old.replace("gitlease_python='python3'", f"gitlease_python={sys.executable}")
    hooks = [h for h in (repo / ".git" / "hooks").iterdir() if "gitlease-managed" in h.read_text()]
    assert hooks
    for hook in hooks:
        hook.write_text(old)
    assert run_cli("acquire", "old/1", "--ttl", "5m", cwd=repo).code == 0
    assert _commit(repo)[0]
    assert run_cli("release", "old/1", cwd=repo).code == 0
    _lapse("old/2", repo)
    ok, err = _commit(repo)
    assert not ok and "commit refused" in err, err
    status = run_cli("hooks", "status", cwd=repo)
    assert "outdated" in status.out + status.err, status
    assert run_cli("hooks", "install", cwd=repo).code == 0
    assert all(" -E -P -m gitlease." in h.read_text() for h in hooks)


# ------------------------------------------------- 9. keepers.stop signals only keepalives


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


# --------------------------------------------------------------- 34.6: a URL's port


def test_two_servers_on_one_host_by_port_are_two_projects(tmp_path: Path) -> None:
    """``http://10.211.0.1:5000/claims`` and ``:6000/claims`` are two repositories on two
    servers: two projects, two stores; the scheme's default port is no port at all."""
    from gitlease.store.projects import normalize_url

    assert normalize_url("http://10.211.0.1:5000/claims") != normalize_url(
        "http://10.211.0.1:6000/claims"
    )
    assert normalize_url("ssh://git@github.com:22/acme/shop") == normalize_url(
        "git@github.com:acme/shop"
    ) == normalize_url("https://github.com/Acme/Shop.git") == normalize_url(
        "https://github.com:443/acme/shop"
    )  # fmt: skip
    assert normalize_url("http://h:80/x") == normalize_url("http://h/x")
    assert normalize_url("git://h:9418/x") == normalize_url("git://h/x")
    clones = []
    for port in (5000, 6000):
        c = make_repo(tmp_path / f"c{port}")
        git("remote", "add", "origin", f"http://10.211.0.1:{port}/claims", cwd=c)
        clones.append(c)
    wheres = [run_cli("where", "--json", cwd=c).json for c in clones]
    assert wheres[0]["store"] != wheres[1]["store"], wheres
    assert wheres[0]["project"] == "10.211.0.1:5000/claims"
    assert run_cli("acquire", "p/1", "--ttl", "1m", cwd=clones[0]).code == 0
    assert run_cli("acquire", "p/1", "--ttl", "1m", cwd=clones[1]).code == 0


# --------------------------------------------------------------- 21. open_store(project path)


def test_open_store_refuses_a_project_path_given_as_the_store(repo: Path, tmp_path: Path) -> None:
    """``gitlease.open_store(path)`` with a working repository's path used that repository
    as the store, splitting from the CLI's shared store (a double grant). It is USAGE now,
    naming the fix; ``cwd=path``, the shared store itself, and ``gitlease.store .`` work."""
    import gitlease
    from gitlease.errors import UsageError

    took = run_cli("acquire", "s/1", "--ttl", "5m", "--json", cwd=repo)
    assert took.code == 0, took
    for given in (repo, str(repo), repo / ".git"):
        with pytest.raises(UsageError) as refused:
            gitlease.open_store(given)
        assert "cwd=" in str(refused.value) and "working repository" in str(refused.value)
        assert refused.value.exit_code == 2
    via_cli = run_cli("--store", str(repo), "acquire", "s/1", "--json", cwd=tmp_path)
    assert via_cli.code == 2, via_cli
    store = gitlease.open_store(cwd=repo)
    assert gitlease.show(store, "s/1").record.claim_id == took.json["claim_id"]
    shared = gitlease.open_store(store.location.git_dir)
    assert gitlease.show(shared, "s/1").record.claim_id == took.json["claim_id"]
    own = make_repo(tmp_path / "own")
    git("config", "gitlease.store", ".", cwd=own)
    assert gitlease.open_store(own).location.git_dir == (own / ".git").resolve()


# --------------------------------------------------------------- 10. who chooses the coordinator


def test_one_clones_config_never_pins_the_coordinator_of_every_clone(
    seed: Path, tmp_path: Path
) -> None:
    """A copy with the same origin and ``gitlease.remote=<elsewhere>`` ran ``list`` once, and
    every other clone then pushed its claims there. Now that copy is refused (7) until the
    coordinator is recorded deliberately (``gitlease remote set``); ``where`` and ``remote
    show`` then say who recorded it and when, and every clone uses it."""
    shop = _bare(seed, tmp_path / "shop.git")
    a, b = _clone(str(shop), tmp_path / "a"), _clone(str(shop), tmp_path / "b")
    rogue = _clone(str(shop), tmp_path / "rogue")
    elsewhere = tmp_path / "elsewhere.git"
    git("init", "-q", "--bare", str(elsewhere), cwd=tmp_path)
    git("remote", "add", "elsewhere", str(elsewhere), cwd=rogue)
    git("config", "gitlease.remote", "elsewhere", cwd=rogue)
    listed = run_cli("list", "--json", cwd=rogue)
    assert listed.code == 7 and "gitlease remote set" in listed.json["error"]["message"], listed
    assert run_cli("where", "--json", cwd=a).json["remote"] is None
    assert run_cli("acquire", "g/1", "--ttl", "1m", cwd=a).code == 0
    assert git("--git-dir", str(elsewhere), "for-each-ref", cwd=tmp_path).stdout == ""
    shown = run_cli("remote", "show", "--json", cwd=b)
    assert shown.code == 0 and shown.json["recorded"] is None, shown
    assert run_cli("release", "g/1", cwd=a).code == 0

    made = run_cli("remote", "set", "elsewhere", "--json", cwd=rogue)
    assert made.code == 0, made
    doc = run_cli("where", "--json", cwd=b).json
    assert doc["remote_url"] == str(elsewhere), doc
    rec = doc["remote_recorded"]
    assert "gitlease remote set" in rec["by"] and str(rogue) in rec["by"] and rec["at"], rec
    assert rec["by"] in doc["remote_reason"] and rec["at"] in doc["remote_reason"]
    text = run_cli("remote", "show", cwd=b)
    assert rec["by"] in text.out and rec["at"] in text.out, text
    assert run_cli("acquire", "g/2", "--ttl", "1m", cwd=b).code == 0
    assert "g/2" in git("--git-dir", str(elsewhere), "for-each-ref", cwd=tmp_path).stdout
    again = run_cli("remote", "set", str(shop), "--json", cwd=a)
    assert again.code == 7 and "--replace" in again.json["error"]["message"], again


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
