"""The line of waiters on one host: the store's ``worklease/waiters`` folder, one ticket a waiter
(docs/reference/store.md)."""

from __future__ import annotations

from pathlib import Path


def waiters_dir(repo: Path) -> Path:
    """The folder of the waiters' tickets in the store ``repo``'s commands use."""
    from conftest import store_path

    return store_path(repo) / "worklease" / "waiters"
