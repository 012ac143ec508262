"""The command line: a thin layer of click commands over the library."""

from __future__ import annotations

from .app import cli, main

__all__ = ["cli", "main", "run"]


def run() -> None:
    """Console-script entry point."""
    raise SystemExit(main())
