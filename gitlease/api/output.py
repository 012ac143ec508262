"""For a program that prints what gitlease returns (the CLI, or a program of yours).

Records can be forged and processes can give themselves any name, so no text from them
reaches a terminal as it is: a field on one line goes through :func:`printable` (control
characters become visible escapes), a whole output for people through :func:`visible`
(invisible format characters too). Durations are written as people read them
(:func:`format_duration`: ``12m 30s``). A long document (``list --json`` of 100,000 claims)
is built with the cycle collector held (:func:`gc_paused`), and a program prints
:func:`switch_warnings` first, so that a test-only switch never changes a decision silently.

Cheap to import: the CLI imports it on every start.
"""

from __future__ import annotations

from .._util.testing import warnings as switch_warnings
from .._util.text import escape_invisible, is_invisible, printable, visible
from .._util.value import gc_paused
from ..model.clock import format_duration

__all__ = [
    "escape_invisible",
    "format_duration",
    "gc_paused",
    "is_invisible",
    "printable",
    "switch_warnings",
    "visible",
]
