"""The keeper: one process per user, host and installation that keeps every claim kept
alive there (docs/concepts.md, keeping a claim alive; docs/design.md).

It is started by :func:`gitlease.keepalive.start.start` when none answers, as ``python -P
-c "from gitlease.keepalive.process import serve_keeper; serve_keeper()" gitlease-keeper
KEY``, detached, with the folder and key of its files (:mod:`gitlease.state.keeperlink`)
as one JSON document on stdin. It takes the ``flock`` of its pidfile, listens on its
socket, answers ``{"ready": PID}`` on stdout, closes it, and serves:

* ``keep``: the parameters of one kept claim (or bundle): store, receipt, claims, the
  watched process, ``--max``, the log. It checks the claims, registers them
  (:mod:`gitlease.state.keepers`) and answers the registry entry; from then on a thread of
  its own renews them at a third of their TTL, each renewal a compare-and-swap against the
  record it read, while the watched process lives (its pidfd wakes the thread when it ends),
  until ``--max``, until any LOST answer, or until the receipt no longer proves them.
* ``drop``: stop keeping those claims (``release`` asks), answering once they are no longer
  kept and whether the keeper now ends.
* ``status``: its pid and what it keeps.

It ends as soon as it keeps nothing (and has served its first request), on SIGTERM,
SIGINT or SIGHUP (every claim is then left to expire), or when killed: its claims then
lapse within their TTL, and the next ``keepalive`` starts another keeper. A heartbeat that
changes a kept claim's TTL pokes the FIFO next to the receipt
(:func:`gitlease.receipts.directory.poke`); the keeper's main thread reads every such FIFO
and wakes the claims' threads.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import resource
import select
import signal
import socket
import sys
import threading
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
from ..state import keeperlink, keepers
from ..state.keepers import Keeper

#: Without a pidfd (old kernels), how often the watched process is looked at.
POLL_SECONDS = 0.5
#: Logs of receipts that are gone are deleted once they are this old.
OLD_LOG_SECONDS = 86_400
#: A new keeper waits this long for its first request before it ends, keeping nothing.
FIRST_REQUEST_SECONDS = 30.0
#: How long a keeper that finds its pidfile locked waits for the keeper ending there.
LOCK_WAIT_SECONDS = 10.0
#: How long ``drop`` waits for a claim's thread to end.
DROP_WAIT_SECONDS = 2.0
#: The keeper's own log is started afresh beyond this size.
KEEPER_LOG_MAX = 1 << 20
_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


class _Busy(Exception):
    """Another keeper holds the pidfile and does not end: the caller asks that one."""


def serve_keeper() -> None:
    """The keeper's entry point (``python -c``): read its folder and key from stdin, fork
    once more (the child is not its session's leader, so it can never gain a controlling
    terminal, and the caller reaps its parent at once), then serve."""
    boot = json.loads(sys.stdin.buffer.read())
    if os.fork() != 0:
        os._exit(0)
    os.umask(0o077)
    _name_process(b"gitlease-keeper")
    try:
        keeper = _Keeper(_paths(boot))
    except _Busy:
        _say({"busy": True})
        os._exit(0)
    except GitleaseError as exc:
        _say({"error": {"code": exc.code, "exit": exc.exit_code, "message": exc.message}})
        os._exit(exc.exit_code)
    except Exception as exc:  # a bug: say it, never leave the caller waiting
        _say({"error": {"code": "ERROR", "exit": 1, "message": f"{type(exc).__name__}: {exc}"}})
        os._exit(1)
    _say({"ready": os.getpid()})
    keeper.detach()
    try:
        keeper.run()
    except BaseException:
        keeper.log("ended by an unexpected error:\n" + traceback.format_exc())
    finally:
        os._exit(0)


def _paths(boot: dict[str, Any]) -> keeperlink.Paths:
    folder, key = Path(boot["folder"]), str(boot["key"])
    return keeperlink.Paths(
        folder,
        key,
        folder / f"keeper-{key}.sock",
        folder / f"keeper-{key}.pid",
        folder / f"keeper-{key}.lock",
        folder / f"keeper-{key}.log",
    )


def _say(doc: dict[str, Any]) -> None:
    data = (json.dumps(doc) + "\n").encode("utf-8")
    with contextlib.suppress(OSError):
        os.write(1, data)


def _name_process(name: bytes) -> None:
    """Show the process as ``gitlease-keeper`` in ``ps`` (best effort; Linux only)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _clock() -> float:
    """Seconds on the boot clock, which counts suspend, like claims' expiry."""
    return time.clock_gettime(_CLOCK)


def _pipe() -> tuple[int, int]:
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    return r, w


def _poke(fd: int, what: bytes) -> None:
    with contextlib.suppress(OSError):  # (full: it will be read anyway)
        os.write(fd, what)


def _drain(fd: int) -> bytes:
    """Everything there is to read from the non-blocking ``fd`` now."""
    out = b""
    with contextlib.suppress(OSError):
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            out += chunk
    return out


# ------------------------------------------------------------------ the keeper


class _Keeper:
    """The process: its socket, its claims (one :class:`_Keeping` thread each), the FIFOs a
    heartbeat pokes, and the rule that it ends when it keeps nothing."""

    def __init__(self, where: keeperlink.Paths) -> None:
        self.where = where
        self.pidfile_fd = self._lock_pidfile()
        me = _procs.inspect(os.getpid())
        self.start_time = me.start if me else 0
        self.log_fd: int | None = None
        self.lock = threading.Lock()
        self.keepings: set[_Keeping] = set()
        self.connections = 0
        self.served = False
        self.stopping = False
        #: receipt FIFO path -> [read fd, write fd of our own, the keepings it wakes]
        self.fifos: dict[Path, tuple[int, int, set[_Keeping]]] = {}
        self.closing: list[int] = []
        self.control_r, self.control_w = _pipe()
        self.signal_r, self.signal_w = _pipe()
        signal.set_wakeup_fd(self.signal_w)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        _raise_open_files_limit()
        self.listener = self._listen()

    # ---------------------------------------------------------------- start and end

    def _lock_pidfile(self) -> int:
        fd = os.open(self.where.pidfile, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # a keeper ending there (it closed its socket, it releases this next); or
                # one that serves, found by the caller's next connect
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise _Busy() from None
                time.sleep(0.02)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd

    def _listen(self) -> socket.socket:
        path = os.fspath(self.where.socket)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a keeper that was killed: we hold the pidfile, so none serves
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind(path)
            os.chmod(path, 0o600)
            sock.listen(64)
        except OSError as exc:
            sock.close()
            raise StoreError(f"cannot listen on {path}: {exc.strerror}") from None
        sock.setblocking(False)
        self.socket_ino = os.stat(path).st_ino
        return sock

    def detach(self) -> None:
        """Leave the caller's pipes: stdin from /dev/null, stdout and stderr to the log.

        Stdout moves last: its pipe closing is what tells the caller the keeper has
        detached, so everything else must already be in place when the caller looks."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        with contextlib.suppress(OSError):
            if os.stat(self.where.log).st_size > KEEPER_LOG_MAX:
                flags |= os.O_TRUNC
        try:
            self.log_fd = os.open(self.where.log, flags, 0o600)
        except OSError:
            self.log_fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(self.log_fd, 2)
        os.dup2(self.log_fd, 1)
        self.log(f"started, listening on {self.where.socket}")

    def log(self, message: str) -> None:
        if self.log_fd is None:
            return
        line = f"{rfc3339(Now.read().wall_ms)} keeper pid {os.getpid()}: {message}\n"
        with contextlib.suppress(OSError):
            os.write(self.log_fd, line.encode("utf-8", "replace"))

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def _end(self) -> None:
        """Stop listening (a caller that connects from now on starts another keeper, which
        waits for this one's pidfile), then let the pidfile go."""
        self.listener.close()
        with contextlib.suppress(OSError):
            if os.stat(self.where.socket).st_ino == self.socket_ino:
                os.unlink(self.where.socket)
        self.log("ended: keeping nothing")
        os.close(self.pidfile_fd)

    # ---------------------------------------------------------------- the loop

    def run(self) -> None:
        first_by = _clock() + FIRST_REQUEST_SECONDS
        while True:
            if self.stopping:
                self._stop_all("told to stop (by a signal); the claim is left to expire")
                self._end()
                return
            with self.lock:
                idle = not self.keepings and self.connections == 0
                self._close_deferred()
                fifos = {r: path for path, (r, _, _) in self.fifos.items()}
            if idle and (self.served or _clock() >= first_by):
                if not self._accept():  # a caller that connected just now is served first
                    self._end()
                    return
                continue
            poller = select.poll()
            for fd in (self.listener.fileno(), self.control_r, self.signal_r, *fifos):
                poller.register(fd, select.POLLIN)
            timeout = None if not idle else max(1, int((first_by - _clock()) * 1000) + 1)
            for fd, _ in poller.poll(timeout):
                if fd == self.listener.fileno():
                    self._accept()
                elif fd in fifos:
                    self._woken(fifos[fd], fd)
                else:
                    _drain(fd)

    def _accept(self) -> bool:
        """Serve every caller waiting on the socket, each in a thread; whether there was one."""
        got = False
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return got
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self.log(f"cannot accept a caller: {exc.strerror}")
                return got
            got = True
            _pid, uid = keeperlink.peer(conn)
            if uid != os.geteuid():  # another user's process: never served
                conn.close()
                continue
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _woken(self, path: Path, fd: int) -> None:
        """A heartbeat changed a TTL: every claim of that receipt renews now."""
        if not _drain(fd):
            return
        with self.lock:
            subs = list(self.fifos.get(path, (0, 0, set()))[2])
        for keeping in subs:
            keeping.notify(b"w")

    def _close_deferred(self) -> None:
        """(Under the lock, in the main thread, between two polls: a FIFO's descriptors are
        closed only when no poll holds them.)"""
        for fd in self.closing:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.closing.clear()

    def _stop_all(self, reason: str) -> None:
        with self.lock:
            every = list(self.keepings)
        for keeping in every:
            keeping.stop(reason)
        _wait_all(every)

    def changed(self) -> None:
        """Tell the main loop to look again (a claim ended, a FIFO came or went)."""
        _poke(self.control_w, b"c")

    # ---------------------------------------------------------------- requests

    def _serve(self, conn: socket.socket) -> None:
        keeping: _Keeping | None = None
        try:
            try:
                answer, keeping = self._answer(conn)
            except Exception as exc:  # a bug: say it, never leave the caller waiting
                self.log("a request failed:\n" + traceback.format_exc())
                answer = {"error": {"code": "ERROR", "exit": 1, "message": f"{exc!r}"}}
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(answer).encode("utf-8") + b"\n")
        finally:
            conn.close()
            with self.lock:
                self.connections -= 1
                self.served = True
            self.changed()
        if keeping is not None:
            keeping.run()

    def _answer(self, conn: socket.socket) -> tuple[dict[str, Any], _Keeping | None]:
        doc = _read_request(conn)
        if doc is None:
            return {"error": _error(UsageError("no request, or not one line of JSON"))}, None
        if doc.get("v") != keeperlink.PROTOCOL:
            return {"error": _error(UsageError(f"protocol {doc.get('v')!r}, not mine"))}, None
        op = doc.get("op")
        if op == "keep":
            try:
                keeping = _Keeping(self, doc["spec"])
            except GitleaseError as exc:
                return {"error": _error(exc)}, None
            except (KeyError, TypeError, ValueError) as exc:
                return {"error": _error(UsageError(f"bad parameters: {exc!r}"))}, None
            return {"keeper": keeping.keeper.entry()}, keeping
        if op == "drop":
            return self._drop(doc), None
        if op == "status":
            with self.lock:
                kept = [k.keeper.entry() for k in self.keepings]
            return {"pid": os.getpid(), "start": self.start_time, "keeping": kept}, None
        return {"error": _error(UsageError(f"unknown request {op!r}"))}, None

    def _drop(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Stop keeping every claim of ``store`` whose claims are all among ``claims`` (they
        were released), once each has left the registry; whether the keeper then ends."""
        store = str(doc.get("store"))
        wanted = {(str(r), str(c)) for r, c in doc.get("claims") or []}
        with self.lock:
            found = [
                k
                for k in self.keepings
                if str(k.store.git_dir) == store and {(r, c) for _, r, c in k.claims()} <= wanted
            ]
        for keeping in found:
            keeping.stop("told to stop (by `release`)")
        _wait_all(found)
        with self.lock:
            ending = not self.keepings and self.connections <= 1
        return {"dropped": len(found), "pid": os.getpid(), "ending": ending}

    # ---------------------------------------------------------------- FIFOs

    def subscribe(self, receipt_path: Path, keeping: _Keeping) -> Path | None:
        """Listen on the FIFO of ``receipt_path`` for ``keeping`` (one FIFO per receipt,
        shared by the claims kept from it); its path, or None where none can be made (the
        claim then keeps its cadence until its next renewal)."""
        path = wake_path(receipt_path, os.getpid())
        with self.lock:
            if path in self.fifos:
                self.fifos[path][2].add(keeping)
                return path
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)  # a pid reused after a keeper killed with kill -9
                os.mkfifo(path, 0o600)
                r = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                w = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return None
            self.fifos[path] = (r, w, {keeping})
        self.changed()
        return path

    def unsubscribe(self, path: Path, keeping: _Keeping) -> None:
        with self.lock:
            found = self.fifos.get(path)
            if found is None:
                return
            found[2].discard(keeping)
            if found[2]:
                return
            del self.fifos[path]
            self.closing.extend(found[:2])
        with contextlib.suppress(OSError):
            os.unlink(path)
        self.changed()


def _wait_all(keepings: list[_Keeping]) -> None:
    """Wait for the threads of ``keepings`` to end, :data:`DROP_WAIT_SECONDS` in all (one
    in a renewal that hangs on a remote ends when the claim has run out)."""
    deadline = time.monotonic() + DROP_WAIT_SECONDS
    for keeping in keepings:
        keeping.thread_done.wait(max(0.0, deadline - time.monotonic()))


def _raise_open_files_limit() -> None:
    """Each kept claim holds a few descriptors (its log, pidfd, pipe, FIFO, repository)."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 1 << 16), hard))


def _read_request(conn: socket.socket) -> dict[str, Any] | None:
    conn.settimeout(keeperlink.ANSWER_SECONDS)
    data = b""
    try:
        while b"\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
            if len(data) > keeperlink.MAX_MESSAGE:
                return None
    except OSError:
        return None
    try:
        doc = json.loads(data.partition(b"\n")[0])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _error(exc: GitleaseError) -> dict[str, Any]:
    return {"code": exc.code, "exit": exc.exit_code, "message": exc.message}


# ------------------------------------------------------------------ one kept claim


class _Keeping:
    """One kept claim (or bundle) in the keeper: its store, receipt, claims, watched
    process, ``--max`` and log, renewed by a thread of its own."""

    def __init__(self, keeper: _Keeper, spec: dict[str, Any]) -> None:
        from ..store.location import open_store

        self.owner = keeper
        self.resources: list[str] = list(spec["resources"])
        self.claim_ids: list[str] = list(spec["claim_ids"])
        self.receipt_path = Path(spec["receipt"])
        self.log_fd = _open_log(Path(spec["log"]))
        self.thread_done = threading.Event()
        self.stopping: str | None = None
        self.notify_r, self.notify_w = _pipe()
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
            self.deadline = _clock() + self.limit_ms / 1000
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
                _poke(self.notify_w, what)

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
                    # one compare-and-swap against the record read, under the guards
                    self.claims_now = core.renew_claims(self.store, rec, refs, None)
                ttl_ms = min(c.record.ttl_ms for c in self.claims_now if c.record is not None)
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
            got = _drain(self.notify_r)
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
