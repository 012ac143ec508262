"""Which store the commands here use, and the git remote every clone of a project coordinates
through (docs/reference/store.md, docs/remote.md).

:func:`open_store` opens it (also ``gitlease.open_store``); :func:`where` only looks
(``gitlease where``). A project's shared store can record, once and deliberately, the remote
that coordinates it (:func:`set_coordinator`, ``gitlease remote set``), so that a clone
without the setting cannot decide alone; :func:`coordinator` says which one it records, by
whom and when.
"""

from __future__ import annotations

import os
from typing import Any

from ..store import coordinator as coordinators
from ..store.location import ensure_exists, locate, open_store, recorded_coordinator, where

__all__ = ["coordinator", "open_store", "set_coordinator", "where"]


def set_coordinator(
    name_or_url: str, *, store: str | os.PathLike[str] | None = None, replace: bool = False
) -> dict[str, Any]:
    """Record ``name_or_url`` (a remote of the repository here, or a URL) as the coordinator
    of this project's shared store (``replace``: over a different one recorded before);
    :func:`coordinator`'s document after it."""
    location = locate(store)
    ensure_exists(location)
    coordinators.set_recorded(location, name_or_url, replace=replace)
    return {"store": str(location.git_dir), "recorded": recorded_coordinator(location)}


def coordinator(store: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``{"store": path, "recorded": {"remote", "by", "at"} or None}``: the coordinator the
    shared store here records (the remote's credentials redacted)."""
    location = locate(store)
    return {"store": str(location.git_dir), "recorded": recorded_coordinator(location)}
