"""The command line ends its process without the interpreter's teardown (gitlease/cli/
__init__.py: 15-25 ms of CPU a command), and nothing a command leaves for the end is lost:
the ``atexit`` handlers run, the output is whole, the exit status is the command's; with a
thread that is not a daemon still running, the ordinary exit waits for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BOOT = """
import atexit, sys, threading, time
sys.argv = ["gitlease", *sys.argv[1:]]
atexit.register(lambda: open({marker!r}, "a").write("atexit\\n"))

class Teardown:
    def __del__(self):
        open({marker!r}, "a").write("teardown\\n")

kept = Teardown()  # (a module global: only the interpreter's teardown collects it)
if {thread}:
    def late():
        time.sleep(0.2)
        open({marker!r}, "a").write("thread\\n")
    threading.Thread(target=late).start()
from gitlease.cli import run
run()
"""


def _run(repo: Path, tmp_path: Path, *args: str, thread: bool = False):
    marker = tmp_path / "marker"
    marker.unlink(missing_ok=True)
    script = BOOT.format(marker=str(marker), thread=thread)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=repo, capture_output=True, text=True
    )
    said = marker.read_text().splitlines() if marker.exists() else []
    return proc, said


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("acquire", "exit/1", "--json"), 0),
        (("show", "exit/1", "--json"), 0),
        (("release", "exit/2", "--json"), 4),  # LOST: not held here
        (("bogus",), 2),
    ],
)
def test_the_exit_status_output_and_atexit_handlers_are_the_commands(
    repo: Path, tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    proc, said = _run(repo, tmp_path, *args)
    assert proc.returncode == code, proc
    if "--json" in args:
        doc = json.loads(proc.stdout)  # whole: one document
        assert ("error" in doc) == (code != 0)
    assert "Traceback" not in proc.stderr
    assert said == ["atexit"]  # the handler ran; the teardown did not


def test_a_running_thread_is_waited_for_as_before(repo: Path, tmp_path: Path) -> None:
    proc, said = _run(repo, tmp_path, "show", "exit/3", "--json", thread=True)
    assert proc.returncode == 0, proc
    assert json.loads(proc.stdout)["state"] == "free"
    assert said[:2] == ["thread", "atexit"]  # the ordinary exit: the thread, then atexit


def test_a_closed_stdout_still_exits_as_a_closed_pipe(repo: Path) -> None:
    """``gitlease list | head -0``: the exit status is 141 (as SIGPIPE), no traceback."""
    many = [f"pipe/{i}" for i in range(40)]  # (one bundle: a list longer than a pipe's buffer)
    taken = subprocess.run(
        [sys.executable, "-m", "gitlease", "bundle", "acquire", *many, "--no-bind"],
        cwd=repo,
        capture_output=True,
    )
    assert taken.returncode == 0, taken.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "list"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # nobody reads the answer
    err = proc.stderr.read().decode()
    assert proc.wait() == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_main_in_process_puts_back_the_handlers_a_decided_answer_took(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed ``release`` decides its answer inside the owned-write block, which makes a
    further signal end the process with that answer's code (docs/reference/exit-codes.md).
    ``main()`` called in a process that lives on (a test, a program) puts the old handlers
    back when it returns; only the console script (``final``) keeps them to its end."""
    import signal

    from gitlease.api import answering
    from gitlease.cli import app

    monkeypatch.chdir(repo)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        assert app.main(["release", "never/taken"]) != 0
        assert {s: signal.getsignal(s) for s in before} == before
        # an acquire's window records signals from just before its write: closed on return
        assert app.main(["acquire", "in/process", "--ttl", "1m"]) == 0
        assert {s: signal.getsignal(s) for s in before} == before
        assert app.main(["release", "in/process"]) == 0
        assert app.main(["release", "never/taken"], final=True) != 0
        kept = signal.getsignal(signal.SIGTERM)
        assert kept is not before[signal.SIGTERM] and callable(kept)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        answering.end_with(None)
