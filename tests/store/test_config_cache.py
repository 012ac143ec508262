"""The store's location without a ``git config`` process: its one read cached by every file
it depends on (gitlease/store/gitconfig.py, docs/design.md), and never stale.

Every test counts the real ``git config`` processes through a ``git`` on PATH that logs its
arguments and runs the real one, waits (on an event: the cache entry appearing) until the
configuration is old enough to be cached, and then changes what git would read: the next
command must see the change.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import git, run_cli, wait_for
from gitcalls import edit_once_git_has_read

from gitlease.store import gitconfig


@pytest.fixture
def counted(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``git`` logs each call to ``calls.log`` and runs the real git."""
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return env, log


def _where(repo: Path, env: dict[str, str]) -> str:
    got = run_cli("where", "--json", cwd=repo, env=env)
    assert got.code == 0, got
    return str(got.json["store"])


def _config_calls(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if " config " in f" {line} ")


def _cached(repo: Path, env: dict[str, str], log: Path) -> str:
    """``where`` run until it answers from the cache (the files it read are then old enough:
    two seconds); that answer."""

    def answered_from_cache() -> str | None:
        before = _config_calls(log)
        store = _where(repo, env)
        return store if _config_calls(log) == before else None

    return wait_for(answered_from_cache, what="an answer from the configuration cache")


def test_an_edit_of_the_config_is_seen_by_the_next_command(repo, counted) -> None:
    env, log = counted
    default = _cached(repo, env, log)
    before = _config_calls(log)
    assert _where(repo, env) == default
    assert _config_calls(log) == before  # no git config process on the common path
    other = repo.parent / "elsewhere.git"
    git("init", "-q", "--bare", str(other), cwd=repo.parent)
    git("config", "gitlease.store", str(other), cwd=repo)  # (lock file, rename: a new inode)
    assert _where(repo, env) == str(other)
    # an edit in place, keeping the inode: its times change
    config = repo / ".git" / "config"
    text = config.read_text().replace(str(other), str(other) + "/")
    with config.open("r+") as f:
        f.write(text)
        f.truncate()
    assert _where(repo, env) == str(other)
    git("config", "--unset", "gitlease.store", cwd=repo)
    assert _where(repo, env) == default


def test_an_include_created_later_and_the_global_file_are_seen(repo, counted, tmp_path) -> None:
    env, log = counted
    include = tmp_path / "later.cfg"
    git("config", "include.path", str(include), cwd=repo)  # not there yet: git skips it
    default = _cached(repo, env, log)
    other = tmp_path / "from-include.git"
    git("init", "-q", "--bare", str(other), cwd=tmp_path)
    include.write_text(f"[gitlease]\n\tstore = {other}\n")
    assert _where(repo, env) == str(other)
    include.unlink()
    assert _where(repo, env) == default
    # the global file (the tests' GIT_CONFIG_GLOBAL) counts like any other
    _cached(repo, env, log)
    global_file = Path(os.environ["GIT_CONFIG_GLOBAL"])
    saved = global_file.read_text()
    try:
        global_file.write_text(saved + f"[gitlease]\n\tstore = {other}\n")
        assert _where(repo, env) == str(other)
    finally:
        global_file.write_text(saved)
    assert _where(repo, env) == default


def test_an_onbranch_include_follows_a_branch_switch(repo, counted, tmp_path) -> None:
    env, log = counted
    other = tmp_path / "feature-store.git"
    git("init", "-q", "--bare", str(other), cwd=tmp_path)
    (repo / ".git" / "feature.cfg").write_text(f"[gitlease]\n\tstore = {other}\n")
    git("config", "includeIf.onbranch:feature.path", "feature.cfg", cwd=repo)
    default = _cached(repo, env, log)  # on main: the include does not apply
    git("switch", "-q", "-c", "feature", cwd=repo)
    assert _where(repo, env) == str(other)
    assert _cached(repo, env, log) == str(other)  # cached on the branch, too
    git("switch", "-q", "main", cwd=repo)
    assert _where(repo, env) == default


def test_config_from_the_environment_is_part_of_the_key(repo, counted, tmp_path) -> None:
    env, log = counted
    default = _cached(repo, env, log)
    other = tmp_path / "from-env.git"
    git("init", "-q", "--bare", str(other), cwd=tmp_path)
    by_env = {
        **env,
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "gitlease.store",
        "GIT_CONFIG_VALUE_0": str(other),
    }
    assert _where(repo, by_env) == str(other)
    assert _where(repo, env) == default


def test_a_credential_is_never_written_to_the_cache(repo, counted) -> None:
    env, log = counted
    secret = "https://agent:glpat-s3cr3t@git.example.com/acme/shop.git"
    git("remote", "add", "origin", secret, cwd=repo)
    for _ in range(3):
        _where(repo, env)
    cache = gitconfig.cache_dir()
    texts = [p.read_text() for p in cache.glob("*.json")] if cache.exists() else []
    assert not [t for t in texts if "s3cr3t" in t]
    before = _config_calls(log)
    _where(repo, env)
    assert _config_calls(log) == before + 1  # read afresh every time instead


def test_one_process_reads_once_and_still_sees_an_edit(repo, counted, monkeypatch) -> None:
    """Within one process a read is reused from memory while every file it depends on is
    unchanged, a read too recent for the cache file only within git's racy window, and an
    edit is seen by the next read (the MCP server and the keeper stay up for hours)."""
    env, log = counted
    monkeypatch.setenv("PATH", env["PATH"])
    git_dir = repo / ".git"
    pattern = r"gitlease\..*"

    def keys() -> list[str]:
        return [key for _, _, key, _ in gitconfig.read(git_dir, pattern)]

    git("config", "gitlease.trailers", "true", cwd=repo)  # (just written: a racy read)
    assert keys() == ["gitlease.trailers"]
    calls = _config_calls(log)
    assert keys() == ["gitlease.trailers"]
    assert _config_calls(log) == calls  # from this process's memory, though not cacheable
    git("config", "gitlease.requireClaim", "true", cwd=repo)  # (lock file, rename: new inode)
    calls = _config_calls(log)
    assert keys() == ["gitlease.trailers", "gitlease.requireclaim"]
    assert _config_calls(log) == calls + 1
    # The racy window over, a read that could not be trusted to a file is made again.
    # (measured on the monotonic clock: a wall clock set back would not stretch it)
    later = gitconfig.time.monotonic_ns() + int(gitconfig.RACY_SECONDS * 1e9)
    monkeypatch.setattr(gitconfig.time, "monotonic_ns", lambda: later)
    assert keys() == ["gitlease.trailers", "gitlease.requireclaim"]
    assert _config_calls(log) == calls + 2


def test_an_edit_while_git_reads_is_never_kept_in_memory(repo, monkeypatch) -> None:
    """An edit that lands between git's read and the look at the files it read leaves an old
    answer beside new file identities: kept in memory, it was served as current until the
    racy window ended (and a resident server kept the store it chose). It is never kept."""
    git_dir = repo / ".git"
    pattern = r"gitlease\..*"
    edit_once_git_has_read(monkeypatch, lambda: git("config", "gitlease.remote", "x", cwd=repo))
    assert [k for _, _, k, _ in gitconfig.read(git_dir, pattern)] == []  # read before the edit
    assert [k for _, _, k, _ in gitconfig.read(git_dir, pattern)] == ["gitlease.remote"]


def test_one_process_follows_the_environment_and_a_git_put_earlier_on_path(
    repo, counted, monkeypatch, tmp_path
) -> None:
    """Within one process the walk along PATH for git and the digest of the environment are
    remembered: a variable that changes what git reads changes the answer at once, and a git
    installed earlier on the same PATH is used once the racy window is over."""
    env, log = counted
    earlier = tmp_path / "earlier-bin"  # on PATH before the counted git, empty for now
    earlier.mkdir()
    monkeypatch.setenv("PATH", f"{earlier}{os.pathsep}{env['PATH']}")
    git_dir = repo / ".git"
    pattern = r"gitlease\..*"

    def keys() -> list[str]:
        return [key for _, _, key, _ in gitconfig.read(git_dir, pattern)]

    assert keys() == []
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "gitlease.trailers")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    assert keys() == ["gitlease.trailers"]
    monkeypatch.delenv("GIT_CONFIG_COUNT")
    assert keys() == []
    git("config", "gitlease.remote", "x", cwd=repo)
    other_log = tmp_path / "other.log"
    real = shutil.which("git", path=os.environ["PATH"].split(os.pathsep, 1)[1])
    (earlier / "git").write_text(f'#!/bin/sh\necho "$*" >> "{other_log}"\nexec "{real}" "$@"\n')
    (earlier / "git").chmod(0o755)
    calls = _config_calls(log)
    assert keys() == ["gitlease.remote"]
    assert not other_log.exists(), "within the racy window: the git found before"
    assert _config_calls(log) == calls + 1
    later = gitconfig.time.monotonic_ns() + int(gitconfig.RACY_SECONDS * 1e9)
    monkeypatch.setattr(gitconfig.time, "monotonic_ns", lambda: later)
    assert keys() == ["gitlease.remote"]
    assert _config_calls(other_log) == 1, "then the git now first on PATH"


_REAL_GIT = os.path.realpath(shutil.which("git") or "git")


def _reads(log: Path) -> int:
    """How many configuration reads (gitlease's ``--get-regexp``) a logging git ran."""
    return log.read_text().count("--get-regexp") if log.exists() else 0


def _logging_git(folder: Path, log: Path) -> None:
    """A ``git`` in ``folder`` that logs each call to ``log`` and runs the real one."""
    real = _REAL_GIT
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "git").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    (folder / "git").chmod(0o755)


def test_a_relative_path_folder_and_a_git_gone_are_never_remembered(
    repo, monkeypatch, tmp_path
) -> None:
    """A relative folder on PATH names another git after a change of directory, and a git
    removed since the walk is not run: the next git on PATH reads instead."""
    git_dir = repo / ".git"
    pattern = r"gitlease\..*"
    logs = {name: tmp_path / f"{name}.log" for name in ("x", "y", "first", "second")}
    for name in ("x", "y"):
        _logging_git(tmp_path / name / "bin", logs[name])
    monkeypatch.setenv("PATH", f"bin{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path / "x")
    gitconfig.read(git_dir, pattern)
    monkeypatch.chdir(tmp_path / "y")
    (tmp_path / "y" / "bin" / "git").write_text(
        (tmp_path / "y" / "bin" / "git").read_text() + "# another build\n"
    )
    gitconfig.read(git_dir, pattern)
    assert _reads(logs["x"]) == 1 and _reads(logs["y"]) == 1
    _logging_git(tmp_path / "first", logs["first"])
    _logging_git(tmp_path / "second", logs["second"])
    monkeypatch.setenv("PATH", f"{tmp_path / 'first'}{os.pathsep}{tmp_path / 'second'}")
    git("config", "gitlease.remote", "a", cwd=repo)
    assert [k for _, _, k, _ in gitconfig.read(git_dir, pattern)] == ["gitlease.remote"]
    assert _reads(logs["first"]) == 1
    (tmp_path / "first" / "git").unlink()
    _logging_git(tmp_path / "second", logs["second"])
    git("config", "gitlease.trailers", "true", cwd=repo)
    keys = [k for _, _, k, _ in gitconfig.read(git_dir, pattern)]
    assert keys == ["gitlease.remote", "gitlease.trailers"], keys
    assert _reads(logs["second"]) == 1, "the git now first on PATH read it"


def test_a_config_value_from_the_environment_is_never_kept_in_memory(repo, monkeypatch) -> None:
    """``GIT_CONFIG_VALUE_n`` may be a credential: the process's memory of its reads keeps
    the answer's digest, never the value itself."""
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "gitlease.remote")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://agent:s3cr3t-value@example.com/x.git")
    found = gitconfig.read(repo / ".git", r"gitlease\..*")
    assert [k for _, _, k, _ in found] == ["gitlease.remote"]
    assert "s3cr3t-value" not in repr(gitconfig._DIGESTS) + repr(gitconfig._WHICH)
