"""Guarded operations: run a command, or replace a file, only while holding a claim.

See docs/concepts.md (guarded operations).

Both hold the resource's guard for their whole duration, so no other gitlease
caller can be granted the resource meanwhile. ``exec`` tells its command
(``GITLEASE_GUARD``) that its own gitlease calls on the same claim may work under
exec's guard instead of waiting for it; the lock itself stays with exec.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from .._util import signals
from .._util.files import atomic_write
from .._util.value import Value
from ..claims import engine as core
from ..claims import interrupts, ownership
from ..errors import GitleaseError, LostError, PartialBundleError, PreconditionError, UsageError
from ..model.claim import Claim, remaining_ms
from ..model.clock import Now
from ..model.record import COORDINATION_ONLY
from ..receipts.receipt import ClaimRef, Receipt
from ..state import guards
from ..store.base import Store
from .lease import acquire

if TYPE_CHECKING:
    from typing_extensions import Unpack

POLL_SECONDS = 1.0
GRACE_SECONDS = 5.0


def _own_receipt(
    store: Store, resource: str | None, receipt: str | os.PathLike[str] | None
) -> tuple[Receipt, ClaimRef] | None:
    """The caller's receipt for an active claim, if it has one here; None otherwise."""
    from ..receipts import reservation

    if reservation.explicit_path(receipt) is not None:
        return ownership.load_receipt(store, resource, receipt)
    if resource is None:
        raise UsageError("name a RESOURCE or pass --receipt")
    try:
        rec, claim_ref = ownership.load_receipt(store, resource, None)
        core.check_claims(store, rec, [claim_ref], 0)
    except PartialBundleError:
        raise  # the caller's own claim, in a bundle nobody holds whole: never acquire over it
    except GitleaseError:
        return None
    return rec, claim_ref


class Executed(Value):
    """What ``exec`` did: the command's exit status, and the claim as it stands afterwards
    (released again when exec acquired it, else still the caller's)."""

    __slots__ = ("exit", "claim")
    exit: int
    claim: Claim

    def to_dict(self) -> dict[str, Any]:
        """``{"claim": claim, "exit": N}`` (docs/reference/json.md)."""
        return {"claim": self.claim.to_dict(), "exit": self.exit}


class GuardedOptions(TypedDict, total=False):
    """The keyword options of :func:`run_guarded`, as :func:`execute` takes them."""

    receipt: str | os.PathLike[str] | None  #: the caller's receipt (default: this worktree's)
    ttl: str | int | None  #: when exec acquires: how long the claim lasts without a heartbeat
    coordination_only: bool  #: when exec acquires: the durable mutation happens elsewhere
    owner: str | None  #: when exec acquires: a non-secret label
    note: str | None  #: when exec acquires: shown with the claim
    grace: float  #: seconds between TERM and KILL when ownership is lost (default 5)


def run_guarded(
    store: Store,
    command: Sequence[str],
    resource: str | None = None,
    **options: Unpack[GuardedOptions],
) -> int:
    """Run ``command`` under a claim; its exit status, or LOST if ownership was lost meanwhile.

    Uses the caller's own active claim when its receipt is here (the claim stays
    held afterwards); otherwise acquires one and releases it when the command ends.
    ``options``: :class:`GuardedOptions`, as for :func:`execute`.
    """
    return execute(store, command, resource, **options).exit


def execute(
    store: Store,
    command: Sequence[str],
    resource: str | None = None,
    *,
    receipt: str | os.PathLike[str] | None = None,
    ttl: str | int | None = None,
    coordination_only: bool = False,
    owner: str | None = None,
    note: str | None = None,
    grace: float = GRACE_SECONDS,
    stdout: int | None = None,
    on_start: Callable[[Claim], None] | None = None,
) -> Executed:
    """:func:`run_guarded`, telling the claim too. ``stdout``: a descriptor for the command's
    stdout (default: exec's own); ``on_start`` is called with the claim just before the
    command starts."""
    if not command:
        raise UsageError("give the command to run after --")
    owned = _own_receipt(store, resource, receipt)
    acquired = owned is None
    if owned is None:
        result = acquire(
            store,
            resource or "",
            ttl=ttl,
            owner=owner,
            note=note,
            coordination_only=coordination_only,
        )
        owned = (result.receipt, result.receipt.claims[0])
    rec, claim_ref = owned
    try:
        with store.guard(claim_ref.ref):
            claim = core.check_claims(store, rec, [claim_ref], 0)[0]
            env = _child_env(store, claim, guards.delegation(store.guard_path(claim_ref.ref)))
            if on_start is not None:
                on_start(claim)
            code, claim = _supervise(store, rec, claim_ref, claim, command, env, grace, stdout)
    except BaseException:
        if acquired:
            with contextlib.suppress(GitleaseError):
                core.release_claims(store, rec, [claim_ref], None)
        raise
    if acquired:
        claim = core.release_claims(store, rec, [claim_ref], None)[0]
    return Executed(code, ownership.mark_bound(store, [claim])[0])


def _child_env(store: Store, claim: Claim, delegation: str) -> dict[str, str]:
    assert claim.record is not None
    env = dict(os.environ)
    env.update(
        GITLEASE_RESOURCE=claim.resource,
        GITLEASE_CLAIM_ID=claim.record.claim_id,
        GITLEASE_REVISION=str(claim.record.revision),
        GITLEASE_EXPIRES_AT=claim.record.expires_at,
        **{guards.GUARD_ENV: delegation},
    )
    if claim.record.mode == COORDINATION_ONLY:
        env["GITLEASE_MODE"] = COORDINATION_ONLY
    env.update(store.child_env())  # the command's own gitlease calls reach the same store
    return env


def _supervise(
    store: Store,
    rec: Receipt,
    claim_ref: ClaimRef,
    claim: Claim,
    command: Sequence[str],
    env: dict[str, str],
    grace: float,
    stdout: int | None,
) -> tuple[int, Claim]:
    """Run the command, renewing the claim; (its exit status, the claim last read).

    SIGINT, SIGTERM and SIGHUP are forwarded to the command's process group from before it
    starts: one that came earlier (since exec's own acquire wrote the claim, recorded by
    :mod:`gitlease.claims.interrupts`) or while it was being started means it never runs
    or is stopped at once, and the caller releases the claim as for any other end."""
    assert claim.record is not None
    started: list[subprocess.Popen[bytes]] = []
    came: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if not started:
            came.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started[0].pid, signum)

    # (Python takes signal handlers in the main thread only: a program that runs a command
    # from another thread forwards nothing, and its own handlers stay as they are)
    main = threading.current_thread() is threading.main_thread()
    ending = signals.ENDING if main else ()
    previous = signals.replace(forward, ending)
    early = interrupts.pending()
    if early is not None or came:
        signals.restore(previous)
        return 128 + (early if early is not None else came[0]), claim
    try:
        child = subprocess.Popen(
            list(command),
            env=env,
            stdout=stdout,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    except OSError as exc:
        signals.restore(previous)
        raise UsageError(f"cannot run {command[0]!r}: {exc.strerror}") from None
    started.append(child)
    for signum in came:  # (it came while the command was being started)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)
    try:
        beat_every = claim.record.ttl_ms / 3000
        next_beat = time.monotonic() + beat_every
        while True:
            try:
                code = child.wait(timeout=min(POLL_SECONDS, beat_every))
                return (code if code >= 0 else 128 - code), claim
            except subprocess.TimeoutExpired:
                pass
            try:
                if time.monotonic() >= next_beat:
                    # A remote that does not answer must not keep this loop from noticing
                    # the claim run out: the heartbeat gets no longer than the claim has left.
                    assert claim.record is not None
                    left_ms = remaining_ms(claim.record, Now.read())
                    with store.within(max(left_ms, 100) / 1000):
                        claim = core.renew_claims(store, rec, [claim_ref], None)[0]
                    next_beat = time.monotonic() + beat_every
                else:
                    core.check_claims(store, rec, [claim_ref], 0)
            except LostError as exc:
                _stop(child, grace)
                raise LostError(
                    f"{exc.message}. The command was stopped (process group {child.pid})",
                    claim=exc.claim,
                ) from None
            except GitleaseError:
                continue  # a passing store hiccup: the next poll decides
    finally:
        signals.restore(previous)


def _die_with_parent() -> None:
    """In the child: SIGTERM when exec dies (kill -9), so its command does not run on
    unsupervised (Linux only; the command's own children are not covered)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop(child: subprocess.Popen[bytes], grace: float) -> None:
    """TERM the child's process group, then KILL it after the grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


# ------------------------------------------------------------------ replace-file


def sha256_of(path: Path) -> str | None:
    """The file's SHA-256 in hex, or None if it does not exist."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def replace_file(
    store: Store,
    path: str | os.PathLike[str],
    content: bytes,
    *,
    expect_sha256: str | None = None,
    expect_absent: bool = False,
    resource: str | None = None,
    receipt: str | os.PathLike[str] | None = None,
) -> str:
    """Write ``content`` to ``path`` only if the claim is held and the file is as expected.

    Under the resource's guard: check the claim, check the current SHA-256,
    write a temporary file in the same directory, fsync it, rename it over the
    target, fsync the directory. Returns the new SHA-256.
    """
    if expect_absent == (expect_sha256 is not None):
        raise UsageError("give exactly one of --expect-sha256 HEX or --expect-absent")
    if expect_sha256 is not None:
        expect_sha256 = expect_sha256.lower()
        if len(expect_sha256) != 64 or any(c not in "0123456789abcdef" for c in expect_sha256):
            raise UsageError(f"--expect-sha256 needs 64 hex digits, not {expect_sha256!r}")
    target = Path(path).absolute()
    if target.is_dir():
        raise UsageError(f"{target} is a directory")
    store.refresh()  # the re-check before a durable write asks the coordinator itself
    rec, claim_ref = ownership.load_receipt(store, resource, receipt)
    with store.guard(claim_ref.ref):
        core.check_claims(store, rec, [claim_ref], 0)
        current = sha256_of(target)
        if expect_absent and current is not None:
            raise PreconditionError(f"{target} exists (sha256 {current}); expected it absent")
        if expect_sha256 is not None and current != expect_sha256:
            found = "absent" if current is None else f"sha256 {current}"
            raise PreconditionError(f"{target} is {found}; expected sha256 {expect_sha256}")
        _write_atomically(target, content)
    return hashlib.sha256(content).hexdigest()


def _write_atomically(target: Path, content: bytes) -> None:
    """Durably, keeping the file's mode (or the umask's default for a new file)."""
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    atomic_write(target, content, durable=True, mode=mode)
