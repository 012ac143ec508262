"""Path scopes for programs: which live claims' scopes cover a path (``gitlease who``).

A claim can reserve files by path scopes (git wildmatch patterns, docs/howto/path-scopes.md).
:func:`who` is the ``gitlease who --json`` document; :func:`covering` the same as
``(path, [Claim, ...])`` pairs. Patterns themselves (``overlap``, ``matches``,
``validate``) are in :mod:`gitlease.scopes.wildmatch`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..scopes.lookup import covering
from ..scopes.wildmatch import check_path
from ..store.base import Store

__all__ = ["covering", "who"]


def who(store: Store, paths: Sequence[str]) -> dict[str, object]:
    """``gitlease who --json``: ``{"paths": [{"path": ..., "claims": [claim, ...]}]}`` (a
    remote store's claims on a fresh fetch)."""
    for path in paths:
        check_path(path)  # (USAGE before the network)
    store.refresh()
    return {
        "paths": [
            {"path": path, "claims": [c.to_dict() for c in claims]}
            for path, claims in covering(store, paths)
        ]
    }
