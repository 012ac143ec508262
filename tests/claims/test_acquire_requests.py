"""What callers type at acquire (issue 29.17): owner labels, waiting on your own claim,
TTL bounds and duration spellings."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import git, run_cli

from gitlease.errors import UsageError
from gitlease.model.durations import duration_ms


def test_first_free_labels_the_owner_with_the_worktree(worktrees: tuple[Path, Path]) -> None:
    """--first-free labelled the owner user@host:PID inside a worktree."""
    a, _ = worktrees
    env = {"GITLEASE_OWNER": ""}
    plain = run_cli("acquire", "ff/plain", "--no-bind", "--json", cwd=a, env=env).json
    got = run_cli("acquire", "--first-free", "ff/1", "ff/2", "--no-bind", "--json", cwd=a, env=env)
    assert got.code == 0, got
    assert plain["owner"].endswith(":wt-a"), plain["owner"]
    assert got.json["owner"] == plain["owner"], got.json["owner"]


def test_waiting_for_your_own_active_claim_answers_at_once(repo: Path) -> None:
    """acquire R --wait on your own active claim waited the whole --wait, then said HELD."""
    assert run_cli("acquire", "own/1", cwd=repo).code == 0
    started = time.monotonic()
    got = run_cli("acquire", "own/1", "--wait", "10m", cwd=repo, timeout=300)
    assert got.code == 3 and "yours" in got.err, got
    assert time.monotonic() - started < 300  # (it answered; the bound only ends a hang)


def test_a_ttl_above_the_configured_maximum_is_usage(repo: Path) -> None:
    """--ttl had no upper bound: a crashed agent could block a unit for 100 days."""
    got = run_cli("acquire", "ttl/1", "--ttl", "100d", "--json", cwd=repo)
    assert got.code == 2 and "gitlease.maxTtl" in got.json["error"]["message"], got
    assert run_cli("acquire", "ttl/1", "--ttl", "1d", "--no-bind", cwd=repo).code == 0
    git("config", "gitlease.maxTtl", "2h", cwd=repo)
    assert run_cli("acquire", "ttl/2", "--ttl", "3h", cwd=repo).code == 2
    assert run_cli("heartbeat", "ttl/1", "--ttl", "3h", cwd=repo).code == 2
    assert run_cli("acquire", "ttl/2", "--ttl", "1h30m", "--no-bind", cwd=repo).code == 0
    git("config", "gitlease.maxTtl", "soon", cwd=repo)
    assert run_cli("acquire", "ttl/3", "--ttl", "1h", cwd=repo).code == 2


def test_the_maximum_is_read_with_the_configuration_and_follows_an_edit(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every acquire with a TTL ran ``git config --get gitlease.maxTtl``: a process a call in
    the MCP server and the library, and one of a CLI acquire's. It is read with the rest of
    the repository's configuration now (cached by its files), and an edit still counts."""
    import subprocess

    from conftest import run_cli as cli
    from gitcalls import counted, counting_git

    from gitlease.api import lease
    from gitlease.store.location import open_store

    monkeypatch.chdir(repo)
    store = open_store(cwd=repo)
    runs: list[list[str]] = []
    real = subprocess.Popen.__init__

    def noting(self, args, *a, **k):  # type: ignore[no-untyped-def]
        runs.append([str(x) for x in args])
        real(self, args, *a, **k)

    lease.acquire(store, "mx/0", ttl="1h", bind=False, receipt=tmp_path / "r0.json")
    monkeypatch.setattr(subprocess.Popen, "__init__", noting)
    for i in range(1, 4):
        lease.acquire(store, f"mx/{i}", ttl="1h", bind=False, receipt=tmp_path / f"r{i}.json")
    assert not [r for r in runs if "config" in r], runs
    monkeypatch.setattr(subprocess.Popen, "__init__", real)
    git("config", "gitlease.maxTtl", "30m", cwd=repo)
    with pytest.raises(UsageError, match=r"gitlease\.maxTtl = 30m"):
        lease.acquire(store, "mx/9", ttl="1h", bind=False, receipt=tmp_path / "r9.json")
    env, calls = counting_git(tmp_path)
    assert cli("acquire", "mx/a", "--ttl", "10m", "--no-bind", cwd=repo, env=env).code == 0
    calls.write_text("")
    assert cli("acquire", "mx/b", "--ttl", "10m", "--no-bind", cwd=repo, env=env).code == 0
    assert "gitlease.maxTtl" not in calls.read_text(), calls.read_text()
    # (--no-bind: no look at the commit hooks; the one git is the write itself, update-ref)
    assert counted(calls) == 1 and "update-ref" in calls.read_text(), calls.read_text()


@pytest.mark.parametrize("option", ["--ttl", "--wait"])
def test_a_bare_number_is_refused_naming_the_unit(repo: Path, option: str) -> None:
    """A bare number meant seconds silently."""
    got = run_cli("acquire", "bare/1", option, "90", "--json", cwd=repo)
    assert got.code == 2 and "90s" in got.json["error"]["message"], got
    assert run_cli("list", "--json", cwd=repo).json["claims"] == []


@pytest.mark.parametrize(
    ("text", "ms"),
    [("1h30m", 5_400_000), ("2m30s", 150_000), ("1d12h", 129_600_000), ("1s500ms", 1_500)],
)
def test_compound_durations_are_accepted(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["90", " 5 ", "1.5", "1h30", "h30m", "1h 30m", "٥m"])
def test_durations_without_a_unit_on_every_number_are_usage(text: str) -> None:
    with pytest.raises(UsageError):
        duration_ms(text)
