"""The command line: a thin layer of click commands over the library."""

from __future__ import annotations

from .app import cli, main

__all__ = ["cli", "main", "run"]


def run() -> None:
    """Console-script entry point."""
    code = main(final=True)
    _exit(code)
    raise SystemExit(code)


def _exit(code: int) -> None:
    """End the process now that the command is done, without the interpreter's teardown.

    Tearing down the modules a write imported (pygit2, cryptography, click and gitlease's)
    costs 15-25 ms of CPU, more than anything else a write does but its push
    (docs/performance.md): the process frees nothing the system would not. What the
    teardown does that counts is done first: the ``atexit`` handlers run and the standard
    streams are flushed. Returns (for the ordinary exit) while another thread that is not a
    daemon still runs, or when a stream cannot be flushed (the exit status is then the
    interpreter's to decide, as it always was).
    """
    import atexit
    import os
    import sys
    import threading

    if threading.active_count() > 1 and any(
        not t.daemon for t in threading.enumerate() if t is not threading.main_thread()
    ):
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)
