"""Keepalive: a keeper renews a claim while the agent that holds it lives.

See docs/concepts.md (keeping a claim alive) and docs/design.md. This module finds the
process to watch and hands the claim to this user's keeper on this host, starting one if
none answers; what the keeper does is :mod:`gitlease.keepalive.process`.

An agent cannot heartbeat while it thinks, and one turn can outlast a TTL.
``keep_alive`` hands the claim to a process of its own that renews it at a third of
its TTL for as long as the watched process lives: by default the agent, the
nearest ancestor that is neither a shell nor gitlease. It stops keeping it, leaving the
claim to expire, when the watched process ends, after ``--max``, when the claim
is released, lost or replaced (any LOST answer), or when it is told to stop
(``release`` does). Abandoned work therefore still expires: kill the agent, or
the keeper itself, and the claim lapses within its TTL.

One keeper serves every kept claim of a user on a host (and installation, and the
environment git reaches remotes with: :func:`gitlease.state.keeperlink.key`), found at a
socket in the user's private folder: when one runs, handing a claim over is one connect.
It is detached for real: a session of its own (and not its leader, so it can never gain
a controlling terminal), stdin on ``/dev/null``, stdout and stderr on its own log,
working directory ``/``; each claim's log is next to its receipt. It is given no
token: it reads the receipt itself, and the parameters come through the socket, never
its arguments. It takes no ``GITLEASE_*`` variable from the caller that started it (the
store, its remote and the receipt are passed explicitly; test switches never). Each claim
it keeps is registered in the store (:mod:`gitlease.state.keepers`), which is how a
second keepalive for one claim is refused and how ``show`` and ``list`` see it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from .._util import procs as _procs
from .._util.files import flocked
from .._util.procs import Proc
from ..claims import engine as core
from ..claims import ownership
from ..errors import AmbiguousError, GitleaseError, HeldError, LostError, StoreError, UsageError
from ..gitio.gitread import git_env
from ..model.claim import Claim
from ..model.durations import duration_ms
from ..model.record import TOKEN_PREFIX
from ..receipts.directory import log_path
from ..receipts.receipt import ClaimRef, Receipt, Receipted
from ..state import keeperlink, keepers
from ..state.keepers import Keeper
from ..store.base import Store

if TYPE_CHECKING:
    from ..api.bundle import BundleResult

DEFAULT_MAX = "4h"
#: How long the caller waits for the keeper to take a claim (or to start).
START_TIMEOUT_SECONDS = 30.0
#: How often a claim is handed over again when the keeper was ending as it was asked.
_ATTEMPTS = 5
_ERRORS: dict[int, type[GitleaseError]] = {
    2: UsageError,
    3: HeldError,
    4: LostError,
    5: AmbiguousError,
    7: StoreError,
}
_BOOT = "from gitlease.keepalive.process import serve_keeper; serve_keeper()"


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
    from ..api.bundle import BundleResult  # (not on a single claim's path)

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
        from ..claims import acquire as acquisition

        acquisition.undo_acquire(store, rec, exc)
        if isinstance(exc, GitleaseError):
            raise type(exc)(f"{exc.message}. The claim was released again") from exc
        raise
    return keeper


def start(
    store: Store, rec: Receipt, claim_refs: list[ClaimRef], watched: Proc, limit_ms: int
) -> tuple[Keeper, list[Claim]]:
    """Check that the caller holds every claim, then hand them to the keeper (started if
    none answers); it answers once it has registered them (or why it could not)."""
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
    keeper = _hand_over(spec)
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


def _hand_over(spec: dict[str, Any]) -> Keeper:
    """Give the claim to this user's keeper, starting one when none answers."""
    env = _keeper_env()
    where = keeperlink.paths(env)
    for _ in range(_ATTEMPTS):
        try:
            doc = keeperlink.request(
                where.socket, {"op": "keep", "spec": spec}, timeout=START_TIMEOUT_SECONDS
            )
        except keeperlink.NoKeeper:
            _start_keeper(where, env)
            continue
        except keeperlink.Dropped:
            continue  # it was ending as it was asked, having done nothing: ask again
        except keeperlink.Unanswered:
            raise AmbiguousError(
                f"the keeper did not answer within {START_TIMEOUT_SECONDS:.0f} seconds; see "
                f"the claim's log {spec['log']}, the keeper's log {where.log}, and "
                "`gitlease show`"
            ) from None
        return _answer(doc, spec["log"])
    raise StoreError(f"could not hand the claim to a keeper; see its log {where.log}")


def _start_keeper(where: keeperlink.Paths, env: dict[str, str]) -> None:
    """Start this user's keeper, unless another caller just did (one at a time, under the
    folder's lock); it answers once it listens."""

    def busy() -> StoreError:
        return StoreError(f"{where.lock} stayed locked for {START_TIMEOUT_SECONDS:.0f} seconds")

    with flocked(where.lock, wait=START_TIMEOUT_SECONDS, busy=busy):
        try:
            keeperlink.request(where.socket, {"op": "status"}, timeout=START_TIMEOUT_SECONDS)
            return  # started meanwhile
        except (keeperlink.NoKeeper, keeperlink.Dropped):
            pass
        out = _spawn({"folder": str(where.folder), "key": where.key}, env, where)
    try:
        doc = json.loads(out.partition(b"\n")[0])
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        error = doc["error"]
        cls = _ERRORS.get(error.get("exit"), GitleaseError)
        raise cls(f"the keeper did not start: {error.get('message')}")
    if not isinstance(doc, dict) or not ("ready" in doc or "busy" in doc):
        raise GitleaseError(f"the keeper ended before it started; see its log {where.log}")


def _spawn(boot: dict[str, str], env: dict[str, str], where: keeperlink.Paths) -> bytes:
    argv = [
        sys.executable or "python3",
        "-P",
        "-c",
        _BOOT,
        keepers.KEEPER_ARGV0,  # (what `ps` shows, and never a 0.2 keepalive's form)
        where.key,
    ]
    try:
        proc = _procs.start_detached(argv, env, talk=True)
    except OSError as exc:
        raise StoreError(f"cannot start the keeper: {exc.strerror or exc}") from None
    try:
        # EOF comes once the first process has forked the keeper and exited, and the
        # keeper listens and has moved its stdout to its log
        out, _ = proc.communicate(json.dumps(boot).encode("utf-8"), START_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        proc.wait()
        raise StoreError(
            f"the keeper did not start within {START_TIMEOUT_SECONDS:.0f} seconds; see its "
            f"log {where.log}"
        ) from None
    return out


def _answer(doc: dict[str, Any], log: str) -> Keeper:
    """The keeper's answer: the claim's registry entry, or the error that stopped it."""
    if isinstance(doc.get("error"), dict):
        error = doc["error"]
        cls = _ERRORS.get(error.get("exit"), GitleaseError)
        raise cls(f"the keepalive did not start: {error.get('message')}")
    keeper = keepers.parse(doc.get("keeper"))
    if keeper is None:
        raise GitleaseError(f"the keeper answered no claim; see the claim's log {log}")
    return keeper
