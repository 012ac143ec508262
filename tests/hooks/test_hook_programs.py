"""The hook programs run the installed gitlease, isolated (``-E -P``): a ``gitlease`` package in
the checkout or on ``PYTHONPATH`` cannot replace the check; and hooks installed by 0.2.0
(their text in tests/support/) keep working (docs/reliability.md, "Truth, round three").
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SUPPORT, git, run_cli

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
    old = (SUPPORT / "gitlease-hook-0.2.0").read_text()
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


def test_a_hook_file_is_read_up_to_its_first_mib(tmp_path: Path) -> None:
    """``read_head`` reads a buffer of the file's size, never more than a MiB, and a file
    whose size a stat does not tell (empty here) to its end."""
    from gitlease.hooks.files import read_head

    small = tmp_path / "small"
    small.write_bytes(b"#!/bin/sh\n")
    assert read_head(small) == "#!/bin/sh\n"
    big = tmp_path / "big"
    big.write_bytes(b"a" * (1 << 20) + b"TAIL")
    head = read_head(big)
    assert head is not None and len(head) == 1 << 20 and "TAIL" not in head
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert read_head(empty) == ""
    assert read_head(tmp_path / "missing") is None
    assert read_head(tmp_path) is None  # a folder


def test_the_hook_program_is_read_again_after_the_package_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resident server outlives an upgrade of its package: the program it compares the
    installed hooks with is the file as it is now, not as it was at the first call."""
    import importlib.resources

    from gitlease.hooks.files import program

    (tmp_path / "hook").write_text("old @PY@\n")
    monkeypatch.setattr(importlib.resources, "files", lambda _package: tmp_path)
    assert program("hook", "@PY@", "PY", "/usr/bin/python3") == "old PY=/usr/bin/python3\n"
    (tmp_path / "hook").write_text("newer @PY@\n")
    os.utime(tmp_path / "hook", ns=(1, 1))  # (another time, whatever the clock's grain)
    assert program("hook", "@PY@", "PY", "/usr/bin/python3") == "newer PY=/usr/bin/python3\n"
