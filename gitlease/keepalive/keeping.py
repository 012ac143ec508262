"""One kept claim (or bundle) inside the keeper: its own thread renews it at a third of its
TTL, each renewal a compare-and-swap against the record it read, while the watched process
lives, until ``--max``, until any LOST answer, or until the receipt no longer proves it
(docs/concepts.md, keeping a claim alive). The keeper (:mod:`gitlease.keepalive.process`)
accepts requests and starts and stops these; this module is what each one does, so the
socket server and the renewal loop read apart.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._util import procs as _procs
from .._util.procs import Proc
from ..claims import engine as core
from ..errors import GitleaseError, LostError, StoreError, UsageError
from ..model.claim import remaining_ms
from ..model.clock import Now, format_duration, rfc3339
from ..receipts import receipt as receipts_mod
from ..receipts.directory import LOG_SUFFIX, WAKE_SUFFIX
from ..receipts.receipt import ClaimRef, Receipt
from ..state import keepers
from ..state.keepers import Keeper

if TYPE_CHECKING:
    from .process import KeeperServer

#: Without a pidfd (old kernels), how often the watched process is looked at.
POLL_SECONDS = 0.5
#: Logs of receipts that are gone are deleted once they are this old.
OLD_LOG_SECONDS = 86_400
_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def clock() -> float:
    """Seconds on the boot clock, which counts suspend, like claims' expiry."""
    return time.clock_gettime(_CLOCK)


def pipe() -> tuple[int, int]:
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    return r, w


def poke(fd: int, what: bytes) -> None:
    with contextlib.suppress(OSError):  # (full: it will be read anyway)
        os.write(fd, what)


def drain(fd: int) -> bytes:
    """Everything there is to read from the non-blocking ``fd`` now."""
    out = b""
    with contextlib.suppress(OSError):
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            out += chunk
    return out


class Keeping:
    """One kept claim (or bundle) in the keeper: its store, receipt, claims, watched
    process, ``--max`` and log, renewed by a thread of its own."""

    def __init__(self, keeper: KeeperServer, spec: dict[str, Any]) -> None:
        from ..store.location import open_store

        self.owner = keeper
        self.resources: list[str] = list(spec["resources"])
        self.claim_ids: list[str] = list(spec["claim_ids"])
        self.receipt_path = Path(spec["receipt"])
        self.log_fd = _open_log(Path(spec["log"]))
        self.thread_done = threading.Event()
        self.stopping: str | None = None
        self.notify_r, self.notify_w = pipe()
        self.fds_lock = threading.Lock()  # (another thread may notify as this one ends)
        self.closed = False
        self.pidfd: int | None = None
        self.wake_path: Path | None = None
        try:
            watch = spec["watch"]
            self.watched = Proc(int(watch["pid"]), int(watch["start"]), 0, "?", str(watch["name"]))
            self.limit_ms = int(spec["max_ms"])
            self.store = open_store(spec["store"], remote=spec["remote"])
            self.pidfd = self._open_pidfd()
            rec, refs = self._claim_refs()
            self.claims_now = core.check_claims(self.store, rec, refs, 0)
            now = Now.read()
            self.deadline = clock() + self.limit_ms / 1000
            self.keeper = Keeper(
                pid=os.getpid(),
                start=keeper.start_time,
                boot=_procs.boot_id(),
                claims=tuple((c.resource, c.ref, c.claim_id) for c in refs),
                bundle_id=spec["bundle_id"],
                watched_pid=self.watched.pid,
                watched_start=self.watched.start,
                watched_name=self.watched.name,
                started_at=rfc3339(now.wall_ms),
                until=rfc3339(now.wall_ms + self.limit_ms),
                log=spec["log"],
                socket=str(keeper.where.socket),
            )
            with keeper.lock:  # (before it is registered: a drop finds it from then on)
                keeper.keepings.add(self)
            keepers.register(self.store.git_dir, self.keeper)
        except BaseException:
            with keeper.lock:
                keeper.keepings.discard(self)
            self._close()
            raise
        self.wake_path = keeper.subscribe(self.receipt_path, self)
        self.log(
            f"started: keeping {', '.join(self.resources)} alive while pid {self.watched.pid} "
            f"({self.watched.name}) lives, for {format_duration(self.limit_ms)} at most"
        )
        _tidy_logs(self.receipt_path.parent)

    def claims(self) -> tuple[tuple[str, str, str], ...]:
        return self.keeper.claims

    def notify(self, what: bytes) -> None:
        """Wake the thread (``w``: renew now; ``s``: look at :attr:`stopping`)."""
        with self.fds_lock:
            if not self.closed:
                poke(self.notify_w, what)

    def _close(self) -> None:
        with self.fds_lock:
            self.closed = True
            for fd in (self.log_fd, self.notify_r, self.notify_w, self.pidfd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def stop(self, reason: str) -> None:
        """Stop at once (from another thread): ``reason`` goes to the log."""
        if self.stopping is None:
            self.stopping = reason
        self.notify(b"s")

    def _open_pidfd(self) -> int | None:
        """A pidfd of the watched process (poll wakes when it ends), None where there is none;
        USAGE if it has already ended."""
        fd: int | None
        try:
            fd = os.pidfd_open(self.watched.pid)
            os.set_inheritable(fd, False)
        except (OSError, AttributeError):
            fd = None
        if not _procs.alive(self.watched.pid, self.watched.start):  # after the open: same one
            if fd is not None:
                os.close(fd)
            raise UsageError(f"process {self.watched.pid} ({self.watched.name}) has ended")
        return fd

    def _claim_refs(self) -> tuple[Receipt, list[ClaimRef]]:
        """The receipt as it is now, and its claims kept here; LOST once it no longer
        proves them (released: no token; replaced: another claim id; gone)."""
        rec = receipts_mod.read(self.receipt_path)
        refs = []
        for resource_name, claim_id in zip(self.resources, self.claim_ids, strict=True):
            ref = rec.claim_for(resource_name)
            if ref is None or ref.claim_id != claim_id:
                raise LostError(f"receipt {rec.path} no longer holds claim {claim_id}")
            refs.append(ref)
        if rec.token is None:
            raise LostError(f"receipt {rec.path} has no token: the claim was released")
        return rec, refs

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
            keepers.unregister(self.store.git_dir, self.keeper.pid, self.keeper.start,
                               claims=self.keeper.claims)  # fmt: skip
        except GitleaseError as exc:
            self.log(f"could not leave the registry: {exc}")
        if self.wake_path is not None:
            self.owner.unsubscribe(self.wake_path, self)
        with self.owner.lock:
            self.owner.keepings.discard(self)
        self._close()
        self.thread_done.set()
        self.owner.changed()

    def _left_ms(self) -> int:
        now = Now.read()
        return min(remaining_ms(c.record, now) for c in self.claims_now if c.record is not None)

    def _keep(self) -> str:
        """Renew until a reason to stop; that reason."""
        ttl_ms = min(c.record.ttl_ms for c in self.claims_now if c.record is not None)
        # the first renewal once a third of the TTL has gone (at once if more has)
        due = clock() + max(0, self._left_ms() - 2 * ttl_ms // 3) / 1000
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
                    # one compare-and-swap against the record read, under the guards
                    self.claims_now = core.renew_claims(self.store, rec, refs, None)
                ttl_ms = min(c.record.ttl_ms for c in self.claims_now if c.record is not None)
                self.log(f"renewed: {format_duration(self._left_ms())} left")
            except LostError as exc:
                if not self._drop_released(exc):
                    return f"LOST: {exc}"
                due = clock()  # the others: renewed at once
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
                due = clock() + retry
                continue
            failures = 0
            due = clock() + ttl_ms / 3000

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
            keepers.replace(self.store.git_dir, self.keeper, kept)
        self.keeper = kept
        self.log(f"{doc['resource']} was released: keeping {', '.join(self.resources)}")
        return True

    def _wait(self, due: float) -> str | None:
        """Sleep until ``due``; why to stop instead (told to, the watched process ended,
        --max reached), or None."""
        poller = select.poll()
        poller.register(self.notify_r, select.POLLIN)
        if self.pidfd is not None:
            poller.register(self.pidfd, select.POLLIN)
        while True:
            if self.stopping is not None or self.owner.stopping:
                return self.stopping or "told to stop (by a signal); the claim is left to expire"
            if not _procs.alive(self.watched.pid, self.watched.start):
                return (
                    f"the watched process {self.watched.pid} ({self.watched.name}) ended; "
                    "the claim is left to expire"
                )
            now = clock()
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
            got = drain(self.notify_r)
            if b"w" in got and b"s" not in got:
                self.log("woken: the claim's TTL changed; renewing now")
                return None  # a heartbeat changed the TTL: renew now, then at its cadence


def _retry_seconds(failures: int, left_ms: int, ttl_ms: int) -> float:
    """When to try a failed renewal again: soon (half a second, doubling with each failure
    in a row), but within a quarter of what the claim has left, so that several tries fit
    before it runs out (two short network flaps must not cost a claim), and never later
    than the usual third of a TTL. At least 50 ms: not a busy loop."""
    backoff: float = 0.5 * float(2 ** min(failures, 10))
    return max(0.05, min(backoff, left_ms / 4000, ttl_ms / 3000))


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
        if entry.name.endswith(WAKE_SUFFIX):  # the FIFO of a keeper killed with kill -9
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


def wait_all(keepings: list[Keeping], seconds: float) -> None:
    """Wait for the threads of ``keepings`` to end, ``seconds`` in all (one
    in a renewal that hangs on a remote ends when the claim has run out)."""
    deadline = time.monotonic() + seconds
    for keeping in keepings:
        keeping.thread_done.wait(max(0.0, deadline - time.monotonic()))
