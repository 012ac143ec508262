"""One exception hierarchy; every class carries its exit code (docs/reference/exit-codes.md).

The CLI maps an exception to an exit code and a JSON error document through
``exit_code`` and ``code`` alone, so this module is the only place that decides
which failure means what to a caller.
"""

from __future__ import annotations

#: False when the code runs, True to type checkers (mypy and pyright take any name
#: ``TYPE_CHECKING`` in an ``if`` so). The modules the commit check loads take it from
#: ``gitlease._util`` (which takes it from here, the bottom layer) rather than from
#: ``typing``, whose import costs every commit about 2.5 ms
#: (tests/hooks/test_hook_processes.py keeps ``typing`` out of the check).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any


class GitleaseError(Exception):
    """Base class: an unexpected failure (exit 1) unless a subclass says otherwise."""

    code = "ERROR"
    exit_code = 1
    #: The claims the error is about when there are several (``acquire --first-free``).
    claims: list[dict[str, Any]] | None = None

    def __init__(self, message: str, *, claim: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: The claim the error is about, as a public claim document (never secret).
        self.claim = claim

    def __str__(self) -> str:
        return self.message


class UsageError(GitleaseError, ValueError):
    """Bad arguments or bad input; nothing was touched."""

    code = "USAGE"
    exit_code = 2


class HeldError(GitleaseError):
    """Another active claim holds the resource: choose other work, or wait."""

    code = "HELD"
    exit_code = 3

    def __init__(
        self,
        message: str,
        *,
        claim: dict[str, Any] | None = None,
        holder: object = None,
        claims: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message, claim=claim)
        #: The holder's :class:`~gitlease.model.claim.Claim` when known (``--wait`` shows it).
        self.holder = holder
        self.claims = claims
        #: False when waiting cannot change the answer (the active claim is the caller's
        #: own, bound to its worktree): ``--wait`` answers at once if it outlasts the wait.
        self.retryable = True


class LostError(GitleaseError):
    """The caller does not (or no longer) hold the claim: stop mutating, re-acquire."""

    code = "LOST"
    exit_code = 4


class PartialBundleError(LostError):
    """Some members of the caller's bundle were never written (its acquire was interrupted
    mid-commit): nobody holds the whole bundle, so nobody may act on it."""


class ReceiptError(LostError):
    """The receipt is missing, unreadable, corrupt or not private: ownership cannot be shown."""


class AmbiguousError(GitleaseError):
    """The outcome is unknown (contention, interrupted write): inspect with ``show``, then retry."""

    code = "AMBIGUOUS"
    exit_code = 5


class CompareAndSwapFailed(AmbiguousError):
    """The ref no longer held the record the caller decided on: nothing was written.

    Callers decide again from a fresh read; it reaches a user (exit 5) only when
    the ref keeps moving for every retry.
    """


class WriteOutcomeUnknown(AmbiguousError):
    """A write was interrupted and may or may not have landed (a dropped push)."""


class PreconditionError(GitleaseError):
    """``replace-file``: the file's content is not what the caller expected."""

    code = "PRECONDITION"
    exit_code = 6


class StoreError(GitleaseError, OSError):
    """The store is missing, unreadable, corrupt or tampered with: run ``verify``."""

    code = "STORE"
    exit_code = 7


class CorruptRecordError(StoreError):
    """A record that does not parse or verify, or a ref that is not a blob."""
