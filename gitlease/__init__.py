"""gitlease: bounded, signed claims on units of work, kept as refs in a git repository.

The library is the product; the CLI is a thin layer over it::

    import gitlease

    store = gitlease.open_store()            # the store of the repository here
    with gitlease.acquire_lease(store, "github/acme/api/42", ttl="10m") as lease:
        ...                                   # heartbeats run in a background thread
        lease.check(min_remaining="1m")       # re-check before each durable write
    # released on exit

Names are loaded lazily so that ``import gitlease`` stays cheap (the commit hook
imports parts of this package on every commit); the ``TYPE_CHECKING`` block
below shows type checkers and editors the same names. See
docs/reference/python-api.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import (
    AmbiguousError,
    CompareAndSwapFailed,
    CorruptRecordError,
    GitleaseError,
    HeldError,
    LostError,
    PartialBundleError,
    PreconditionError,
    ReceiptError,
    StoreError,
    UsageError,
    WriteOutcomeUnknown,
)

if TYPE_CHECKING:
    from . import bundle as bundle
    from .claim import Claim as Claim
    from .guarded import execute as execute
    from .guarded import replace_file as replace_file
    from .guarded import run_guarded as run_guarded
    from .handle import Lease as Lease
    from .handle import acquire_lease as acquire_lease
    from .keepalive import keep_alive as keep_alive
    from .keepalive import keep_bundle_alive as keep_bundle_alive
    from .keepers import Keeper as Keeper
    from .lease import Acquired as Acquired
    from .lease import acquire as acquire
    from .lease import acquire_first_free as acquire_first_free
    from .lease import bind as bind
    from .lease import check as check
    from .lease import heartbeat as heartbeat
    from .lease import release as release
    from .lease import unbind as unbind
    from .location import open_store as open_store
    from .providers import canonical_key as canonical_key
    from .pruning import prune as prune
    from .pruning import retain as retain
    from .reads import free as free
    from .reads import history as history
    from .reads import list_claims as list_claims
    from .reads import log as log
    from .reads import show as show
    from .remote import RemoteStore as RemoteStore
    from .store import Store as Store
    from .verification import verify as verify

__version__ = "0.2.0"

_LAZY = {
    "Store": "store",
    "RemoteStore": "remote",
    "open_store": "location",
    "Claim": "claim",
    "Lease": "handle",
    "acquire_lease": "handle",
    "Acquired": "lease",
    "acquire": "lease",
    "acquire_first_free": "lease",
    "heartbeat": "lease",
    "release": "lease",
    "check": "lease",
    "bind": "lease",
    "unbind": "lease",
    "show": "reads",
    "list_claims": "reads",
    "free": "reads",
    "log": "reads",
    "history": "reads",
    "bundle": "bundle",
    "canonical_key": "providers",
    "run_guarded": "guarded",
    "execute": "guarded",
    "replace_file": "guarded",
    "keep_alive": "keepalive",
    "keep_bundle_alive": "keepalive",
    "Keeper": "keepers",
    "verify": "verification",
    "prune": "pruning",
    "retain": "pruning",
}

__all__ = [
    "AmbiguousError",
    "CompareAndSwapFailed",
    "CorruptRecordError",
    "GitleaseError",
    "HeldError",
    "LostError",
    "PartialBundleError",
    "PreconditionError",
    "ReceiptError",
    "StoreError",
    "UsageError",
    "WriteOutcomeUnknown",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gitlease' has no attribute {name!r}")
    loaded = import_module(f".{module}", __name__)
    return loaded if name == module else getattr(loaded, name)
