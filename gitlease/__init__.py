"""gitlease: bounded, signed claims on units of work, kept as refs in a git repository.

The library is the product; the CLI is a thin layer over it::

    import gitlease

    store = gitlease.open_store()            # the repository around the current directory
    with gitlease.acquire_lease(store, "github/acme/api/42", ttl="10m") as lease:
        ...                                   # heartbeats run in a background thread
        lease.check(min_remaining="1m")       # re-check before each durable write
    # released on exit

Names are loaded lazily so that ``import gitlease`` stays cheap (the commit hook
imports parts of this package on every commit).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .errors import (
    AmbiguousError,
    CorruptRecordError,
    GitleaseError,
    HeldError,
    LostError,
    PreconditionError,
    ReceiptError,
    StoreError,
    UsageError,
)

__version__ = "0.1.0"

_LAZY = {
    "Store": "store",
    "Claim": "lease",
    "Lease": "lease",
    "Acquired": "lease",
    "acquire": "lease",
    "acquire_lease": "lease",
    "heartbeat": "lease",
    "release": "lease",
    "check": "lease",
    "show": "lease",
    "list_claims": "lease",
    "free": "lease",
    "log": "lease",
    "bind": "lease",
    "unbind": "lease",
    "bundle": "bundle",
    "canonical_key": "providers",
    "run_guarded": "guard",
    "replace_file": "guard",
    "verify": "maintenance",
    "prune": "maintenance",
}

__all__ = [
    "AmbiguousError",
    "CorruptRecordError",
    "GitleaseError",
    "HeldError",
    "LostError",
    "PreconditionError",
    "ReceiptError",
    "StoreError",
    "UsageError",
    "open_store",
    *_LAZY,
]


def open_store(path: str | None = None, *, remote: str | None = None) -> Any:
    """The store at ``path``, or as chosen by ``GITLEASE_STORE`` / the repository here;
    coordinated through the git ``remote`` (or ``GITLEASE_REMOTE``, ``gitlease.remote``)."""
    from .store import Store

    return Store.open(path, remote=remote)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gitlease' has no attribute {name!r}")
    loaded = import_module(f".{module}", __name__)
    return loaded if name == module else getattr(loaded, name)
