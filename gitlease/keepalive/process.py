"""The keepalive process itself: renew a claim at a third of its TTL while the watched
process lives, then stop and leave the claim to expire (docs/concepts.md, keeping a claim
alive).

It is started by :func:`gitlease.keepalive.start.start` as ``python -c "from
gitlease.keepalive.process import serve; serve()"``, detached, with its parameters as one
JSON document on stdin; it answers on stdout with one JSON document (the
:class:`~gitlease.state.keepers.Keeper` it registered, or the error), then closes stdout
and keeps the claim until it must stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .._util import procs as _procs
from .._util.procs import Proc
from ..claims import engine as core
from ..errors import GitleaseError, LostError, StoreError, UsageError
from ..model.claim import remaining_ms
from ..model.clock import Now, format_duration, rfc3339
from ..receipts import receipt as receipts_mod
from ..receipts.directory import LOG_SUFFIX, WAKE_SUFFIX, wake_path
from ..receipts.receipt import ClaimRef, Receipt
from ..state import keepers
from ..state.keepers import Keeper

#: Without a pidfd (old kernels), how often the watched process is looked at.
POLL_SECONDS = 0.5
#: Logs of receipts that are gone are deleted once they are this old.
OLD_LOG_SECONDS = 86_400
_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def serve() -> None:
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
        from ..store.location import open_store

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
        self.wake_path, self.wake_fds = _open_wake(self.receipt_path)
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
        """Leave the caller's pipes: stdin from /dev/null, stdout and stderr to the log.

        Stdout moves last: its pipe closing is what tells the caller the keepalive has
        detached, so everything else must already be in place when the caller looks."""
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(self.log_fd, 2)
        os.dup2(self.log_fd, 1)

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
        if self.wake_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.wake_path)
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
        failures = 0
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
                if not self._drop_released(exc):
                    return f"LOST: {exc}"
                due = _clock()  # the others: renewed at once
                continue
            except GitleaseError as exc:
                if self._left_ms() <= 0:
                    return f"the claim expired while renewing failed ({exc.code}: {exc})"
                retry = _retry_seconds(failures, self._left_ms(), ttl_ms)
                failures += 1
                self.log(
                    f"renewal failed, retrying in {format_duration(int(retry * 1000))} "
                    f"({exc.code}: {exc})"
                )
                due = _clock() + retry
                continue
            failures = 0
            due = _clock() + ttl_ms / 3000

    def _drop_released(self, error: LostError) -> bool:
        """Whether ``error`` says one of several kept claims was released (a bundle member
        released on its own): it is no longer kept, and the others still are."""
        doc = error.claim or {}
        if len(self.resources) < 2 or doc.get("state") != "released":
            return False
        try:
            i = self.resources.index(str(doc.get("resource")))
        except ValueError:
            return False
        if self.claim_ids[i] != doc.get("claim_id"):
            return False
        dropped = self.claim_ids[i]
        del self.resources[i], self.claim_ids[i]
        kept = self.keeper.replace(claims=tuple(c for c in self.keeper.claims if c[2] != dropped))
        with contextlib.suppress(GitleaseError):  # (the registry says what is kept now)
            keepers.unregister(self.store.git_dir, self.keeper.pid, self.keeper.start)
            keepers.register(self.store.git_dir, kept)
            self.keeper = kept
        self.log(f"{doc['resource']} was released: keeping {', '.join(self.resources)}")
        return True

    def _wait(self, due: float) -> str | None:
        """Sleep until ``due``; why to stop instead (told to, the watched process ended,
        --max reached), or None."""
        poller = select.poll()
        poller.register(self.wake_r, select.POLLIN)
        if self.pidfd is not None:
            poller.register(self.pidfd, select.POLLIN)
        if self.wake_fds is not None:
            poller.register(self.wake_fds[0], select.POLLIN)
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
            if self.wake_fds is not None and _drained(self.wake_fds[0]):
                self.log("woken: the claim's TTL changed; renewing now")
                return None  # a heartbeat changed the TTL: renew now, then at its cadence


def _open_wake(receipt_path: Path) -> tuple[Path | None, tuple[int, int] | None]:
    """The FIFO a heartbeat that changes the TTL pokes (:func:`gitlease.receipts.directory.poke`):
    its path and (read end, a write end of our own, so it never reads as hung up). None
    where it cannot be made: the keepalive then keeps its cadence until its next renewal."""
    path = wake_path(receipt_path, os.getpid())
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a pid reused after a keepalive killed with kill -9
        os.mkfifo(path, 0o600)
        r = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        w = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None, None
    return path, (r, w)


def _drained(fd: int) -> bool:
    """Whether the FIFO ``fd`` had anything to read (all of it read)."""
    got = False
    with contextlib.suppress(OSError):
        while os.read(fd, 512):
            got = True
    return got


def _retry_seconds(failures: int, left_ms: int, ttl_ms: int) -> float:
    """When to try a failed renewal again: soon (half a second, doubling with each failure
    in a row), but within a quarter of what the claim has left, so that several tries fit
    before it runs out (two short network flaps must not cost a claim), and never later
    than the usual third of a TTL. At least 50 ms: not a busy loop."""
    backoff: float = 0.5 * float(2 ** min(failures, 10))
    return max(0.05, min(backoff, left_ms / 4000, ttl_ms / 3000))


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
        if entry.name.endswith(WAKE_SUFFIX):  # the FIFO of a keepalive killed with kill -9
            pid = entry.name.removesuffix(WAKE_SUFFIX).rsplit(".", 1)[-1]
            if pid.isascii() and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            continue
        if not entry.name.endswith(LOG_SUFFIX):
            continue
        stem = entry.name.removesuffix(LOG_SUFFIX)
        if (directory / (stem + ".json")).exists() or (directory / stem).exists():
            continue
        with contextlib.suppress(OSError):
            if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
