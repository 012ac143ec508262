"""Waiting never holds a free resource hostage (issue 29.4)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import run_cli, store_path

from gitlease.model.refname import encode
from gitlease.state.waitqueue import waiting_for

A, B = "wait/a", "wait/b"


def _until(what: str, ready, bound: float = 60.0) -> None:
    """Wait for an event; ``bound`` only turns a hang into a failure, never a margin."""
    deadline = time.monotonic() + bound
    while not ready():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def test_a_bundle_waiter_leaves_a_free_member_takeable(worktrees: tuple[Path, Path]) -> None:
    """A bundle waiter for {a, b}, b held: a is free (`show`), and another caller takes it
    at once (it was HELD, '1 caller waiting', for the waiter's whole --wait). The waiter
    then stands in line for what blocks it, and gets the bundle when both are free."""
    holder, waiter_wt = worktrees
    third = holder.parent / "repo"
    assert run_cli("acquire", B, "--no-bind", cwd=holder).code == 0
    git_dir = store_path(holder)
    waiter = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "bundle", "acquire", A, B, "--wait", "600s"],
        cwd=waiter_wt,
        env=os.environ,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        refs = [encode(A), encode(B)]
        _until("the waiter stands in line for b", lambda: waiting_for(git_dir, refs).get(refs[1]))
        _until(
            "the waiter leaves the free a alone (it did not, before the fix)",
            lambda: not waiting_for(git_dir, refs).get(refs[0]),
            bound=20.0,
        )
        assert run_cli("show", A, "--json", cwd=third).json["state"] == "free"
        took = run_cli("acquire", A, "--no-bind", cwd=third)
        assert took.code == 0, took
        assert run_cli("release", B, cwd=holder).code == 0
        _until("the waiter stands in line for a", lambda: waiting_for(git_dir, refs).get(refs[0]))
        assert waiter.poll() is None, "the waiter got a bundle whose member another holds"
        assert run_cli("release", A, cwd=third).code == 0
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, (out, err)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate()
    shown = [run_cli("show", r, "--json", cwd=holder).json for r in (A, B)]
    assert [s["state"] for s in shown] == ["active", "active"]
    assert shown[0]["bundle_id"] == shown[1]["bundle_id"] is not None
