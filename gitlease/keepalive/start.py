"""Keepalive: a detached process that renews a claim while the agent that holds it lives.

See docs/concepts.md (keeping a claim alive) and docs/design.md. This module finds the
process to watch and starts the keepalive process; what that process does is
:mod:`gitlease.keepalive.process`.

An agent cannot heartbeat while it thinks, and one turn can outlast a TTL.
``keep_alive`` starts a process of its own that renews the claim at a third of
its TTL for as long as the watched process lives: by default the agent, the
nearest ancestor that is neither a shell nor gitlease. It stops, leaving the
claim to expire, when the watched process ends, after ``--max``, when the claim
is released, lost or replaced (any LOST answer), or when it is told to stop
(``release`` does). Abandoned work therefore still expires: kill the agent, or
the keepalive process itself, and the claim lapses within its TTL.

The process is detached for real: a session of its own (and not its leader, so
it can never gain a controlling terminal), stdin on ``/dev/null``, stdout and
stderr on its log next to the receipt, working directory ``/``. It is given no
token: it reads the receipt itself, and its parameters come through a pipe, not
its arguments. It takes no ``GITLEASE_*`` variable from the caller (the store,
its remote and the receipt are passed explicitly; test switches never). It
registers itself in the store (:mod:`gitlease.state.keepers`), which is how a second
keepalive for one claim is refused and how ``show`` and ``list`` see it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from .._util import procs as _procs
from .._util.procs import Proc
from ..api.bundle import BundleResult
from ..claims import acquire as acquisition
from ..claims import engine as core
from ..claims import ownership
from ..errors import AmbiguousError, GitleaseError, HeldError, LostError, StoreError, UsageError
from ..gitio.gitread import git_env
from ..model.claim import Claim
from ..model.durations import duration_ms
from ..model.record import TOKEN_PREFIX
from ..receipts.directory import log_path
from ..receipts.receipt import ClaimRef, Receipt, Receipted
from ..state import keepers
from ..state.keepers import Keeper
from ..store.base import Store

DEFAULT_MAX = "4h"
#: How long the caller waits for the keepalive process to say it has started.
START_TIMEOUT_SECONDS = 30.0
_ERRORS: dict[int, type[GitleaseError]] = {
    2: UsageError,
    3: HeldError,
    4: LostError,
    5: AmbiguousError,
    7: StoreError,
}
_BOOT = "from gitlease.keepalive.process import serve; serve()"


# ------------------------------------------------------------------ the watched process


def watched_process(while_pid: int | None = None, *, watch_from: int | None = None) -> Proc:
    """The process a keepalive watches: ``while_pid``, or else the agent.

    The agent is the nearest process, starting at ``watch_from`` (default: this
    process) and going up through its parents, that is neither a shell (sh,
    bash, dash, zsh, fish, ksh) nor gitlease. USAGE if there is none, or if it is
    pid 1 or a service manager: watching init would keep the claim until
    ``--max`` whatever became of the agent.
    """
    if while_pid is not None:
        if isinstance(while_pid, bool) or not isinstance(while_pid, int) or while_pid <= 0:
            raise UsageError(f"bad --while-pid {while_pid!r}: a process id")
        proc = _procs.inspect(while_pid)
        if proc is None or not proc.alive:
            raise UsageError(f"--while-pid {while_pid}: no such process is running")
        return proc
    start = os.getpid() if watch_from is None else watch_from
    proc = _procs.agent(start)
    if proc is None:
        raise UsageError(
            "found no process to watch above this one (every ancestor is a shell or gitlease, "
            "or /proc cannot be read): pass --while-pid PID"
        )
    if proc.pid == 1 or proc.name in ("systemd", "init"):
        raise UsageError(
            f"the nearest process above this one that is not a shell is pid {proc.pid} "
            f"({proc.name}), which never ends: the claim would be kept until --max. Pass "
            "--while-pid PID (the agent's pid)"
        )
    return proc


def max_ms(max_duration: str | int | None) -> int:
    """``--max`` in milliseconds (default 4 hours; more than zero)."""
    ms = duration_ms(DEFAULT_MAX if max_duration is None else max_duration, name="--max")
    if ms <= 0:
        raise UsageError(f"bad --max {max_duration!r}: more than zero")
    return ms


# ------------------------------------------------------------------ starting one


def keep_alive(
    store: Store,
    resource: str | None = None,
    *,
    receipt: Receipted = None,
    while_pid: int | None = None,
    max_duration: str | int | None = None,
    watch_from: int | None = None,
) -> Claim:
    """Start a keepalive process for the caller's claim; the claim, with ``keepalive`` set.

    ``while_pid``: the process to watch (default: :func:`watched_process` from
    ``watch_from``, this process unless given; the CLI passes its parent).
    ``max_duration``: stop after this long at the latest (default 4h). LOST if the
    claim is not held now; HELD if a keepalive process already keeps it alive.
    """
    watched = watched_process(while_pid, watch_from=watch_from)
    limit = max_ms(max_duration)
    rec, claim_ref = ownership.load_receipt(store, resource, receipt)
    _, claims = start(store, rec, [claim_ref], watched, limit)
    return claims[0]


def keep_bundle_alive(
    store: Store,
    bundle_id: str | None = None,
    *,
    receipt: Receipted = None,
    while_pid: int | None = None,
    max_duration: str | int | None = None,
    watch_from: int | None = None,
) -> BundleResult:
    """:func:`keep_alive` for every member of a bundle, renewed together."""
    watched = watched_process(while_pid, watch_from=watch_from)
    limit = max_ms(max_duration)
    rec = ownership.load_bundle_receipt(store, bundle_id, receipt)
    _, claims = start(store, rec, list(rec.claims), watched, limit)
    return BundleResult(rec.bundle_id, claims, rec)


def keep_acquired(
    store: Store, rec: Receipt, watched: Proc, max_duration: str | int | None = None
) -> Keeper:
    """Keep a claim just acquired alive (``acquire --keepalive``); if that fails, release
    it again and raise: the caller gets a kept claim or none (AMBIGUOUS, naming the claim,
    if it cannot even be released: :func:`~gitlease.claims.acquire.undo_acquire`)."""
    try:
        keeper, _ = start(store, rec, list(rec.claims), watched, max_ms(max_duration))
    except BaseException as exc:
        acquisition.undo_acquire(store, rec, exc)
        if isinstance(exc, GitleaseError):
            raise type(exc)(f"{exc.message}. The claim was released again") from exc
        raise
    return keeper


def start(
    store: Store, rec: Receipt, claim_refs: list[ClaimRef], watched: Proc, limit_ms: int
) -> tuple[Keeper, list[Claim]]:
    """Check that the caller holds every claim, then start the process; it answers once it
    has registered (or why it could not)."""
    claims = core.check_claims(store, rec, claim_refs, 0)
    wanted = [(c.resource, c.ref, c.claim_id) for c in claim_refs]
    keepers.refuse_second(keepers.live(store.git_dir), wanted)  # early; again under the lock
    spec = {
        "store": str(store.git_dir),
        "remote": store.remote or "",
        "receipt": str(rec.path),
        "resources": [c.resource for c in claim_refs],
        "claim_ids": [c.claim_id for c in claim_refs],
        "bundle_id": rec.bundle_id,
        "watch": {"pid": watched.pid, "start": watched.start, "name": watched.name},
        "max_ms": limit_ms,
        "log": str(log_path(rec.path)),
    }
    keeper = _spawn(spec)
    return keeper, [c.replace(keepalive=keeper) for c in claims]


def _keeper_env() -> dict[str, str]:
    """The caller's environment without what must not reach the keepalive: ``GITLEASE_*``
    (the store, remote and receipt are passed explicitly, test switches never), git's
    location variables (the store is named), and anything that looks like a token."""
    return {
        k: v
        for k, v in git_env().items()  # (git's location variables gone)
        if not (k.startswith("GITLEASE_") and k != "GITLEASE_REMOTE_TIMEOUT")
        and TOKEN_PREFIX not in v
    }


def _spawn(spec: dict[str, Any]) -> Keeper:
    argv = [
        sys.executable or "python3",
        "-P",
        "-c",
        _BOOT,
        keepers.KEEPALIVE_ARGV0,  # (how keepers.stop knows it for a keepalive)
        *spec["resources"],
    ]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env=_keeper_env(),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise StoreError(f"cannot start the keepalive process: {exc.strerror or exc}") from None
    try:
        # EOF comes once the first process has forked the keepalive and exited, and the
        # keepalive has answered and moved its stdout to the log
        out, _ = proc.communicate(json.dumps(spec).encode("utf-8"), START_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        proc.wait()
        raise AmbiguousError(
            f"the keepalive process did not answer within {START_TIMEOUT_SECONDS:.0f} seconds; "
            f"see its log {spec['log']} and `gitlease show`"
        ) from None
    return _answer(out, spec["log"])


def _answer(out: bytes, log: str) -> Keeper:
    """The keepalive's one-line answer: its registry entry, or the error that stopped it."""
    try:
        doc = json.loads(out.partition(b"\n")[0])
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        error = doc["error"]
        cls = _ERRORS.get(error.get("exit"), GitleaseError)
        raise cls(f"the keepalive process did not start: {error.get('message')}")
    keeper = keepers.parse(doc.get("keeper")) if isinstance(doc, dict) else None
    if keeper is None:
        raise GitleaseError(f"the keepalive process ended before it started; see its log {log}")
    return keeper
