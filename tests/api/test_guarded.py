"""exec and replace-file: work happens only while the claim is held."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import clock_ahead, store_git, wait_for, wait_renewed, wait_state
from forged import put


def gitlease_cmd() -> str:
    return f"{sys.executable} -m gitlease"


def test_exec_holds_the_claim_longer_than_its_ttl_then_releases(cli, repo: Path) -> None:
    go = repo.parent / "go"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "exec", "job/1", "--ttl", "15s", "--",
         "sh", "-c", f"until [ -e {go} ]; do sleep 0.05; done"],
        cwd=repo,
    )  # fmt: skip
    first = wait_state(cli, "job/1", "active")
    renewed = wait_renewed(cli, "job/1", first)  # by exec's own heartbeat (every TTL/3)
    assert renewed["state"] == "active" and renewed["claim_id"] == first["claim_id"]
    assert cli("acquire", "job/1").code == 3
    go.touch()
    assert proc.wait(timeout=60) == 0
    assert cli("show", "job/1", "--json").json["state"] == "released"


def test_exec_with_an_existing_claim_keeps_it(cli, repo: Path) -> None:
    doc = cli("acquire", "job/2", "--ttl", "1m", "--json").json
    script = (
        f'[ "$GITLEASE_CLAIM_ID" = "{doc["claim_id"]}" ] && [ "$GITLEASE_REVISION" = 1 ] && '
        f'[ -n "$GITLEASE_EXPIRES_AT" ] && [ "$GITLEASE_RESOURCE" = job/2 ] && '
        f"{gitlease_cmd()} check job/2 && {gitlease_cmd()} heartbeat job/2 && "
        f"{gitlease_cmd()} show job/2 >/dev/null && env > env.txt && exit 7"
    )
    got = cli("exec", "job/2", "--", "sh", "-c", script)
    assert got.code == 7, got  # the command's own status
    shown = cli("show", "job/2", "--json").json
    assert shown["state"] == "active" and shown["claim_id"] == doc["claim_id"]
    env = (repo / "env.txt").read_text()
    token = __import__("json").loads(Path(doc["receipt"]).read_text())["token"]
    assert token not in env and "glt_" not in env


def test_exec_stops_the_command_when_the_claim_is_lost(cli, repo: Path) -> None:
    marker = repo / "still-running"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gitlease",
            "exec",
            "job/3",
            "--ttl",
            "1m",
            "--",
            "sh",
            "-c",
            f"trap '' TERM; while true; do touch {marker}; sleep 0.1; done",
        ],
        cwd=repo,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(marker.exists, what="the command to run")
    oid = cli("show", "job/3", "--json").json["oid"]
    raw = store_git("cat-file", "blob", oid, cwd=repo).stdout.replace("revision 1", "revision 5")
    put(repo, "refs/worklease/job/3.lease", raw.encode())  # edited behind its back
    code = proc.wait(timeout=60)  # poll 1s + TERM ignored + 5s grace, then KILL
    assert code == 4
    said = proc.stderr.read()
    assert "stopped" in said
    group = int(said.split("process group ")[1].split(")")[0])

    def group_gone() -> bool:  # no running member left (a zombie waits for init to reap it)
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                state, _ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            if int(pgrp) == group and state != "Z":
                return False
        return True

    wait_for(group_gone, what="the process group to be gone")
    marker.unlink()
    assert not marker.exists(), "the process group is gone"


def test_signals_reach_the_child(repo: Path) -> None:
    started = repo.parent / "started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "exec", "job/4", "--",
         "sh", "-c", f"touch {started}; exec sleep 30"],
        cwd=repo,
    )  # fmt: skip
    wait_for(started.exists, what="the command to start")  # exec is forwarding by then
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_replace_file(cli, repo: Path) -> None:
    target = repo / "backlog.md"
    target.write_text("- one\n")
    target.chmod(0o640)
    before = sha(target)
    assert cli("replace-file", str(target), "doc/1", "--expect-sha256", before, input="x").code == 4
    assert target.read_text() == "- one\n", "no claim: untouched"

    assert cli("acquire", "doc/1").code == 0
    wrong = cli("replace-file", str(target), "doc/1", "--expect-sha256", "0" * 64, input="x")
    assert wrong.code == 6 and target.read_text() == "- one\n"
    got = cli(
        "replace-file",
        str(target),
        "doc/1",
        "--expect-sha256",
        before,
        "--json",
        input="- one\n- two\n",
    )
    assert got.code == 0 and got.json["sha256"] == sha(target)
    assert target.read_text() == "- one\n- two\n"
    assert (target.stat().st_mode & 0o777) == 0o640, "the file keeps its mode"
    assert cli("replace-file", str(target), "doc/1", "--expect-absent", input="x").code == 6

    fresh = repo / "new.txt"
    source = repo / "source.txt"
    source.write_text("from a file\n")
    assert (
        cli("replace-file", str(fresh), "doc/1", "--expect-absent", "--from", str(source)).code == 0
    )
    assert fresh.read_text() == "from a file\n"
    assert not [p for p in repo.iterdir() if p.name.endswith(".gitlease")], "no temp files left"


def test_replace_file_race_has_one_winner(cli, repo: Path) -> None:
    target = repo / "shared.txt"
    target.write_text("v0\n")
    expected = sha(target)
    assert cli("acquire", "doc/2").code == 0
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gitlease",
                "replace-file",
                str(target),
                "doc/2",
                "--expect-sha256",
                expected,
            ],
            cwd=repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(6)
    ]
    for i, p in enumerate(procs):
        p.stdin.write(f"writer {i}\n".encode())
        p.stdin.close()
    codes = sorted(p.wait(timeout=60) for p in procs)
    assert codes == [0, 6, 6, 6, 6, 6]
    assert target.read_text().startswith("writer ")


def test_library_replace_file(store, repo: Path) -> None:
    import gitlease

    gitlease.acquire(store, "doc/3", bind=False)
    digest = gitlease.replace_file(
        store, repo / "a.txt", b"hi", expect_absent=True, resource="doc/3"
    )
    assert digest == hashlib.sha256(b"hi").hexdigest()
    assert os.environ.get("GITLEASE_GUARD") is None


def test_kill_minus_nine_of_exec_frees_the_resource_within_ttl(cli, repo: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "exec", "job/9", "--ttl", "10s", "--",
         "sleep", "59.123"],
        cwd=repo,
    )  # fmt: skip
    wait_state(cli, "job/9", "active")
    assert cli("acquire", "job/9").code == 3
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    last = cli("show", "job/9", "--json").json  # exec is dead: no heartbeat after this one
    # its TTL (10 s) later, on a boot clock moved on rather than after a sleep: lapsed
    later = clock_ahead(11)
    lapsed = cli("show", "job/9", "--json", env=later).json
    assert lapsed["state"] == "expired", lapsed
    assert (lapsed["claim_id"], lapsed["revision"]) == (last["claim_id"], last["revision"])
    assert lapsed["expires_at"] == last["expires_at"], "nothing renewed it after the kill"
    assert cli("show", "job/9", "--json").json["oid"] == last["oid"], "nor since"
    got = cli("acquire", "job/9", "--json", env=later)
    assert got.code == 0, got
    subprocess.run(["pkill", "-f", "sleep 59.123"], check=False)  # the orphan


def test_the_guard_excludes_other_threads_of_the_same_process(store) -> None:
    import threading

    from gitlease.errors import HeldError
    from gitlease.model.refname import encode

    ref = encode("job/threads")
    inside = threading.Event()
    release = threading.Event()
    outcome: list[str] = []

    def holder() -> None:
        with store.guard(ref):
            inside.set()
            release.wait(10)

    def contender() -> None:
        try:
            with store.guard(ref, wait=0.3):
                outcome.append("entered")
        except HeldError:
            outcome.append("held")

    t = threading.Thread(target=holder)
    t.start()
    inside.wait(5)
    c = threading.Thread(target=contender)
    c.start()
    c.join()
    release.set()
    t.join()
    assert outcome == ["held"]
    with store.guard(ref), store.guard(ref):  # re-entrant within one thread
        pass


def test_nested_exec_keeps_the_outer_claims_usable(cli, repo: Path) -> None:
    inner = f"{gitlease_cmd()} heartbeat job/outer && {gitlease_cmd()} check job/inner"
    got = cli(
        "exec",
        "job/outer",
        "--",
        *gitlease_cmd().split(),
        "exec",
        "job/inner",
        "--",
        "sh",
        "-c",
        inner,
    )
    assert got.code == 0, got


def test_execute_from_a_thread_runs_the_command(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gitlease.execute`` called from a worker thread (a server, an agent framework) set
    signal handlers, which Python allows in the main thread only: ValueError, and the command
    never ran. Off the main thread it forwards no signal (none reaches that thread)."""
    import gitlease
    from gitlease.store.location import open_store

    monkeypatch.chdir(repo)
    marker = repo.parent / "ran"
    out: dict[str, object] = {}

    def work() -> None:
        try:
            out["result"] = gitlease.execute(open_store(), ["touch", str(marker)], "pl/thread")
        except BaseException as exc:  # (what it raised is the failure)
            out["error"] = exc

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(60)
    assert "error" not in out, out["error"]
    assert marker.exists()
