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
from ..errors import GitleaseError, StoreError, UsageError
from ..model.clock import Now, rfc3339
from ..receipts.directory import wake_path
from ..state import keeperlink
from .keeping import Keeping, clock, drain, pipe, poke, wait_all

#: A new keeper waits this long for its first request before it ends, keeping nothing.
FIRST_REQUEST_SECONDS = 30.0
#: How long a keeper that finds its pidfile locked waits for the keeper ending there.
LOCK_WAIT_SECONDS = 10.0
#: How long ``drop`` waits for a claim's thread to end.
DROP_WAIT_SECONDS = 2.0
#: The keeper's own log is started afresh beyond this size.
KEEPER_LOG_MAX = 1 << 20


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
    _procs.name_process(b"gitlease-keeper")
    try:
        keeper = KeeperServer(keeperlink.paths_in(Path(boot["folder"]), str(boot["key"])))
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


def _say(doc: dict[str, Any]) -> None:
    data = (json.dumps(doc) + "\n").encode("utf-8")
    with contextlib.suppress(OSError):
        os.write(1, data)


# ------------------------------------------------------------------ the keeper


class KeeperServer:
    """The process: its socket, its claims (one :class:`Keeping` thread each), the FIFOs a
    heartbeat pokes, and the rule that it ends when it keeps nothing."""

    def __init__(self, where: keeperlink.Paths) -> None:
        self.where = where
        self.pidfile_fd = self._lock_pidfile()
        me = _procs.inspect(os.getpid())
        self.start_time = me.start if me else 0
        self.log_fd: int | None = None
        self.lock = threading.Lock()
        self.keepings: set[Keeping] = set()
        self.connections = 0
        self.served = False
        self.stopping = False
        #: receipt FIFO path -> [read fd, write fd of our own, the keepings it wakes]
        self.fifos: dict[Path, tuple[int, int, set[Keeping]]] = {}
        self.closing: list[int] = []
        self.control_r, self.control_w = pipe()
        self.signal_r, self.signal_w = pipe()
        signal.set_wakeup_fd(self.signal_w)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        _procs.raise_open_files_limit()
        self.listener = self._listen()

    # ---------------------------------------------------------------- start and end

    def _lock_pidfile(self) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW  # (never a planted link)
        fd = os.open(self.where.pidfile, flags, 0o600)
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
        old_umask = os.umask(0o177)  # (made 0600 as it is made: no chmod of a swapped path)
        try:
            sock.bind(path)
            sock.listen(64)
        except OSError as exc:
            sock.close()
            raise StoreError(f"cannot listen on {path}: {exc.strerror}") from None
        finally:
            os.umask(old_umask)
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
        first_by = clock() + FIRST_REQUEST_SECONDS
        while True:
            if self.stopping:
                self._stop_all("told to stop (by a signal); the claim is left to expire")
                self._end()
                return
            with self.lock:
                idle = not self.keepings and self.connections == 0
                self._close_deferred()
                fifos = {r: path for path, (r, _, _) in self.fifos.items()}
            if idle and (self.served or clock() >= first_by):
                if not self._accept():  # a caller that connected just now is served first
                    self._end()
                    return
                continue
            poller = select.poll()
            for fd in (self.listener.fileno(), self.control_r, self.signal_r, *fifos):
                poller.register(fd, select.POLLIN)
            timeout = None if not idle else max(1, int((first_by - clock()) * 1000) + 1)
            for fd, _ in poller.poll(timeout):
                if fd == self.listener.fileno():
                    self._accept()
                elif fd in fifos:
                    self._woken(fifos[fd], fd)
                else:
                    drain(fd)

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
        if not drain(fd):
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
        wait_all(every, DROP_WAIT_SECONDS)

    def changed(self) -> None:
        """Tell the main loop to look again (a claim ended, a FIFO came or went)."""
        poke(self.control_w, b"c")

    # ---------------------------------------------------------------- requests

    def _serve(self, conn: socket.socket) -> None:
        keeping: Keeping | None = None
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

    def _answer(self, conn: socket.socket) -> tuple[dict[str, Any], Keeping | None]:
        doc = keeperlink.read_request(conn)
        if doc is None:
            return {"error": _error(UsageError("no request, or not one line of JSON"))}, None
        if doc.get("v") != keeperlink.PROTOCOL:
            return {"error": _error(UsageError(f"protocol {doc.get('v')!r}, not mine"))}, None
        op = doc.get("op")
        if op == "keep":
            try:
                keeping = Keeping(self, doc["spec"])
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
        wait_all(found, DROP_WAIT_SECONDS)
        with self.lock:
            ending = not self.keepings and self.connections <= 1
        return {"dropped": len(found), "pid": os.getpid(), "ending": ending}

    # ---------------------------------------------------------------- FIFOs

    def subscribe(self, receipt_path: Path, keeping: Keeping) -> Path | None:
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

    def unsubscribe(self, path: Path, keeping: Keeping) -> None:
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


def _error(exc: GitleaseError) -> dict[str, Any]:
    return {"code": exc.code, "exit": exc.exit_code, "message": exc.message}


# ------------------------------------------------------------------ one kept claim
