"""The command line: a thin layer of click commands over the library."""

from __future__ import annotations

from .app import cli, main

__all__ = ["cli", "main", "run"]


def run() -> None:
    """Console-script entry point."""
    from . import admin, bundles, claims, guarded, skill  # noqa: F401  (registers the commands)

    raise SystemExit(main())
