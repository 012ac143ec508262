"""Keepalive: a detached process that renews a claim while the agent that holds it lives.

See docs/concepts.md (keeping a claim alive) and docs/design.md.

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
registers itself in the store (:mod:`gitlease.keepers`), which is how a second
keepalive for one claim is refused and how ``show`` and ``list`` see it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from . import _procs, acquisition, core, keepers, ownership
from . import receipts as receipts_mod
from ._procs import Proc
from .bundle import BundleResult
from .claim import Claim, remaining_ms
from .clock import Now, format_duration, parse_duration_ms, rfc3339
from .errors import (
    AmbiguousError,
    GitleaseError,
    HeldError,
    LostError,
    StoreError,
    UsageError,
)
from .keepers import Keeper
from .receiptdir import LOG_SUFFIX, log_path
from .receipts import ClaimRef, Receipt
from .store import Store

DEFAULT_MAX = "4h"
#: How long the caller waits for the keepalive process to say it has started.
START_TIMEOUT_SECONDS = 30.0
#: Without a pidfd (old kernels), how often the watched process is looked at.
POLL_SECONDS = 0.5
#: Logs of receipts that are gone are deleted once they are this old.
OLD_LOG_SECONDS = 86_400
_ERRORS: dict[int, type[GitleaseError]] = {
    2: UsageError,
    3: HeldError,
    4: LostError,
    5: AmbiguousError,
    7: StoreError,
}
_BOOT = "from gitlease.keepalive import _serve; _serve()"
_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
Receipted = str | os.PathLike[str] | None


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
    ms = parse_duration_ms(DEFAULT_MAX if max_duration is None else max_duration, name="--max")
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
    if it cannot even be released: :func:`~gitlease.acquisition.undo_acquire`)."""
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
    drop = {"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_PREFIX"}
    return {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("GITLEASE_") and k != "GITLEASE_REMOTE_TIMEOUT")
        and k not in drop
        and "glt_" not in v
    }


def _spawn(spec: dict[str, Any]) -> Keeper:
    argv = [
        sys.executable or "python3",
        "-P",
        "-c",
        _BOOT,
        "gitlease-keepalive",
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


# ------------------------------------------------------------------ the process itself


def _serve() -> None:
    """The keepalive process's entry point (``python -c``): read the parameters from stdin,
    fork once more (the child is not its session's leader, so it can never gain a
    controlling terminal, and the caller reaps its parent at once), then keep."""
    spec = json.loads(sys.stdin.buffer.read())
    if os.fork() != 0:
        os._exit(0)
    os.umask(0o077)
    _name_process(b"gitlease-keep")
    try:
        keeping = _Keeping(spec)
    except GitleaseError as exc:
        _say({"error": {"code": exc.code, "exit": exc.exit_code, "message": exc.message}})
        os._exit(exc.exit_code)
    except Exception as exc:  # a bug: say it, never leave the caller waiting
        _say({"error": {"code": "ERROR", "exit": 1, "message": f"{type(exc).__name__}: {exc}"}})
        os._exit(1)
    _say({"keeper": keeping.keeper.entry()})
    keeping.detach()
    try:
        keeping.run()
    finally:
        os._exit(0)


def _say(doc: dict[str, Any]) -> None:
    data = (json.dumps(doc) + "\n").encode("utf-8")
    with contextlib.suppress(OSError):
        os.write(1, data)


def _name_process(name: bytes) -> None:
    """Show the process as ``gitlease-keep`` in ``ps`` (best effort; Linux only)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


class _Keeping:
    """One keepalive process's state: its store, receipt, claims, watched process and log."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from .location import open_store

        self.resources: list[str] = list(spec["resources"])
        self.claim_ids: list[str] = list(spec["claim_ids"])
        self.receipt_path = Path(spec["receipt"])
        self.log_fd = _open_log(Path(spec["log"]))
        watch = spec["watch"]
        self.watched = Proc(int(watch["pid"]), int(watch["start"]), 0, "?", str(watch["name"]))
        self.limit_ms = int(spec["max_ms"])
        self.store = open_store(spec["store"], remote=spec["remote"])
        self.stopping = False
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._stop)
        self.pidfd = self._open_pidfd()
        rec, refs = self._claim_refs()
        self.claims = core.check_claims(self.store, rec, refs, 0)
        me = _procs.inspect(os.getpid())
        now = Now.read()
        self.deadline = _clock() + self.limit_ms / 1000
        self.keeper = Keeper(
            pid=os.getpid(),
            start=me.start if me else 0,
            boot=_procs.boot_id(),
            claims=tuple((c.resource, c.ref, c.claim_id) for c in refs),
            bundle_id=spec["bundle_id"],
            watched_pid=self.watched.pid,
            watched_start=self.watched.start,
            watched_name=self.watched.name,
            started_at=rfc3339(now.wall_ms),
            until=rfc3339(now.wall_ms + self.limit_ms),
            log=spec["log"],
        )
        keepers.register(self.store.git_dir, self.keeper)
        self.log(
            f"started: keeping {', '.join(self.resources)} alive while pid {self.watched.pid} "
            f"({self.watched.name}) lives, for {format_duration(self.limit_ms)} at most"
        )
        _tidy_logs(self.receipt_path.parent)

    def _stop(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def _open_pidfd(self) -> int | None:
        """A pidfd of the watched process (poll wakes when it ends), None where there is none;
        USAGE if it has already ended."""
        fd: int | None
        try:
            fd = os.pidfd_open(self.watched.pid)
        except (OSError, AttributeError):
            fd = None
        if not _procs.alive(self.watched.pid, self.watched.start):  # after the open: same one
            raise UsageError(f"process {self.watched.pid} ({self.watched.name}) has ended")
        return fd

    def _claim_refs(self) -> tuple[Receipt, list[ClaimRef]]:
        """The receipt as it is now, and its claims this process keeps; LOST once it no longer
        proves them (released: no token; replaced: another claim id; gone)."""
        rec = receipts_mod.read(self.receipt_path)
        refs = []
        for resource, claim_id in zip(self.resources, self.claim_ids, strict=True):
            ref = rec.claim_for(resource)
            if ref is None or ref.claim_id != claim_id:
                raise LostError(f"receipt {rec.path} no longer holds claim {claim_id}")
            refs.append(ref)
        if rec.token is None:
            raise LostError(f"receipt {rec.path} has no token: the claim was released")
        return rec, refs

    def detach(self) -> None:
        """Leave the caller's pipes: stdin from /dev/null, stdout and stderr to the log."""
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(self.log_fd, 1)
        os.dup2(self.log_fd, 2)

    def log(self, message: str) -> None:
        line = f"{rfc3339(Now.read().wall_ms)} pid {os.getpid()}: {message}\n"
        with contextlib.suppress(OSError):
            os.write(self.log_fd, line.encode("utf-8", "replace"))

    def run(self) -> None:
        try:
            reason = self._keep()
        except Exception:
            reason = "an unexpected error:\n" + traceback.format_exc()
        self.log(f"stopped: {reason}")
        try:
            keepers.unregister(self.store.git_dir, self.keeper.pid, self.keeper.start)
        except GitleaseError as exc:
            self.log(f"could not leave the registry: {exc}")

    def _left_ms(self) -> int:
        now = Now.read()
        return min(remaining_ms(c.record, now) for c in self.claims if c.record is not None)

    def _keep(self) -> str:
        """Renew until a reason to stop; that reason."""
        ttl_ms = min(c.record.ttl_ms for c in self.claims if c.record is not None)
        # the first renewal once a third of the TTL has gone (at once if more has)
        due = _clock() + max(0, self._left_ms() - 2 * ttl_ms // 3) / 1000
        while True:
            why = self._wait(due)
            if why is not None:
                return why
            try:
                rec, refs = self._claim_refs()
                left = self._left_ms()
                # a remote that does not answer must not outlast the claim it renews
                with self.store.within(max(left, 100) / 1000):
                    self.claims = core.renew_claims(self.store, rec, refs, None)
                ttl_ms = min(c.record.ttl_ms for c in self.claims if c.record is not None)
                self.log(f"renewed: {format_duration(self._left_ms())} left")
            except LostError as exc:
                return f"LOST: {exc}"
            except GitleaseError as exc:
                if self._left_ms() <= 0:
                    return f"the claim expired while renewing failed ({exc.code}: {exc})"
                self.log(f"renewal failed, retrying in a third of the TTL ({exc.code}: {exc})")
            due = _clock() + ttl_ms / 3000

    def _wait(self, due: float) -> str | None:
        """Sleep until ``due``; why to stop instead (told to, the watched process ended,
        --max reached), or None."""
        poller = select.poll()
        poller.register(self.wake_r, select.POLLIN)
        if self.pidfd is not None:
            poller.register(self.pidfd, select.POLLIN)
        while True:
            if self.stopping:
                return "told to stop (by `release`, or by a signal)"
            if not _procs.alive(self.watched.pid, self.watched.start):
                return (
                    f"the watched process {self.watched.pid} ({self.watched.name}) ended; "
                    "the claim is left to expire"
                )
            now = _clock()
            if now >= self.deadline:
                return (
                    f"--max ({format_duration(self.limit_ms)}) reached; the claim is left to expire"
                )
            if now >= due:
                return None
            timeout = min(due, self.deadline) - now
            if self.pidfd is None:
                timeout = min(timeout, POLL_SECONDS)
            poller.poll(max(1, int(timeout * 1000) + 1))
            with contextlib.suppress(OSError):
                os.read(self.wake_r, 512)


def _clock() -> float:
    """Seconds on the boot clock, which counts suspend, like claims' expiry."""
    return time.clock_gettime(_CLOCK)


def _open_log(path: Path) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
        os.fchmod(fd, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot open the keepalive log {path}: {exc.strerror}") from None
    return fd


def _tidy_logs(directory: Path) -> None:
    """Delete keepalive logs a day old whose receipt is gone (receipts are tidied; their
    logs would otherwise stay, one per kept claim, forever)."""
    cutoff = time.time() - OLD_LOG_SECONDS
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if not entry.name.endswith(LOG_SUFFIX):
            continue
        stem = entry.name.removesuffix(LOG_SUFFIX)
        if (directory / (stem + ".json")).exists() or (directory / stem).exists():
            continue
        with contextlib.suppress(OSError):
            if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
