"""The Python API's handle on a held claim: a context manager that heartbeats for you.

::

    with gitlease.acquire_lease(store, "github/acme/api/42", ttl="5m") as lease:
        ...                      # heartbeats run in a background thread
        lease.check("1m")        # before each durable write
    # released on exit
"""

from __future__ import annotations

import threading  # already loaded by subprocess: free
from typing import Any

from ..errors import GitleaseError, LostError
from ..model.claim import Claim
from ..store.base import Store
from .lease import Acquired, acquire, check, heartbeat, release


class Lease:
    """A held claim; as a context manager it heartbeats in the background and releases on exit.

    ``with gitlease.acquire_lease(store, "github/acme/api/42", ttl="5m") as lease:``
    work, calling ``lease.check()`` before each durable write.
    """

    def __init__(self, store: Store, acquired: Acquired) -> None:
        self.store = store
        self.claim = acquired.claim
        self.receipt_path = acquired.receipt.path
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: LostError | None = None
        self._lock = threading.Lock()

    @property
    def resource(self) -> str:
        """The claimed resource."""
        return self.claim.resource

    def heartbeat(self, ttl: str | int | None = None) -> Claim:
        """Renew now (the background thread does it at a third of the TTL)."""
        with self._lock:
            self.claim = heartbeat(self.store, self.resource, ttl=ttl, receipt=self.receipt_path)
            return self.claim

    def check(self, min_remaining: str | int | None = None) -> Claim:
        """The re-check before a durable write (LOST once the heartbeats found it lost)."""
        if self.lost is not None:
            raise self.lost
        with self._lock:  # one thread at a time on the store (the heartbeat thread too)
            return check(
                self.store, self.resource, min_remaining=min_remaining, receipt=self.receipt_path
            )

    def release(self, checkpoint: str | None = None) -> Claim:
        """Stop the heartbeats and release, optionally with a checkpoint."""
        self._stop_heartbeats()
        with self._lock:
            self.claim = release(
                self.store, self.resource, checkpoint=checkpoint, receipt=self.receipt_path
            )
            return self.claim

    def _beat(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.heartbeat()
            except LostError as exc:
                self.lost = exc
                return
            except GitleaseError:
                continue  # transient (guard busy, store hiccup): try again next interval

    def start_heartbeats(self) -> None:
        """Renew at a third of the TTL in a daemon thread (the context manager does it)."""
        assert self.claim.record is not None
        interval = self.claim.record.ttl_ms / 3000
        self._thread = threading.Thread(target=self._beat, args=(interval,), daemon=True)
        self._thread.start()

    def _stop_heartbeats(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> Lease:
        self.start_heartbeats()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self.release()  # stops the heartbeat thread first
        except LostError:
            if exc_type is None:
                raise


def acquire_lease(store: Store, resource: str, **options: Any) -> Lease:
    """:func:`~gitlease.api.lease.acquire` returning a :class:`Lease` handle (a context manager)."""
    options.setdefault("bind", False)
    return Lease(store, acquire(store, resource, **options))
