"""A leftover binding never blocks commits on other work unannounced (issue 29.15)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from conftest import git, run_cli, store_path


def _until_expired(resource: str, cwd: Path) -> None:
    deadline = time.monotonic() + 60  # a failure bound, never a margin
    while run_cli("show", resource, "--json", cwd=cwd).json["state"] != "expired":
        assert time.monotonic() < deadline, "the claim never expired"
        time.sleep(0.05)


def _commit(cwd: Path, name: str) -> subprocess.CompletedProcess[str]:
    (cwd / name).write_text("work\n")
    git("add", name, cwd=cwd)
    return subprocess.run(
        ["git", "commit", "-qm", name], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_a_binding_lapsed_and_taken_by_another_is_dropped_with_a_warning(
    repo: Path, worktrees: tuple[Path, Path]
) -> None:
    """An agent restarts in its worktree and acquires unit/2; its binding to its lapsed
    unit/1, which another agent holds now, refused every commit, unannounced."""
    a, b = worktrees
    assert run_cli("hooks", "install", cwd=repo).code == 0
    assert run_cli("acquire", "unit/1", "--ttl", "1s", cwd=a).code == 0
    _until_expired("unit/1", a)
    assert run_cli("acquire", "unit/1", cwd=b).code == 0
    got = run_cli("acquire", "unit/2", "--json", cwd=a)
    assert got.code == 0, got
    assert [(w["resource"], w["dropped"]) for w in got.json["warnings"]] == [("unit/1", True)]
    assert "unit/1" in got.err and "dropped" in got.err, got.err
    committed = _commit(a, "two")
    assert committed.returncode == 0, committed.stderr
    listed = run_cli("list", cwd=a).out
    assert any(line.startswith("*") and "unit/2" in line for line in listed.splitlines()), listed
    assert _commit(b, "one").returncode == 0, "the other holder commits as before"


def test_a_lapsed_binding_nobody_took_is_kept_and_announced(
    repo: Path, worktrees: tuple[Path, Path]
) -> None:
    """Lapsed with nobody after it: the hooks go on refusing (the work may be half done),
    and acquire, list and hooks status say so, naming the way out."""
    a, _ = worktrees
    assert run_cli("hooks", "install", cwd=repo).code == 0
    assert run_cli("acquire", "unit/1", "--ttl", "1s", cwd=a).code == 0
    _until_expired("unit/1", a)
    got = run_cli("acquire", "unit/2", "--json", cwd=a)
    assert got.code == 0, got
    assert [(w["resource"], w["dropped"]) for w in got.json["warnings"]] == [("unit/1", False)]
    assert "gitlease unbind unit/1" in got.err, got.err
    assert _commit(a, "two").returncode != 0, "a lapsed claim's binding still refuses"
    status = run_cli("hooks", "status", "--json", cwd=a).json
    assert [s["resource"] for s in status["bindings"]["stale"]] == ["unit/1"], status
    assert [s["resource"] for s in status["bindings"]["active"]] == ["unit/2"], status
    listed = run_cli("list", "--json", cwd=a).json
    assert [s["resource"] for s in listed["stale_bindings"]] == ["unit/1"], listed
    assert "stale" in run_cli("list", cwd=a).out
    assert run_cli("unbind", "unit/1", cwd=a).code == 0
    assert _commit(a, "three").returncode == 0


def test_list_reads_the_store_once_however_many_bindings_are_stale(
    worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    """``list`` judged each binding of this worktree by a read of its own (git processes a
    binding, on every list): the claims it lists are what it judges them by."""
    a, b = worktrees
    for n in (1, 2, 3):
        assert run_cli("acquire", f"unit/{n}", "--ttl", "1s", cwd=a).code == 0
    for n in (1, 2, 3):
        _until_expired(f"unit/{n}", a)
    # a name the listing's own walk of a small store leaves to git (which skips it): the
    # store is listed by git, whose processes are what is counted
    (store_path(a) / "refs" / "worklease" / ".walk-off").write_text("")

    def listed(cwd: Path, *args: str) -> tuple[Any, int]:
        trace = tmp_path / "trace"
        trace.unlink(missing_ok=True)
        got = run_cli("list", "--json", *args, cwd=cwd, env={"GIT_TRACE": str(trace)})
        assert got.code == 0, got
        # (``git config`` runs or not by the age of each worktree's configuration files, git's
        # racy rule: what is counted is the reads of the store)
        lines = trace.read_text().splitlines() if trace.exists() else []
        return got.json, sum("built-in: git " in x and "git config" not in x for x in lines)

    doc, bound = listed(a)
    assert sorted(s["resource"] for s in doc["stale_bindings"]) == ["unit/1", "unit/2", "unit/3"]
    _, unbound = listed(b)  # the same store, from a worktree bound to nothing
    assert bound == unbound >= 1, (bound, unbound)  # (git's for-each-ref names the refs)
    # a binding the listing leaves out (another prefix) is still judged
    doc, _ = listed(a, "--prefix", "unit/1")
    assert sorted(s["resource"] for s in doc["stale_bindings"]) == ["unit/1", "unit/2", "unit/3"]
