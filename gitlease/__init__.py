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

from ._util import TYPE_CHECKING
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
    from .api import bundle as bundle
    from .api.guarded import execute as execute
    from .api.guarded import replace_file as replace_file
    from .api.guarded import run_guarded as run_guarded
    from .api.handle import Lease as Lease
    from .api.handle import acquire_lease as acquire_lease
    from .api.history import history as history
    from .api.history import log as log
    from .api.lease import Acquired as Acquired
    from .api.lease import acquire as acquire
    from .api.lease import acquire_first_free as acquire_first_free
    from .api.lease import bind as bind
    from .api.lease import check as check
    from .api.lease import heartbeat as heartbeat
    from .api.lease import release as release
    from .api.lease import unbind as unbind
    from .api.reads import free as free
    from .api.reads import list_claims as list_claims
    from .api.reads import show as show
    from .keepalive.start import keep_alive as keep_alive
    from .keepalive.start import keep_bundle_alive as keep_bundle_alive
    from .maintenance.prune import prune as prune
    from .maintenance.prune import retain as retain
    from .maintenance.verify import verify as verify
    from .model.claim import Claim as Claim
    from .model.keeper import Keeper as Keeper
    from .providers import canonical_key as canonical_key
    from .store.base import Store as Store
    from .store.location import open_store as open_store
    from .store.remote import RemoteStore as RemoteStore

if TYPE_CHECKING:  # (not a public name)
    from typing import Any

__version__ = "0.2.0"

_LAZY = {
    "Store": "store.base",
    "RemoteStore": "store.remote",
    "open_store": "store.location",
    "Claim": "model.claim",
    "Lease": "api.handle",
    "acquire_lease": "api.handle",
    "Acquired": "api.lease",
    "acquire": "api.lease",
    "acquire_first_free": "api.lease",
    "heartbeat": "api.lease",
    "release": "api.lease",
    "check": "api.lease",
    "bind": "api.lease",
    "unbind": "api.lease",
    "show": "api.reads",
    "list_claims": "api.reads",
    "free": "api.reads",
    "log": "api.history",
    "history": "api.history",
    "bundle": "api.bundle",
    "canonical_key": "providers",
    "run_guarded": "api.guarded",
    "execute": "api.guarded",
    "replace_file": "api.guarded",
    "keep_alive": "keepalive.start",
    "keep_bundle_alive": "keepalive.start",
    "Keeper": "model.keeper",
    "verify": "maintenance.verify",
    "prune": "maintenance.prune",
    "retain": "maintenance.prune",
}

#: The names in the lazy map that are modules, not a module's attribute.
_LAZY_MODULES = frozenset({"bundle"})

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
    return loaded if name in _LAZY_MODULES else getattr(loaded, name)
