"""More of the CLI end to end: history survives gc, waiting, prune, keys, entry points, colour."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from conftest import git, store_git, store_path

R = "github/acme/api/42"


def test_history_survives_gc_and_pack_refs(cli, repo: Path) -> None:
    cli("acquire", R, "--ttl", "1m")
    cli("heartbeat", R)
    cli("release", R, "--checkpoint", "c1")
    doc = cli("acquire", R, "--json").json
    store_git("gc", "--prune=now", "--quiet", cwd=repo)
    store_git("pack-refs", "--all", cwd=repo)
    history = cli("log", R, "--json").json["records"]
    assert [(h["revision"], h["state"]) for h in history] == [
        (1, "active"),
        (1, "active"),
        (1, "released"),
        (2, "active"),
    ]
    assert history[2]["checkpoint"] == "c1"
    log_file = store_path(repo) / "logs" / doc["ref"]
    assert len(log_file.read_text().strip().splitlines()) == 4
    for i in range(4):  # every reflog entry still names a readable record
        oid = store_git("rev-parse", f"{doc['ref']}@{{{i}}}", cwd=repo).stdout.strip()
        assert store_git("cat-file", "-t", oid, cwd=repo).stdout.strip() == "blob"
    assert "not a commit" not in store_git("gc", cwd=repo).stderr


def test_console_scripts_and_git_lease(repo: Path) -> None:
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    for argv in (
        ["gitlease", "where"],
        ["worklease", "where"],
        ["git", "lease", "where"],
        ["git", "lease", "acquire", "--help"],
        [sys.executable, "-m", "gitlease", "where"],
    ):
        out = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True)
        assert out.returncode == 0, (argv, out.stderr)
    usage = subprocess.run(
        ["git", "lease", "acquire", "--help"], cwd=repo, env=env, capture_output=True, text=True
    ).stdout
    assert "Usage: git lease acquire" in usage


def test_wait_retries_until_the_holder_lets_go(cli, repo: Path) -> None:
    import json

    from conftest import wait_for

    assert cli("acquire", R, "--ttl", "5m").code == 0  # held until the waiter waits
    other = repo.parent / "other"
    git("worktree", "add", "-q", "-b", "other", str(other), cwd=repo)
    waiter = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "acquire", R, "--wait", "60s", "--json"],
        cwd=other, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = store_path(repo) / "worklease" / "waiters"
        wait_for(lambda: line.is_dir() and any(n[0] != "." for n in os.listdir(line)),
                 what="the waiter to join the line")  # fmt: skip
        assert waiter.poll() is None, "it waits while the claim is held"
        assert cli("heartbeat", R, "--ttl", "1s").code == 0  # the holder's last: it lapses
        out, _ = waiter.communicate(timeout=90)
    finally:
        waiter.kill()
    assert waiter.returncode == 0 and json.loads(out)["revision"] == 2, out
    short = cli("acquire", R, "--wait", "1s", "--json")
    assert short.code == 3


def test_prune_keeps_revisions_increasing(cli, repo: Path) -> None:
    for _ in range(3):
        cli("acquire", R)
        cli("release", R)
    cli("acquire", "keep/1")
    assert cli("prune", "--older-than", "1h", "--json").json["pruned"] == []
    time.sleep(1.1)
    assert cli("prune", "--older-than", "1s", "--json").json["pruned"] == [R]
    assert cli("show", R, "--json").json["state"] == "free"
    assert cli("show", "keep/1", "--json").json["state"] == "active", "active claims stay"
    assert cli("acquire", R, "--json").json["revision"] == 4


def test_an_expired_bundle_with_a_member_taken_since_is_lost_not_partial(cli, repo: Path) -> None:
    """Every member was written, so the bundle is not partial (that is a crash mid-commit,
    tests/test_edges.py): it expired, and heartbeat says so."""
    bid = cli("bundle", "acquire", "p/1", "p/2", "--ttl", "1s", "--json").json["bundle_id"]
    time.sleep(1.2)
    other = repo.parent / "other"
    git("worktree", "add", "-q", "-b", "other", str(other), cwd=repo)
    assert cli("acquire", "p/2", cwd=other).code == 0
    report = cli("verify", "--json")
    assert [p for p in report.json["problems"] if p["kind"] == "partial-bundle"] == []
    lost = cli("bundle", "heartbeat", bid, "--json")
    assert lost.code == 4 and "partial" not in lost.json["error"]["message"], lost
    # a partial bundle (a crash mid-commit leaves one member written): the text report
    assert cli("bundle", "acquire", "q/1", "q/2", "--no-bind").code == 0
    store_git("update-ref", "-d", "refs/worklease/q/2.lease", cwd=repo)
    text = cli("verify")
    assert text.code == 7 and "partial-bundle" in text.out, "the report goes to stdout"
    assert text.err == "", "`gitlease verify | less` shows the whole report"


def test_keys_compose_with_free_and_acquire(cli, repo: Path) -> None:
    keys = cli("key", "github", "acme/api#42", "https://github.com/ACME/API/pull/42", "--json")
    assert {k["resource"] for k in keys.json["keys"]} == {R}
    assert cli("acquire", "--key", "github", "https://github.com/acme/api/issues/42").code == 0
    listed = cli("key", "beads", "-", input="bd-a1\nbd-b2\n\nbd-c3\n").out
    assert listed.split() == ["beads/bd-a1", "beads/bd-b2", "beads/bd-c3"]
    assert cli("acquire", "beads/bd-b2").code == 0
    free = cli("free", "-", input=listed).out.split()
    assert free == ["beads/bd-a1", "beads/bd-c3"]
    bad = cli("key", "github", "not a reference", "--json")
    assert bad.code == 2 and "accepts" in bad.json["error"]["message"]
    before = store_git("for-each-ref", "refs/worklease/", cwd=repo).stdout
    for provider in ("github", "gitlab", "jira", "linear", "beads", "taskmaster", "path"):
        refused = cli("acquire", "--key", provider, "../../outside?#", "--json")
        assert refused.code == 2, (provider, refused)
    assert store_git("for-each-ref", "refs/worklease/", cwd=repo).stdout == before, (
        "nothing written"
    )
    assert cli("key", "taskmaster", "3.2", "--tag", "feature").out.strip() == (
        "taskmaster/feature/3.2"
    )
    assert cli("show", "--key", "github", "acme/api#42", "--json").json["state"] == "active"


def test_entry_point_provider_end_to_end(cli, repo: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "gl_tickets-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "gl_tickets.py").write_text(
        textwrap.dedent("""
        def key(item, *, options, cwd):
            if not item.startswith("T-"):
                raise ValueError("not a ticket")
            return "tickets/" + item[2:]
    """)
    )
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gl_tickets\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[gitlease.providers]\ntickets = gl_tickets:key\n")
    env = {"PYTHONPATH": str(site)}
    assert cli("key", "tickets", "T-9", env=env).out.strip() == "tickets/9"
    assert cli("acquire", "--key", "tickets", "T-9", env=env).code == 0
    assert cli("key", "tickets", "X-9", env=env).code == 2


def _tty_run(args: list[str], cwd: Path, extra_env: dict[str, str]) -> str:
    """Run the CLI with stdout on a pseudo-terminal, as a person would see it."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", **extra_env}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", *args],
        cwd=cwd,
        env=env,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait()
    os.close(leader)
    return b"".join(chunks).decode()


def _tty_run_while_waiting(args: list[str], repo: Path, lapse: dict[str, str]) -> str:
    """``_tty_run`` of a waiting command: once it stands in the line of waiters, the claims
    it waits for lapse (``lapse``: resource -> receipt; their holders' last heartbeat, with a
    1 s TTL); what it printed."""
    import threading

    from conftest import run_cli, wait_for

    out: list[str] = []
    waiter = threading.Thread(target=lambda: out.append(_tty_run(args, repo, {})), daemon=True)
    waiter.start()
    line = store_path(repo) / "worklease" / "waiters"
    wait_for(lambda: (line.is_dir() and any(n[0] != "." for n in os.listdir(line))) or out,
             what="the waiter to join the line")  # fmt: skip
    for resource, receipt in lapse.items():
        got = run_cli("heartbeat", resource, "--receipt", receipt, "--ttl", "1s", cwd=repo)
        assert got.code == 0, got
    waiter.join(timeout=90)
    assert out, "the waiter never ended"
    return out[0]


def test_tables_and_colour_for_people(cli, repo: Path) -> None:
    cli("acquire", R, "--ttl", "10m")
    shown = _tty_run(["list"], repo, {})
    assert "\x1b[32m" in shown and "expires in 9m" in shown
    assert "RESOURCE" in shown and "*" in shown  # bound to this worktree
    plain = _tty_run(["list"], repo, {"NO_COLOR": "1"})
    assert "\x1b[" not in plain and "active" in plain
    piped = cli("list").out
    assert "\x1b[" not in piped
    detail = _tty_run(["show", R], repo, {})
    assert "expires in" in detail and "claim id" in detail


def test_wait_shows_one_live_status_line_on_a_terminal(cli, repo: Path) -> None:
    first = str(repo.parent / "first.json")
    cli("acquire", R, "--ttl", "5m", "--no-bind", "--receipt", first)  # held while it waits
    out = _tty_run_while_waiting(["acquire", R, "--wait", "60s"], repo, {R: first})
    assert "waiting for test-agent" in out and "attempt" in out and "acquired" in out


def test_json_goes_before_or_after_a_group_s_command_name(cli) -> None:
    """docs/reference/json.md: `--json` may stand before or after the command name, for the
    commands of a group too."""
    bid = cli("bundle", "acquire", "g/1", "g/2", "--json").json["bundle_id"]
    for args in (["bundle", "--json", "show", bid], ["bundle", "show", bid, "--json"]):
        got = cli(*args)
        assert got.code == 0 and got.json["bundle_id"] == bid, (args, got)
    for args in (["hooks", "--json", "status"], ["hooks", "status", "--json"]):
        got = cli(*args)
        assert "hooks" in got.json, (args, got)
