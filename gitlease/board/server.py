"""The board's web server: the standard library's threading HTTP server, loopback only.

Read-only by construction: it answers GET (and HEAD) for four fixed paths, and 405
to every other method. It holds no token and serves no receipt path (the claim
documents carry neither). Because the page is reachable from any web page the
user's browser opens (as ``http://127.0.0.1:PORT``), the server also refuses a
request whose ``Host`` header is not the loopback name it listens on (a DNS
rebinding attack names another host), and every answer carries a strict
Content-Security-Policy: the page's own script and style, nothing inline,
nothing from elsewhere.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, ClassVar

from ..errors import UsageError
from .data import Board

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/board.js": ("board.js", "text/javascript; charset=utf-8"),
    "/board.css": ("board.css", "text/css; charset=utf-8"),
}


def static_file(name: str) -> bytes:
    """One of the page's files, shipped in the package."""
    package = __name__.rpartition(".")[0]  # gitlease.board (its static/ is package data)
    return (resources.files(package) / "static" / name).read_bytes()


def loopback_address(host: str) -> str:
    """``host`` as a loopback IP address, or USAGE: the board never listens elsewhere."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise UsageError(
            f"--host {host!r}: give a loopback IP address (127.0.0.1, ::1); the board is "
            "served to this machine only"
        ) from None
    if not address.is_loopback:
        raise UsageError(
            f"--host {host}: not a loopback address; the board listens on the loopback "
            "interface only (127.0.0.0/8 or ::1), never on an address other machines can reach"
        )
    return str(address)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    board: Board
    hosts: frozenset[str]


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


class Handler(BaseHTTPRequestHandler):
    """GET only; everything else 405."""

    server: _Server
    server_version = "gitlease-board"
    sys_version = ""
    _FILES: ClassVar[dict[str, bytes]] = {}

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the board's stdout carries its address line only."""

    def _headers(self, status: int, kind: str, length: int, extra: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Board-Now", str(time.time_ns() // 1_000_000))  # the page's clock
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()

    def _send(self, status: int, kind: str, body: bytes, **extra: str) -> None:
        self._headers(status, kind, len(body), extra)
        if self.command != "HEAD":
            self.wfile.write(body)

    def _text(self, status: int, text: str, **extra: str) -> None:
        self._send(status, "text/plain; charset=utf-8", (text + "\n").encode(), **extra)

    def _host_ok(self) -> bool:
        return self.headers.get("Host", "") in self.server.hosts

    def do_GET(self) -> None:
        if not self._host_ok():
            self._text(HTTPStatus.MISDIRECTED_REQUEST, "not a loopback name of this board")
            return
        path = self.path.split("?", 1)[0]
        board = self.server.board
        try:
            if path == "/api/board":
                body, etag = board.page()
                if self.headers.get("If-None-Match") == etag:
                    self._headers(HTTPStatus.NOT_MODIFIED, "application/json", 0, {"ETag": etag})
                    return
                self._send(HTTPStatus.OK, "application/json", body, ETag=etag)
            elif path == "/api/claims":
                doc = board.claims()
                body = json.dumps(doc, ensure_ascii=True, indent=2).encode("ascii")
                self._send(HTTPStatus.OK, "application/json", body)
            elif path in _STATIC:
                name, kind = _STATIC[path]
                if name not in self._FILES:
                    self._FILES[name] = static_file(name)
                self._send(HTTPStatus.OK, kind, self._FILES[name])
            elif path == "/favicon.ico":
                self._send(HTTPStatus.NO_CONTENT, "image/x-icon", b"")
            else:
                self._text(HTTPStatus.NOT_FOUND, "not found")
        except (BrokenPipeError, ConnectionResetError):
            return  # the page went away mid-answer: nothing to tell it
        except Exception as exc:  # a store that cannot be read: said, the server goes on
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self._send(
                HTTPStatus.SERVICE_UNAVAILABLE,
                "application/json",
                json.dumps({"error": message}, ensure_ascii=True).encode("ascii"),
            )

    do_HEAD = do_GET

    def _refuse(self) -> None:
        self._text(HTTPStatus.METHOD_NOT_ALLOWED, "the board is read-only", Allow="GET, HEAD")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse


def make_server(board: Board, host: str = "127.0.0.1", port: int = 0) -> _Server:
    """A server bound to ``host`` (a loopback address, else USAGE) and ``port`` (0: free)."""
    address = loopback_address(host)
    cls = _IPv6Server if ":" in address else _Server
    try:
        server = cls((address, port), Handler)
    except OSError as exc:
        raise UsageError(f"cannot listen on {address} port {port}: {exc.strerror or exc}") from None
    server.board = board
    bound_port = server.server_address[1]
    shown = f"[{address}]" if ":" in address else address
    names = {shown, "localhost"} | ({"127.0.0.1"} if address == "127.0.0.1" else set())
    server.hosts = frozenset(f"{n}:{bound_port}" for n in names)
    return server


def url(server: _Server) -> str:
    """The page's address."""
    host, port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"
