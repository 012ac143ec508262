"""Two "hosts" on one machine, coordinating through one git remote (docs/remote.md).

A host is a clone of the shared bare repository with ``gitlease.remote`` set to
its ``origin``. Host B also plays another machine: another boot id and a boot
clock seven days off (``GITLEASE_TESTING_BOOT_ID`` / ``..._OFFSET_MS``), so its
records cannot be judged on host A's clock, nor A's on B's. The remote is
reached over ``file://`` or through a real ``git daemon`` on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import TESTING, git, make_repo

HOST_B_BOOT_ID = "b0000000-0000-4000-8000-00000000000b"
HOST_B_OFFSET_MS = 7 * 86_400_000
#: Host B's environment. Its own XDG_STATE_HOME too: what gitlease keeps per user there
#: must not be shared between two hosts (host A uses the test run's, see conftest.py).
HOST_B_ENV = {
    **TESTING,  # (the switches count only with it)
    "GITLEASE_TESTING_BOOT_ID": HOST_B_BOOT_ID,
    "GITLEASE_TESTING_BOOT_OFFSET_MS": str(HOST_B_OFFSET_MS),
    "XDG_STATE_HOME": str(Path(os.environ["HOME"]) / "host-b" / "state"),
}
#: boot id -> how far that host's boot clock is from the real one (for the history checker)
BOOT_OFFSETS = {HOST_B_BOOT_ID: HOST_B_OFFSET_MS}


def make_server(base: Path) -> Path:
    """The shared bare repository (the coordinator), with one commit to clone."""
    seed = make_repo(base / "seed")
    server = base / "server.git"
    git("clone", "-q", "--bare", str(seed), str(server), cwd=base)
    return server


def make_host(url: str, path: Path) -> Path:
    """A clone acting as one host, coordinating through ``origin``.

    On one machine, clones of one origin would share one store (docs/reference/store.md);
    each "host" keeps its store in its own ``.git`` instead (``gitlease.store``), as two
    machines would.
    """
    git("clone", "-q", url, str(path), cwd=path.parent)
    git("config", "gitlease.remote", "origin", cwd=path)
    git("config", "gitlease.store", str(path / ".git"), cwd=path)
    return path


@contextlib.contextmanager
def git_daemon(base: Path, *, keep_pid: bool = False) -> Iterator[str]:
    """A real ``git daemon --enable=receive-pack`` on 127.0.0.1 serving ``base``.

    ``keep_pid``: its process id is written to ``base/git-daemon.pid`` (to stop it with
    SIGSTOP: a server that accepts connections and never answers)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--listen=127.0.0.1",
            f"--port={port}",
            f"--base-path={base}",
            "--export-all",
            "--enable=receive-pack",
            "--informative-errors",
            str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("git daemon did not start") from None
                time.sleep(0.05)
        if keep_pid:  # the daemon itself: `git daemon` runs git-daemon as its child
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            (base / "git-daemon.pid").write_text(children[0] if children else str(proc.pid))
        yield f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
