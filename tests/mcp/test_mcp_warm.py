"""What `gitlease mcp` keeps warm between calls (gitlease/mcp/warm.py): the stores its
commands open and the git half of acquire's look at the commit hooks. Kept only while
the git configuration it came from is unchanged; a change anywhere git would read it from
(a setting in the repository, in the global file, in an included file) is followed at the
next call, and two calls at once never share a store.

In-process, in real repositories; the end-to-end check through a real server is in
tests/mcp/test_mcp.py (a change of `gitlease.store` in the middle of a session).
"""

from __future__ import annotations

import io
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

import pytest
from conftest import git, run_cli
from gitcalls import edit_once_git_has_read

from gitlease.api.warm import WarmStores
from gitlease.hooks.warm import WarmHooks


@pytest.fixture
def here(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(repo)
    return repo


def _bare(path: Path) -> Path:
    git("init", "-q", "--bare", str(path), cwd=path.parent)
    return path.resolve()


def opened(warm: WarmStores) -> object:
    """One call's store: opened (or reused), then given back as a call's end does."""
    store = warm.open_store(None, None)
    warm.release()
    return store


def test_a_store_chosen_by_a_read_an_edit_overtook_is_not_kept(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit between git's read of the configuration and the pool's look at its files
    left the pool watching the new files beside the store the old ones chose: that store
    was served for good, while every command line used the new one (two places deciding
    one resource). The pool keeps nothing whose files changed while it opened the store."""
    other = _bare(tmp_path / "other.git")
    edit_once_git_has_read(
        monkeypatch, lambda: git("config", "gitlease.store", str(other), cwd=here)
    )
    warm = WarmStores()
    first = opened(warm)  # (chosen by the read before the edit: that call began before it)
    assert first.git_dir != other  # type: ignore[attr-defined]
    assert opened(warm).git_dir == other  # type: ignore[attr-defined]


def test_a_store_is_kept_until_the_repositorys_configuration_changes(here: Path, tmp_path: Path):
    warm = WarmStores()
    first = opened(warm)
    assert opened(warm) is first and opened(warm) is first
    assert warm.opened == 1
    other = _bare(tmp_path / "other.git")
    git("config", "gitlease.store", str(other), cwd=here)
    moved = opened(warm)
    assert moved is not first and moved.git_dir == other  # type: ignore[attr-defined]
    assert opened(warm) is moved
    git("config", "--unset", "gitlease.store", cwd=here)
    back = opened(warm)
    assert back.git_dir == first.git_dir  # type: ignore[attr-defined]
    assert warm.opened == 3


def test_the_global_configuration_counts_too(here: Path, tmp_path: Path):
    warm = WarmStores()
    first = opened(warm)
    other = _bare(tmp_path / "global.git")
    global_file = Path(os.environ["GIT_CONFIG_GLOBAL"])
    saved = global_file.read_text()
    try:
        git("config", "--global", "gitlease.store", str(other), cwd=here)
        moved = opened(warm)
        assert moved is not first and moved.git_dir == other  # type: ignore[attr-defined]
    finally:
        global_file.write_text(saved)


def test_a_configuration_with_an_include_is_read_afresh_every_time(here: Path, tmp_path: Path):
    """An included file can change (or its condition start to hold) with no stat of the
    files watched changing: such a configuration is never reused."""
    extra = here / ".git" / "extra.cfg"
    extra.write_text("")
    git("config", "include.path", "extra.cfg", cwd=here)
    warm = WarmStores()
    first = opened(warm)
    assert opened(warm) is not first
    other = _bare(tmp_path / "included.git")
    extra.write_text(f"[gitlease]\n\tstore = {other}\n")  # only the included file changes
    assert opened(warm).git_dir == other  # type: ignore[attr-defined]


def test_a_linked_worktree_follows_its_own_dot_git(repo: Path, tmp_path: Path, monkeypatch):
    wt = repo.parent / "wt-linked"
    git("worktree", "add", "-q", "-b", "linked", str(wt), cwd=repo)
    monkeypatch.chdir(wt)
    warm = WarmStores()
    first = opened(warm)
    assert opened(warm) is first
    monkeypatch.chdir(repo)  # another working directory: another reading
    assert opened(warm) is not first


def test_two_calls_at_once_never_share_a_store(here: Path):
    warm = WarmStores()
    mine = warm.open_store(None, None)  # this call runs: its store stays its own
    theirs: list[object] = []

    def other_call() -> None:
        theirs.append(warm.open_store(None, None))
        theirs.append(warm.open_store(None, None))  # (the same call asks again: its own)
        warm.release()

    thread = threading.Thread(target=other_call)
    thread.start()
    thread.join()
    assert theirs[0] is not mine and theirs[1] is theirs[0]
    assert warm.open_store(None, None) is mine
    warm.release()
    assert opened(warm) in (mine, theirs[0])


def test_a_kept_remote_store_forgets_the_last_commands_fetch(here: Path, tmp_path: Path):
    """Within a second of a refused push settled by a fetch, a store answers from that
    fetch; a new command must look again."""
    server = _bare(tmp_path / "server.git")
    warm = WarmStores()
    store = warm.open_store(None, server.as_uri())
    store.link.fetched_after_refusal = 1e18  # type: ignore[attr-defined]  # (as a settle leaves it)
    warm.release()
    again = warm.open_store(None, server.as_uri())
    assert again is store
    assert again.link.fetched_after_refusal is None  # type: ignore[attr-defined]
    warm.release()


class _Spawned:
    """Counts the processes started (``subprocess.Popen``) while it is installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.args: list[list[str]] = []
        real = subprocess.Popen
        spawned = self

        class Counting(real):  # type: ignore[misc, valid-type]
            def __init__(self, args, *a, **kw):  # type: ignore[no-untyped-def]
                spawned.args.append(list(args))
                super().__init__(args, *a, **kw)

        monkeypatch.setattr(subprocess, "Popen", Counting)


@contextmanager
def _in_process_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any, Any]]:
    """The server's session with its CLI run in this process, as ``gitlease mcp`` runs it:
    (the session, its renewals, what it keeps warm)."""
    from gitlease.cli import app, jsonout
    from gitlease.mcp import capture
    from gitlease.mcp.renewal import Renewals
    from gitlease.mcp.server import Cli, Session
    from gitlease.mcp.warm import Warm

    warm = Warm()
    monkeypatch.setattr(app, "resident", warm)

    def invoke(argv: list[str]) -> int:
        try:
            return app.main(argv)
        finally:
            warm.release()

    renewals = Renewals(lambda: warm.open_store(None, None))
    session = Session(
        Cli(invoke=invoke, error_document=jsonout.error_document, json_text=jsonout.json_text),
        renewals,
        shared=["--json"],
        commands=set(app.LazyGroup.modules),
    )
    try:
        with capture.installed() as stdout, redirect_stderr(io.StringIO()):
            session.install(stdout)
            yield session, renewals, warm
    finally:
        renewals.stop()


def test_calls_after_the_first_run_no_git_process(here: Path, monkeypatch):
    """A resident server's acquire and release, once warm: no `git config` to locate the
    store, no git process to find the hooks (a command line runs five)."""
    assert run_cli("hooks", "install", cwd=here).code == 0
    with _in_process_session(monkeypatch) as (session, _, warm):

        def cycle() -> dict[str, object]:
            failed, doc = session.call("acquire", {"resource": "warm/1"})
            assert not failed, doc
            failed, done = session.call("release", {"resource": "warm/1"})
            assert not failed, done
            return doc

        first = cycle()  # (the store is made, and its first write sets its config)
        cycle()
        opens, looks = warm.stores.opened, warm.hooks.looked
        spawned = _Spawned(monkeypatch)
        later = [cycle() for _ in range(3)]
    assert spawned.args == []
    assert (warm.stores.opened, warm.hooks.looked) == (opens, looks)
    assert first["commit_check"]["in_effect"] is True  # type: ignore[index]
    assert all(d["commit_check"] == first["commit_check"] for d in later)


def test_a_release_that_fails_leaves_the_claim_renewed(here: Path, monkeypatch):
    """The server stopped renewing a claim before releasing it, and a release that failed
    (a checkpoint with a newline is USAGE) left the claim held and renewed by nobody: it
    lapsed under the agent. It is renewed again until a release succeeds."""
    with _in_process_session(monkeypatch) as (session, renewals, _):
        failed, doc = session.call("acquire", {"resource": "renew/1", "ttl": "10m"})
        assert not failed, doc
        assert renewals.kept() == ["renew/1"]
        failed, doc = session.call("release", {"resource": "renew/1", "checkpoint": "a\nb"})
        assert failed and doc["error"]["code"] == "USAGE", doc
        assert renewals.kept() == ["renew/1"]
        failed, doc = session.call("release", {"resource": "renew/1"})
        assert not failed, doc
        assert renewals.kept() == []


def test_the_hooks_folder_is_looked_at_on_every_call(here: Path):
    """What git runs is read every time; only where it looks for it is kept, and that
    follows `core.hooksPath`."""
    hooks = WarmHooks()
    assert hooks.commit_check(here).in_effect is False  # type: ignore[union-attr]
    looked = hooks.looked
    assert hooks.commit_check(here).in_effect is False  # type: ignore[union-attr]
    assert hooks.looked == looked  # (kept: the configuration did not change)
    assert run_cli("hooks", "install", cwd=here).code == 0
    assert hooks.commit_check(here).in_effect is True  # type: ignore[union-attr]
    looked = hooks.looked
    assert hooks.commit_check(here).in_effect is True  # type: ignore[union-attr]
    assert hooks.looked == looked
    elsewhere = here.parent / "elsewhere-hooks"
    elsewhere.mkdir()
    git("config", "core.hooksPath", str(elsewhere), cwd=here)
    moved = hooks.commit_check(here)
    assert moved is not None and moved.in_effect is False
    assert moved.location.path == elsewhere
    assert hooks.looked == looked + 1


def test_a_hook_edited_in_place_is_seen_on_the_next_call(here: Path):
    """What a hook program says is remembered by its text only: the same file, its pinned
    Python edited to one that is gone (then back), answers from what it says now."""
    hooks = WarmHooks()
    assert run_cli("hooks", "install", cwd=here).code == 0
    first = hooks.commit_check(here)
    assert first is not None and first.in_effect is True
    path = first.location.path / "pre-commit"
    text = path.read_text()
    pinned = next(line for line in text.splitlines() if line.startswith("gitlease_python="))
    path.write_text(text.replace(pinned, "gitlease_python=/nonexistent/python3"))
    broken = hooks.commit_check(here)
    assert broken is not None and broken.in_effect is False
    assert any("/nonexistent/python3" in p for p in broken.problems), broken.problems
    path.write_text(text)
    again = hooks.commit_check(here)
    assert again is not None and again.in_effect is True, again.problems


def test_a_hooks_folder_an_edit_overtook_is_not_kept(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for the stores: `core.hooksPath` changed right after git answered where the hooks
    are. That call's answer comes from the read before the edit; it is not kept beside the
    new files (the next call asks git again and follows the edit)."""
    from gitlease.hooks import dirs as hookdirs

    elsewhere = here.parent / "overtaken-hooks"
    elsewhere.mkdir()
    real = hookdirs._git
    edits: list[str] = []

    def answer_then_edit(*args: str, cwd: Path | None) -> subprocess.CompletedProcess[str]:
        out = real(*args, cwd=cwd)
        if "core.hooksPath" in args and not edits:
            edits.append("done")
            git("config", "core.hooksPath", str(elsewhere), cwd=here)
        return out

    monkeypatch.setattr(hookdirs, "_git", answer_then_edit)
    hooks = WarmHooks()
    first = hooks.commit_check(here)
    assert first is not None and first.location.path != elsewhere  # (read before the edit)
    second = hooks.commit_check(here)
    assert second is not None and second.location.path == elsewhere, second.location
