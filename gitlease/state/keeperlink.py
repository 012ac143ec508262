"""Where this user's keeper listens on this host, and one request to it.

One keeper process per user, host and installation keeps every claim kept alive there
(:mod:`gitlease.keepalive.process`). It is found in a private folder: the user's
``$XDG_RUNTIME_DIR/gitlease`` (a ``tmpfs`` made for this, gone with the session), else
``$XDG_STATE_HOME/gitlease/run`` (default ``~/.local/state/gitlease/run``), created
mode 0700 and refused if it is not this user's alone. In it, for a key naming the
installation and the environment git reaches remotes with (:func:`key`):

* ``keeper-<key>.sock``: the Unix socket the keeper listens on;
* ``keeper-<key>.pid``: its pid, ``flock``'d for as long as it runs (a second keeper
  started meanwhile waits for it to end, so two never serve one socket);
* ``keeper-<key>.lock``: taken by a caller that starts a keeper, so two never start one;
* ``keeper-<key>.log``: the keeper's own log (each claim's log stays next to its receipt).

A request is one JSON line, the answer one JSON line. Each side checks the other's
credentials (``SO_PEERCRED``): the keeper answers only its own user, and a caller talks
only to a keeper of its own user, and, when it names one, to that process. Other users on a
shared store therefore never share a keeper, and a socket somebody else put in the way is
refused, not trusted.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import sys
import time
from pathlib import Path
from typing import Any

from .._util.digest import sha256
from .._util.value import Value
from ..errors import StoreError

#: Changes when the keeper's requests or answers change: an older keeper is never asked.
PROTOCOL = 1
#: The longest request or answer accepted (a claim's parameters are a few hundred bytes).
MAX_MESSAGE = 1 << 20
#: How long a caller waits for the keeper's answer; a keeper, for a caller's request.
ANSWER_SECONDS = 30.0
_UNIX_PATH_MAX = 107
#: What a remote's git reads from the environment (and gitlease's own setting): two
#: callers that differ in one of these get a keeper each, so a renewal never reaches a
#: remote with another session's credentials, proxy or git.
_ENV_NAMES = ("HOME", "PATH", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "GITLEASE_REMOTE_TIMEOUT")
_ENV_PREFIXES = ("GIT_", "SSH_")
_ENV_PROXIES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")


class NoKeeper(Exception):
    """Nothing (or nothing of ours) listens at the keeper's socket: start one."""


class Dropped(Exception):
    """The keeper closed the connection before answering (it was ending): ask again."""


class Unanswered(StoreError):
    """The keeper took the request and did not answer in time: whether it acted is unknown."""


class Paths(Value):
    """The files of one keeper (see the module's docstring)."""

    __slots__ = ("folder", "key", "socket", "pidfile", "lock", "log")
    folder: Path
    key: str
    socket: Path
    pidfile: Path
    lock: Path
    log: Path


def key(env: dict[str, str]) -> str:
    """The keeper for callers with this environment and this installation: the Python that
    runs it, the gitlease it imports, the protocol, and the values (never stored) of
    the variables git and ssh read to reach a remote."""
    named = sorted(
        (k, v)
        for k, v in env.items()
        if k in _ENV_NAMES or k.startswith(_ENV_PREFIXES) or k.lower() in _ENV_PROXIES
    )
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # gitlease/
    doc = [PROTOCOL, sys.executable, package, named]
    return sha256(json.dumps(doc).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def folder() -> Path:
    """This user's private folder for keepers (made 0700; STORE if it is not private)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    # (a runtime folder others can write is passed over: they could rename gitlease/ in it
    # and put their own in its place between the check below and the keeper's start)
    if runtime and os.path.isabs(runtime) and _is_private(Path(runtime), strict=True):
        path = Path(runtime) / "gitlease"
    else:
        state = os.environ.get("XDG_STATE_HOME") or os.path.join(
            os.path.expanduser("~"), ".local", "state"
        )
        path = Path(state) / "gitlease" / "run"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
    except OSError as exc:
        raise StoreError(f"cannot make the keepalive folder {path}: {exc.strerror}") from None
    if not _is_private(path, strict=True):
        raise StoreError(
            f"the keepalive folder {path} is not this user's alone (it must be a folder, "
            "not a link, owned by this user, mode 0700): remove it, or set XDG_RUNTIME_DIR"
        )
    return path


def _is_private(path: Path, *, strict: bool) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    return not strict or st.st_mode & 0o077 == 0


def paths_in(where: Path, k: str) -> Paths:
    """The keeper files of key ``k`` in ``where``: named once, for the callers and for the
    keeper, which is given the folder and the key."""
    return Paths(
        where,
        k,
        where / f"keeper-{k}.sock",
        where / f"keeper-{k}.pid",
        where / f"keeper-{k}.lock",
        where / f"keeper-{k}.log",
    )


def paths(env: dict[str, str]) -> Paths:
    """The keeper files for callers with ``env`` (the folder made if need be)."""
    out = paths_in(folder(), key(env))
    if len(os.fsencode(out.socket)) > _UNIX_PATH_MAX:
        raise StoreError(
            f"the keepalive socket's path {out.socket} is too long for a Unix socket: set "
            "XDG_RUNTIME_DIR (or XDG_STATE_HOME) to a shorter folder"
        )
    return out


def peer(sock: socket.socket) -> tuple[int, int]:
    """The ``(pid, uid)`` of the process at the other end of a Unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def request(
    socket_path: Path | str,
    message: dict[str, Any],
    *,
    pid: int | None = None,
    timeout: float = ANSWER_SECONDS,
) -> dict[str, Any]:
    """Send ``message`` to the keeper at ``socket_path`` and return its answer.

    NoKeeper when nothing listens there, or something that is not this user's (or not the
    process ``pid``, when given); Dropped when the keeper hung up without answering (it
    was ending: nothing was done); Unanswered when it does not answer within ``timeout``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(os.fspath(socket_path))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            raise NoKeeper(str(socket_path)) from None
        except OSError as exc:
            raise NoKeeper(f"{socket_path}: {exc.strerror}") from None
        their_pid, their_uid = peer(sock)
        if their_uid != os.geteuid() or (pid is not None and their_pid != pid):
            raise NoKeeper(f"{socket_path} is served by another user's process")
        data = json.dumps({**message, "v": PROTOCOL}).encode("utf-8") + b"\n"
        try:
            sock.sendall(data)
            answer = _read_line(sock, time.monotonic() + timeout)
        except TimeoutError:
            raise Unanswered(
                f"the keeper at {socket_path} did not answer within {timeout:.0f} seconds"
            ) from None
        except (ConnectionResetError, BrokenPipeError):
            raise Dropped(str(socket_path)) from None
        if answer is None:
            raise Dropped(str(socket_path))
        try:
            doc = json.loads(answer)
        except ValueError:
            raise StoreError(f"the keeper at {socket_path} answered nonsense") from None
        if not isinstance(doc, dict):
            raise StoreError(f"the keeper at {socket_path} answered nonsense")
        return doc
    finally:
        sock.close()


def read_request(conn: socket.socket) -> dict[str, Any] | None:
    """The keeper's side of :func:`request`: one line of JSON naming an object, or None for
    anything else (a client that hung up, stalled for :data:`ANSWER_SECONDS`, sent more than
    :data:`MAX_MESSAGE` bytes or no object), which the keeper answers as a bad request."""
    try:
        line = _read_line(conn, time.monotonic() + ANSWER_SECONDS)
    except (OSError, StoreError):
        return None
    if line is None:
        return None
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _read_line(sock: socket.socket, deadline: float) -> bytes | None:
    """One line from ``sock`` (without its newline), None if it closed first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            return None
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_MESSAGE:
            raise StoreError("the keeper's answer is too long")
