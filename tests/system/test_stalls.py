"""A real gitlease process stopped at an exact moment (a test-only pause point,
gitlease/_testing.py), while the test acts: a claim taken, a signal sent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TESTING, run_cli, store_git, store_path

from gitlease.model.refname import encode
from gitlease.receipts.bindings import bindings

R = "stall/1"


class Paused:
    """A CLI process started so that it stops at ``point`` until :meth:`go`."""

    def __init__(
        self, point: str, args: list[str], cwd: Path, tmp: Path, *, module: bool = True
    ) -> None:
        self.dir = tmp / f"pause-{point}"
        self.dir.mkdir()
        self.point = point
        env = {
            **os.environ,
            **TESTING,
            "GITLEASE_TESTING_PAUSE": point,
            "GITLEASE_TESTING_PAUSE_DIR": str(self.dir),
        }
        self.proc = subprocess.Popen(
            [sys.executable, *(["-m", "gitlease"] if module else []), *args],
            cwd=cwd,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def wait_paused(self) -> None:
        """Wait (on the file, not on time) until the process stands at its pause point."""
        marker = self.dir / f"{self.point}.paused"
        deadline = time.monotonic() + 120  # a failure bound only, never a margin
        while not marker.exists():
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(f"exited {self.proc.returncode} before its pause: {out} {err}")
            assert time.monotonic() < deadline, "never reached its pause point"
            time.sleep(0.01)

    def go(self) -> tuple[int, str, str]:
        (self.dir / f"{self.point}.go").write_text("")
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, err


@pytest.mark.parametrize("command", [["verify", "--repair"], ["prune"]])
def test_a_stalled_repair_keeps_the_receipt_of_a_claim_taken_meanwhile(
    command: list[str], repo: Path, tmp_path: Path
) -> None:
    """Issue 29.7: the snapshot the orphan check judged by was taken before the claim; a
    stall past the receipt's youth (its mtime set back, as a long SIGSTOP would leave it)
    made the repair remove the new claim's receipt: it could no longer heartbeat."""
    assert run_cli("acquire", R, "--no-bind", cwd=repo).code == 0
    assert run_cli("release", R, cwd=repo).code == 0
    stalled = Paused("orphan-receipts", command, repo, tmp_path)
    stalled.wait_paused()
    got = run_cli("acquire", R, "--no-bind", "--json", cwd=repo)
    assert got.code == 0, got
    receipt = Path(got.json["receipt"])
    long_ago = time.time() - 3600
    os.utime(receipt, (long_ago, long_ago))  # the stall lasted an hour
    code, out, err = stalled.go()
    assert receipt.exists(), f"{command} (exit {code}) removed a live claim's receipt: {out} {err}"
    beat = run_cli("heartbeat", R, cwd=repo)
    assert beat.code == 0, beat
    assert run_cli("release", R, cwd=repo).code == 0


@pytest.mark.parametrize(
    ("command", "signum"),
    [
        (["acquire", R], signal.SIGTERM),
        (["acquire", R], signal.SIGINT),
        (["bundle", "acquire", R, "stall/2"], signal.SIGTERM),
        (["acquire", "--first-free", "stall/0", R], signal.SIGINT),
        (["acquire", R], signal.SIGHUP),
    ],
)
def test_a_signal_after_the_write_leaves_no_claim_behind_its_exit_code(
    command: list[str], signum: int, worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    """Issue 29.11: SIGINT or SIGTERM right after the write ended the acquire with 130/143
    while the claim stayed held and bound. Now the claim is released again under its guard
    (exit 128+N, nothing held, nothing bound), or the exit is 5 naming it."""
    wt, other = worktrees
    if "--first-free" in command:
        assert run_cli("acquire", "stall/0", "--no-bind", cwd=other).code == 0
    paused = Paused("after-write", command, wt, tmp_path)
    paused.wait_paused()
    paused.proc.send_signal(signum)
    code, out, err = paused.go()
    if code == 5:
        assert "claim" in err and R in err, err
        return
    assert code == 128 + signum, (code, out, err)
    shown = run_cli("show", R, "--json", cwd=wt).json
    assert shown["state"] != "active", f"exit {code}, yet the claim is held: {shown}"
    assert run_cli("acquire", R, "--no-bind", cwd=other).code == 0, "the claim was left behind"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_between_execs_acquire_and_its_command_starts_nothing_and_releases(
    signum: int, repo: Path, tmp_path: Path
) -> None:
    """``exec`` forwards a signal to its command once the command runs; one that came after
    exec's own acquire wrote the claim, before the command started, killed exec with the
    claim held until its TTL (an exit of 143 with a live claim). Now the command is never
    started, the claim is released, and the exit is 128+N."""
    ran = tmp_path / "ran"
    paused = Paused("after-write", ["exec", R, "--", "touch", str(ran)], repo, tmp_path)
    paused.wait_paused()
    paused.proc.send_signal(signum)
    code, out, err = paused.go()
    assert code == 128 + signum, (code, out, err)
    assert not ran.exists(), "the command started after the signal"
    shown = run_cli("show", R, "--json", cwd=repo).json
    assert shown["state"] != "active", f"exit {code}, yet the claim is held: {shown}"


@pytest.mark.parametrize(
    ("command", "signum"),
    [
        (["release", R, "--checkpoint", "done"], signal.SIGINT),
        (["release", R], signal.SIGTERM),
        (["heartbeat", R, "--ttl", "20m"], signal.SIGTERM),
        (["heartbeat", R], signal.SIGHUP),
        (["bundle", "release", "--checkpoint", "done"], signal.SIGINT),
        (["bundle", "heartbeat"], signal.SIGTERM),
    ],
)
def test_a_signal_while_an_owned_write_lands_is_answered_by_what_the_store_holds(
    command: list[str], signum: int, repo: Path, tmp_path: Path
) -> None:
    """A heartbeat or a release that a signal met after its write landed exited 130, 143 or
    129 (``interrupted``) while the store held the renewal or the release, and a release left
    this worktree bound to the released claim with its token in the receipt. Now the signal
    waits for the write and what follows it; the answer is the write's: exit 0, and true."""
    bundle = command[0] == "bundle"
    taken = ["bundle", "acquire", R, "stall/2"] if bundle else ["acquire", R]
    got = run_cli(*taken, "--ttl", "10m", "--json", cwd=repo)
    assert got.code == 0, got
    receipt = Path(got.json["receipt"])
    expires = (got.json["claims"][0] if bundle else got.json)["expires_at"]
    paused = Paused("after-owned-write", command, repo, tmp_path)
    paused.wait_paused()
    paused.proc.send_signal(signum)
    code, out, err = paused.go()
    assert code == 0, (code, out, err)
    assert "came while" in err, err  # (said, not hidden)
    shown = run_cli("show", R, "--json", cwd=repo).json
    if "release" in command:
        assert shown["state"] == "released", shown
        kept = json.loads(receipt.read_text())["token"] is not None  # (never printed)
        assert not kept, "the released token stayed"
        left = [b for b in bindings(repo / ".git") if not isinstance(b, Path)]
        assert not left, f"still bound to the released claims: {left}"
    else:
        assert shown["state"] == "active" and shown["expires_at"] > expires, shown
        assert run_cli("check", R, cwd=repo).code == 0


def _interrupted_after_the_release(program: str, repo: Path, tmp_path: Path) -> None:
    """Run ``program`` (Python that releases R, or undoes an acquire of it, and prints the
    name of what it caught) stopped right after its release's write, Ctrl-C it there: it
    must catch a KeyboardInterrupt, and R be released."""
    paused = Paused("after-owned-write", ["-c", program], repo, tmp_path, module=False)
    paused.wait_paused()
    paused.proc.send_signal(signal.SIGINT)
    code, out, err = paused.go()
    assert (code, out.strip()) == (0, "KeyboardInterrupt"), (code, out, err)
    assert run_cli("show", R, "--json", cwd=repo).json["state"] == "released"


def test_a_signal_that_meets_a_library_release_acts_once_its_bookkeeping_is_done(
    repo: Path, tmp_path: Path
) -> None:
    """In a program of its own (no CLI to answer for it), Ctrl-C during ``release`` is still
    a KeyboardInterrupt, as Python programs expect; it now comes once the release and its
    bookkeeping are done, never between them (the worktree left bound to a released claim,
    the token left in the receipt)."""
    got = run_cli("acquire", R, "--json", cwd=repo)
    assert got.code == 0, got
    receipt = Path(got.json["receipt"])
    program = (
        "import gitlease\n"
        "from gitlease.api.lease import release\n"
        "try:\n"
        f"    release(gitlease.open_store(), {R!r})\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt')\n"
    )
    _interrupted_after_the_release(program, repo, tmp_path)
    kept = json.loads(receipt.read_text())["token"] is not None  # (never printed)
    assert not kept, "the released token stayed"
    assert not [b for b in bindings(repo / ".git") if not isinstance(b, Path)]


def test_a_signal_that_meets_an_acquires_undo_after_it_landed_is_no_ambiguity(
    repo: Path, tmp_path: Path
) -> None:
    """A library acquire that failed after its write (here a Ctrl-C while binding) releases
    the claim again; a second Ctrl-C that met that release once it landed was reported as
    AMBIGUOUS, "stays active until it expires", while the store said released (review of the
    hold, finding 4). Now the KeyboardInterrupt comes through, and nothing is held."""
    program = (
        "import gitlease\n"
        "from gitlease.api import lease\n"
        "from gitlease.claims import bookkeeping\n"
        "def binding(*a, **k):\n"
        "    raise KeyboardInterrupt('the first Ctrl-C, while binding')\n"
        "bookkeeping.bind_all = binding\n"
        "try:\n"
        f"    lease.acquire(gitlease.open_store(), {R!r})\n"
        "except BaseException as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    _interrupted_after_the_release(program, repo, tmp_path)


class _Stderr:
    """A process's stderr, read by a thread as it comes, so that a test can wait for a line
    and a process that never says it fails the test instead of hanging it."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        import queue
        import threading

        assert proc.stderr is not None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.said: list[str] = []
        stream = proc.stderr

        def read() -> None:
            for line in iter(stream.readline, ""):
                self._lines.put(line)
            self._lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def until(self, text: str) -> None:
        import queue

        while not any(text in line for line in self.said):
            try:
                line = self._lines.get(timeout=120)  # a failure bound only, never a margin
            except queue.Empty:
                pytest.fail(f"never said {text!r}: {self.said}")
            if line is None:
                pytest.fail(f"ended without saying {text!r}: {self.said}")
            self.said.append(line)

    def rest(self) -> str:
        """Everything it said, once it has ended."""
        while (line := self._lines.get(timeout=120)) is not None:
            self.said.append(line)
        return "".join(self.said)


def _remote(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A bare remote, and the environment that points gitlease at it."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    env = {**os.environ, **TESTING, "GITLEASE_REMOTE": f"file://{remote}",
           "GITLEASE_REMOTE_TIMEOUT": "600"}  # fmt: skip
    return env, remote


def _hang_pushes(remote: Path, tmp_path: Path) -> tuple[Path, Path]:
    """From now on a push to ``remote`` touches ``inside`` at the server, then waits there
    while ``hang`` exists: (``hang``, ``inside``)."""
    hang, inside = tmp_path / "hang", tmp_path / "inside"
    hang.write_text("")
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f'#!/bin/sh\ntouch "{inside}"\nwhile [ -e "{hang}" ]; do sleep 0.05; done\n')
    hook.chmod(0o755)
    return hang, inside


def _until_pushing(proc: subprocess.Popen[str], inside: Path) -> float:
    """Wait until ``proc``'s push is at the server (its write in flight); the deadline that
    bounds the rest of the test (a failure bound only, never a margin)."""
    deadline = time.monotonic() + 120
    while not inside.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the push never reached the server"
        time.sleep(0.01)
    return deadline


@pytest.mark.parametrize(
    ("command", "signum"),
    [(["heartbeat", R], signal.SIGINT), (["release", R], signal.SIGTERM),
     (["bundle", "heartbeat"], signal.SIGHUP)],
)  # fmt: skip
def test_a_second_signal_stops_an_owned_write_whose_push_hangs_as_ambiguous(
    command: list[str], signum: int, repo: Path, tmp_path: Path
) -> None:
    """Through a remote that does not answer, the hold over a heartbeat's or a release's write
    lasted up to the network timeout, however many times the signal came (review of the hold,
    finding 2). The first signal now says the write is being finished; a second stops the
    command at once, AMBIGUOUS: the push may or may not have landed (a second SIGTERM or
    SIGHUP too, where the default would have killed it with the outcome unsaid)."""
    env, remote = _remote(tmp_path)
    taken = ["bundle", "acquire", R, "stall/2"] if command[0] == "bundle" else ["acquire", R]
    assert run_cli(*taken, "--ttl", "10m", cwd=repo, env=env).code == 0
    hang, inside = _hang_pushes(remote, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", *command],
        cwd=repo,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _until_pushing(proc, inside)
        stderr = _Stderr(proc)
        proc.send_signal(signum)
        stderr.until("finishing the write first")
        proc.send_signal(signum)
        proc.wait(timeout=120)
        err = stderr.rest()
        out = proc.stdout.read() if proc.stdout else ""
    finally:
        hang.unlink()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 5, (proc.returncode, out, err)
    assert "second signal" in err and "may or may not" in err, err


def test_a_tombstone_written_between_judging_and_removing_stays(repo: Path, tmp_path) -> None:
    """The pass judges every old tombstone and writes their floors before it removes any:
    a claim taken in between (the stall) keeps its ref, its record and its revision."""
    assert run_cli("acquire", R, "--no-bind", cwd=repo).code == 0
    assert run_cli("release", R, cwd=repo).code == 0
    stalled = Paused("prune-tombstones", ["prune", "--older-than", "0s", "--json"], repo, tmp_path)
    stalled.wait_paused()
    taken = run_cli("acquire", R, "--no-bind", "--json", cwd=repo)
    assert taken.code == 0 and taken.json["revision"] == 2, taken
    code, out, err = stalled.go()
    assert code == 0, (out, err)
    assert json.loads(out)["pruned"] == [], out
    shown = run_cli("show", R, "--json", cwd=repo).json
    assert shown["state"] == "active" and shown["claim_id"] == taken.json["claim_id"], shown
    assert run_cli("release", R, cwd=repo).code == 0
    assert run_cli("acquire", R, "--no-bind", "--json", cwd=repo).json["revision"] == 3
    assert run_cli("verify", cwd=repo).code == 0


def test_a_ref_moved_by_hand_while_the_pass_removes_it_stays(repo: Path, tmp_path) -> None:
    """The removal is a compare-and-swap on the tombstone that was judged: a ref that a
    hand-run git moved meanwhile (git takes no guard of gitlease's) is not removed."""
    assert run_cli("acquire", R, "--no-bind", cwd=repo).code == 0
    assert run_cli("release", R, cwd=repo).code == 0
    ref = encode(R)
    stalled = Paused("prune-remove", ["prune", "--older-than", "0s", "--json"], repo, tmp_path)
    stalled.wait_paused()
    acquired = (store_path(repo) / "logs" / ref).read_text().splitlines()[0].split(" ")[1]
    store_git("update-ref", ref, acquired, cwd=repo)  # back to the acquire's record
    code, out, err = stalled.go()
    assert code == 0, (out, err)
    assert json.loads(out)["pruned"] == [], out
    assert store_git("rev-parse", ref, cwd=repo).stdout.strip() == acquired


def _blocked_writing_stdout(pid: int) -> bool:
    """Whether ``pid`` sleeps in a write to a full pipe (its kernel wait channel, or, where
    that is hidden, the system call it is in: write, on fd 1)."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
        syscall = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    write_nr = {"x86_64": "1", "aarch64": "64"}.get(os.uname().machine)
    return "pipe_write" in wchan or syscall[:2] == [write_nr, "0x1"]


@pytest.mark.parametrize(
    ("command", "signum"),
    [(["heartbeat", R, "--json"], signal.SIGTERM), (["release", R, "--json"], signal.SIGINT)],
)
def test_a_third_signal_while_the_ambiguous_answer_is_written_exits_with_it(
    command: list[str], signum: int, repo: Path, tmp_path: Path
) -> None:
    """After a second signal stopped an owned write (AMBIGUOUS), the answer goes to stdout; a
    stdout that nobody reads (a full pipe) held the process there, and a third signal then
    ended it with 143 or 130, an exit that contradicts the answer already decided (noticed in
    the review of the hold). Now the third signal ends it with 5 at once, saying so."""
    import fcntl

    env, remote = _remote(tmp_path)
    assert run_cli("acquire", R, "--ttl", "10m", cwd=repo, env=env).code == 0
    hang, inside = _hang_pushes(remote, tmp_path)
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 4096)  # F_SETPIPE_SZ: one page
    os.set_blocking(write_end, False)
    with pytest.raises(BlockingIOError):
        while True:  # fill it: the command's answer will find no room
            os.write(write_end, b"x" * 4096)
    os.set_blocking(write_end, True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", *command],
        cwd=repo,
        env=env,
        text=True,
        stdout=write_end,
        stderr=subprocess.PIPE,
    )
    os.close(write_end)
    try:
        deadline = _until_pushing(proc, inside)
        stderr = _Stderr(proc)
        proc.send_signal(signum)
        stderr.until("finishing the write first")
        proc.send_signal(signum)  # AMBIGUOUS: its document meets the full pipe
        while not _blocked_writing_stdout(proc.pid):
            assert proc.poll() is None, (proc.returncode, stderr.rest())
            assert time.monotonic() < deadline, "the answer was never written"
            time.sleep(0.01)
        proc.send_signal(signum)
        proc.wait(timeout=120)
        err = stderr.rest()
    finally:
        hang.unlink()
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 5, (proc.returncode, err)
    assert "the answer stands: exit 5" in err, err
