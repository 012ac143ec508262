"""One keeper per user and host keeps every claim kept alive (issue 33): one process for
many claims, each still renewed only while its own watched process lives, every claim
lapsing when the keeper is killed, and the next keepalive starting another keeper. Its
folder is private and it talks to its own user only.

Real processes: the watched agents are ``sleep`` processes, the keeper is the real detached
process, and every verdict comes from ``gitlease show``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import wait_for
from keeping import alive as _alive
from keeping import assert_lapses, keep, kill_strays, lapses, show
from keeping import registered as _registered

from gitlease._util import procs as _procs
from gitlease.state import keeperlink


@pytest.fixture(autouse=True)
def no_stray_keeper(repo: Path) -> Iterator[None]:
    """Whatever a test leaves running is killed: a keeper watching pytest would live on."""
    yield
    kill_strays(repo)


@pytest.fixture
def sleeper() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def _sleep(started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["sleep", "600"])
    started.append(proc)
    return proc


def _folder() -> Path:
    return keeperlink.folder()


def test_one_keeper_keeps_every_claim_each_while_its_own_agent_lives(
    cli, repo, worktrees, sleeper
) -> None:
    a, b = worktrees
    agent_a, agent_b = _sleep(sleeper), _sleep(sleeper)
    _, kept_a = keep(lambda *args, **kw: cli(*args, cwd=a, **kw), "kk/a", agent_a.pid)
    _, kept_b = keep(lambda *args, **kw: cli(*args, cwd=b, **kw), "kk/b", agent_b.pid)
    _, kept_c = keep(cli, "kk/c", agent_b.pid)
    pids = {k["keepalive"]["pid"] for k in (kept_a, kept_b, kept_c)}
    assert len(pids) == 1, pids  # one process for the three
    (pid,) = pids
    assert _procs.cmdline(pid)[-2:][0] == "gitlease-keeper", _procs.cmdline(pid)
    assert len(_registered(repo)) == 3
    # agent A ends: its claim lapses, B's two are still kept by the same keeper
    agent_a.kill()
    agent_a.wait()
    log_a = Path(kept_a["keepalive"]["log"])
    wait_for(lambda: "stopped:" in log_a.read_text(), what="the keeping of kk/a stopped")
    lapses(lambda *args, **kw: cli(*args, cwd=a, **kw), "kk/a")
    assert show(cli, "kk/b")["state"] == "active"
    assert show(cli, "kk/b")["keepalive"]["pid"] == pid and _alive(pid)
    assert "the watched process" in Path(kept_a["keepalive"]["log"]).read_text()
    # releasing one keeps the keeper for the other; releasing the last ends it
    assert cli("release", "kk/b", cwd=b).code == 0
    assert "told to stop" in Path(kept_b["keepalive"]["log"]).read_text()
    assert _alive(pid) and show(cli, "kk/c")["keepalive"]["pid"] == pid
    assert cli("release", "kk/c").code == 0
    assert not _alive(pid)  # release waited for it: it kept nothing more
    assert _registered(repo) == []
    assert not [p for p in _folder().iterdir() if p.suffix == ".sock"]


def test_kill_9_of_the_keeper_lets_every_claim_lapse_and_the_next_keepalive_starts_another(
    cli, repo, sleeper
) -> None:
    agent = _sleep(sleeper)
    _, one = keep(cli, "kk/1", agent.pid)
    _, two = keep(cli, "kk/2", agent.pid)
    pid = one["keepalive"]["pid"]
    assert two["keepalive"]["pid"] == pid
    os.kill(pid, signal.SIGKILL)
    for resource in ("kk/1", "kk/2"):
        doc = assert_lapses(cli, resource, pid)
        assert doc["keepalive"] is None  # its entries stay, a dead keeper is never reported
    wait_for(lambda: not _alive(pid), what="the killed keeper gone")
    # its socket is still there, nobody listening: the next keepalive starts a new keeper
    _, three = keep(cli, "kk/3", agent.pid)
    new = three["keepalive"]["pid"]
    assert new != pid and _alive(new)
    from conftest import wait_renewed

    wait_renewed(cli, "kk/3", show(cli, "kk/3"))
    assert show(cli, "kk/3")["keepalive"]["pid"] == new


def test_a_signal_to_the_keeper_leaves_every_claim_to_expire(cli, repo, sleeper) -> None:
    agent = _sleep(sleeper)
    _, one = keep(cli, "kk/s1", agent.pid)
    _, two = keep(cli, "kk/s2", agent.pid)
    pid = one["keepalive"]["pid"]
    os.kill(pid, signal.SIGTERM)
    for kept, resource in ((one, "kk/s1"), (two, "kk/s2")):
        assert_lapses(cli, resource, pid)
        assert "told to stop (by a signal)" in Path(kept["keepalive"]["log"]).read_text()
    assert _registered(repo) == []


def test_the_keeper_folder_is_private_and_a_public_one_is_refused(cli, repo, sleeper) -> None:
    agent = _sleep(sleeper)
    _, _kept = keep(cli, "kk/p", agent.pid)
    folder = _folder()
    assert folder.stat().st_mode & 0o777 == 0o700 and folder.stat().st_uid == os.geteuid()
    sockets = [p for p in folder.iterdir() if p.suffix == ".sock"]
    assert len(sockets) == 1 and sockets[0].stat().st_mode & 0o777 == 0o600
    assert cli("release", "kk/p").code == 0
    folder.chmod(0o777)  # someone else could put a socket in the way
    try:
        assert cli("acquire", "kk/q", "--ttl", "1m").code == 0
        refused = cli("keepalive", "kk/q", "--while-pid", str(agent.pid))
        assert refused.code == 7, refused
        assert "not this user's alone" in refused.err and "Traceback" not in refused.err
    finally:
        folder.chmod(0o700)
    assert cli("release", "kk/q").code == 0


def test_a_keeper_answers_its_own_user_only(cli, repo, sleeper) -> None:
    """Another user's process that reaches the socket is never served, and a socket that
    another user's process serves is never trusted (SO_PEERCRED on both sides)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run a process as another user")
    agent = _sleep(sleeper)
    _, kept = keep(cli, "kk/u", agent.pid)
    (sock,) = [p for p in _folder().iterdir() if p.suffix == ".sock"]
    public = Path(tempfile.mkdtemp())  # a second name for the socket, that nobody can reach
    public.chmod(0o755)
    os.link(sock, public / "k.sock")
    sock.chmod(0o666)
    try:
        probe = (
            "import os, socket, json\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            f"s.connect({str(public / 'k.sock')!r})\n"
            "try:\n"
            "    s.sendall(json.dumps({'op': 'status', 'v': 1}).encode() + b'\\n')\n"
            "    print(repr(s.recv(100)))\n"
            "except (ConnectionResetError, BrokenPipeError):\n"
            "    print(repr(b''))\n"
        )
        got = subprocess.run(["python3", "-c", probe], capture_output=True, text=True)
        assert got.returncode == 0, got.stderr
        assert got.stdout.strip() == "b''", got.stdout  # hung up on, never answered
    finally:
        sock.chmod(0o600)
        shutil.rmtree(public)
    assert show(cli, "kk/u")["keepalive"]["pid"] == kept["keepalive"]["pid"]
    # the other way: a socket served by another user's process is not a keeper
    fake = Path(tempfile.mkdtemp())
    fake.chmod(0o777)
    server = (
        "import os, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.bind({str(fake / 'k.sock')!r})\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s.listen(1)\n"
        "print('listening', flush=True)\n"
        "c, _ = s.accept()\n"
        "c.sendall(b'{\"keeper\": null}\\n')\n"
        "c.recv(100)\n"
    )
    other = subprocess.Popen(["python3", "-c", server], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "listening"
        with pytest.raises(keeperlink.NoKeeper):
            keeperlink.request(fake / "k.sock", {"op": "status"}, timeout=10)
    finally:
        other.kill()
        other.wait()
        shutil.rmtree(fake)


def test_a_keeper_status_names_what_it_keeps(cli, repo, sleeper) -> None:
    agent = _sleep(sleeper)
    _, kept = keep(cli, "kk/st", agent.pid)
    (sock,) = [p for p in _folder().iterdir() if p.suffix == ".sock"]
    status = keeperlink.request(sock, {"op": "status"})
    assert status["pid"] == kept["keepalive"]["pid"]
    assert [e["claims"][0][0] for e in status["keeping"]] == ["kk/st"]
    assert "glt_" not in json.dumps(status)
    with socket.socket(socket.AF_UNIX) as s:  # nonsense is answered with an error
        s.connect(str(sock))
        s.sendall(b"not json\n")
        answer = json.loads(s.makefile().readline())
    assert answer["error"]["code"] == "USAGE"
    assert cli("release", "kk/st").code == 0
