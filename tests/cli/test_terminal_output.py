"""For people at a terminal: tables and colour (none with ``NO_COLOR`` or into a pipe), and one
live status line while ``--wait`` waits.
"""

from __future__ import annotations

from pathlib import Path

from terminal import tty_run, tty_run_while_waiting

R = "github/acme/api/42"


def test_tables_and_colour_for_people(cli, repo: Path) -> None:
    cli("acquire", R, "--ttl", "10m")
    shown = tty_run(["list"], repo, {})
    assert "\x1b[32m" in shown and "expires in 9m" in shown
    assert "RESOURCE" in shown and "*" in shown  # bound to this worktree
    plain = tty_run(["list"], repo, {"NO_COLOR": "1"})
    assert "\x1b[" not in plain and "active" in plain
    piped = cli("list").out
    assert "\x1b[" not in piped
    detail = tty_run(["show", R], repo, {})
    assert "expires in" in detail and "claim id" in detail


def test_wait_shows_one_live_status_line_on_a_terminal(cli, repo: Path) -> None:
    first = str(repo.parent / "first.json")
    cli("acquire", R, "--ttl", "5m", "--no-bind", "--receipt", first)  # held while it waits
    out = tty_run_while_waiting(["acquire", R, "--wait", "60s"], repo, {R: first})
    assert "waiting for test-agent" in out and "attempt" in out and "acquired" in out
