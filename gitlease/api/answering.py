"""Taking claims, then answering: a program's answer must never contradict the store.

A command that takes claims and then answers (``acquire``, ``bundle acquire``) first arms
the signal window (:func:`arm`): from just before the write, SIGINT, SIGTERM and SIGHUP are only
recorded. Just before it answers, it asks whether one came (:func:`pending`); if so, or if
the answer cannot be written, it releases what it took (:func:`undo_acquire`), so that no
exit but success leaves a claim behind (docs/reference/exit-codes.md).

A command that writes its own claims (``heartbeat``, ``release``) answers them instead
(:func:`answering_owned`): a signal that meets the write once it could land waits for the
write, its bookkeeping and the answer, which is the write's; :func:`owned_came` says which
signal came.
"""

from __future__ import annotations

from ..claims.acquire import undo_acquire
from ..claims.interrupts import answering_owned, arm, owned_came, pending

__all__ = ["answering_owned", "arm", "owned_came", "pending", "undo_acquire"]
