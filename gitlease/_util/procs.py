"""Processes as ``/proc`` shows them: who a pid is, whether it still lives, who its parent is.

A pid alone does not name a process: the kernel hands freed pids out again. A
pid together with its start time (clock ticks since boot, field 22 of
``/proc/PID/stat``) does, within one boot. The keepalive watches a process by
that pair and is found by it (docs/design.md), so neither a reused pid nor a
zombie is ever taken for the process that was meant. Linux only: where
``/proc`` cannot be read nothing is known (None), and callers say so.
"""

from __future__ import annotations

import contextlib
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from .text import masked
from .value import Value

if TYPE_CHECKING:
    from subprocess import Popen

#: The shells an agent's commands run through, by the kernel's name for the process.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh"})
#: How the installed programs are called (``pyproject.toml``'s scripts).
PROGRAMS = frozenset({"gitlease", "worklease", "git-lease"})


class Proc(Value):
    """One process: its pid, its start time (which tells it from a later owner of the pid),
    its parent, its state letter (``R``, ``S``, ``Z``...) and the kernel's name for it."""

    __slots__ = ("pid", "start", "ppid", "state", "name")
    pid: int
    start: int
    ppid: int
    state: str
    name: str

    @property
    def alive(self) -> bool:
        """Whether it had not ended when it was read (a zombie has ended)."""
        return self.state not in ("Z", "X", "x")


def inspect(pid: int) -> Proc | None:
    """The process with this pid now, or None (no such process, or no ``/proc``)."""
    if pid <= 0:
        return None
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # "pid (name) state ppid ...": the name may hold spaces and parentheses, so split
    # at the last ")"
    head, _, tail = raw.rpartition(b")")
    fields = tail.split()
    try:
        return Proc(
            pid,
            int(fields[19]),
            int(fields[1]),
            fields[0].decode("ascii", "replace"),
            masked(head.partition(b"(")[2].decode("utf-8", "replace")),
        )
    except (IndexError, ValueError):
        return None


def alive(pid: int, start: int) -> bool:
    """Whether the process ``(pid, start)`` still runs (not a later process with its pid)."""
    proc = inspect(pid)
    return proc is not None and proc.start == start and proc.alive


def cmdline(pid: int) -> list[str]:
    """The process's arguments ([] if they cannot be read, or for a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]] if raw else []


def is_gitlease(proc: Proc) -> bool:
    """Whether the process runs gitlease: one of its programs (``gitlease``, ``worklease``,
    ``git-lease``, also through a launcher such as ``uv run gitlease`` or ``timeout 60
    gitlease``), ``python -m gitlease``, or ``git lease`` (git running ``git-lease``)."""
    if proc.name in PROGRAMS:
        return True
    argv = cmdline(proc.pid)
    for i, arg in enumerate(argv):
        if os.path.basename(arg) in PROGRAMS:
            return True
        if arg == "-m" and argv[i + 1 : i + 2] in (["gitlease"], ["gitlease.cli"]):
            return True
    if argv and os.path.basename(argv[0]) == "git":
        words = iter(argv[1:])
        for word in words:
            if word in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
                next(words, None)  # the option's value
            elif not word.startswith("-"):
                return word == "lease"
    return False


def agent(start_pid: int) -> Proc | None:
    """The nearest process from ``start_pid`` up that is neither a shell nor gitlease.

    That is the agent: agents often run each command through a shell that exits
    right after it. None when the walk reaches pid 0 or ``/proc`` cannot be read.
    """
    pid = start_pid
    for _ in range(256):  # parent chains are short; a loop would be a kernel bug
        proc = inspect(pid)
        if proc is None:
            return None
        if proc.name not in SHELLS and not is_gitlease(proc):
            return proc
        if proc.ppid <= 0:
            return None
        pid = proc.ppid
    return None


@cache
def boot_id() -> str:
    """The kernel's id of this boot: pids and start times mean nothing across a reboot.

    Always the kernel's own (never a test's stand-in host id): it judges processes
    on this machine, not records.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def name_process(name: bytes) -> None:
    """Show this process as ``name`` in ``ps`` (best effort; Linux only): a long-lived
    process of gitlease is found by people as what it is, not as ``python3``."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def raise_open_files_limit() -> None:
    """Raise the soft limit of open files to the hard one (at most 65,536): a keeper holds a
    few descriptors for each claim it keeps (its log, pidfd, pipe, FIFO, repository)."""
    import resource

    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 1 << 16), hard))


def start_detached(argv: list[str], env: dict[str, str], *, talk: bool = False) -> Popen[bytes]:
    """Start a process that outlives its caller and acts for no terminal: its own session, in
    ``/``, with no descriptor of the caller's but, with ``talk``, a pipe each way (a keeper
    reads its start-up from stdin and says it is ready on stdout); stderr goes nowhere.
    OSError if it cannot be started."""
    import subprocess

    pipe = subprocess.PIPE if talk else subprocess.DEVNULL
    return subprocess.Popen(
        argv,
        stdin=pipe,
        stdout=pipe,
        stderr=subprocess.DEVNULL,
        cwd="/",
        env=env,
        start_new_session=True,
        close_fds=True,
    )
