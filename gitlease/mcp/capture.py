"""Each tool call's own stdout: the command's ``--json`` document is caught, not printed.

The CLI writes its answer to ``sys.stdout``. While the server runs, ``sys.stdout`` is a
:class:`ThreadStdout`: a call running in a thread of its own writes into that
thread's buffer (so two calls at once never mix their documents), and anything
else written to it goes to the fallback stream. The protocol never goes through
``sys.stdout``: the SDK's stdio transport writes to a private copy of fd 1 and
points fd 1 itself at stderr while it serves, so a stray write cannot corrupt it.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Iterator
from typing import TextIO


class ThreadStdout(io.TextIOBase):
    """A text stream that writes to the current thread's buffer, if it has one."""

    def __init__(self, fallback: TextIO) -> None:
        super().__init__()
        self._fallback = fallback
        self._local = threading.local()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def _target(self) -> TextIO:
        buffer: io.StringIO | None = getattr(self._local, "buffer", None)
        return buffer if buffer is not None else self._fallback

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    @contextlib.contextmanager
    def capture(self) -> Iterator[io.StringIO]:
        """Catch what this thread writes until the block ends."""
        buffer = io.StringIO()
        self._local.buffer = buffer
        try:
            yield buffer
        finally:
            self._local.buffer = None


@contextlib.contextmanager
def installed() -> Iterator[ThreadStdout]:
    """``sys.stdout`` as a :class:`ThreadStdout` for the block (the old one as fallback)."""
    old = sys.stdout
    stream = ThreadStdout(old)
    sys.stdout = stream
    try:
        yield stream
    finally:
        sys.stdout = old
