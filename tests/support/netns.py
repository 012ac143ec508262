"""Hosts in network namespaces, for the multi-host tests (tests/system/test_netns.py).

Where the machine allows it (root, ``ip netns add`` works), each host is a network
namespace of its own: the server's namespace runs a real ``git daemon``, and each
client namespace reaches it over a veth pair of its own (10.211.N.2 -> 10.211.N.1),
so that one client can be cut off while the others carry on. A partition drops the
client's packets silently at the server's side (``iptables -j DROP`` where iptables
is installed, else the server's end of the veth pair set down): connections hang,
nothing is refused, as in a real partition.

Otherwise everything runs on 127.0.0.1: each client reaches the daemon through a
small TCP forwarder of its own, and a partition stops that forwarder (SIGSTOP): it
accepts connections and never answers.

Nothing listens outside: the namespaces have no route to any other network, and the
fallback listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from servers import stop_process

FORWARDER = r"""
import socket, sys, threading
listen = socket.create_server(("127.0.0.1", 0))
target = ("127.0.0.1", int(sys.argv[1]))
print(listen.getsockname()[1], flush=True)
def pipe(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    client, _ = listen.accept()
    server = socket.create_connection(target)
    for a, b in ((client, server), (server, client)):
        threading.Thread(target=pipe, args=(a, b), daemon=True).start()
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True)


def namespaces_work() -> bool:
    """Whether ``ip netns add`` works here (root, iproute2, a kernel that allows it).
    ``TESTS_NO_NETNS=1`` takes the 127.0.0.1 fallback anyway (to test the fallback)."""
    if os.environ.get("TESTS_NO_NETNS") == "1" or os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"glp{uuid.uuid4().hex[:8]}"
    if _run("ip", "netns", "add", probe).returncode != 0:
        return False
    _run("ip", "netns", "del", probe)
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Network:
    """A server running ``git daemon`` over ``base``, and clients that reach it."""

    def __init__(self, base: Path, clients: int) -> None:
        self.base = base
        self.clients = clients
        self.isolated = namespaces_work()
        self.tag = uuid.uuid4().hex[:6]
        self.port = _free_port()
        self._stack = contextlib.ExitStack()
        self._forwarders: list[subprocess.Popen[str]] = []
        self.partitioned: set[int] = set()

    # ----------------------------------------------------------------- set-up

    def __enter__(self) -> Network:
        try:
            if self.isolated:
                self._namespaces()
            self._daemon()
            if not self.isolated:
                for _ in range(self.clients):
                    self._forwarder()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def ns(self, who: str | int) -> str:
        return f"gl{self.tag}{who}"

    def _ip(self, *args: str, ns: str | None = None) -> None:
        cmd = ["ip", *(("-n", ns) if ns else ()), *args]
        done = _run(*cmd)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")

    def _namespaces(self) -> None:
        server = self.ns("s")
        for name in [server, *(self.ns(i) for i in range(self.clients))]:
            self._ip("netns", "add", name)
            self._stack.callback(_run, "ip", "netns", "del", name)
            self._ip("link", "set", "lo", "up", ns=name)
        for i in range(self.clients):
            client, here, there = self.ns(i), f"g{self.tag}c{i}", f"g{self.tag}s{i}"
            self._ip("link", "add", here, "netns", client, "type", "veth", "peer", "name",
                     there, "netns", server)  # fmt: skip
            self._ip("addr", "add", f"10.211.{i + 1}.2/24", "dev", here, ns=client)
            self._ip("addr", "add", f"10.211.{i + 1}.1/24", "dev", there, ns=server)
            self._ip("link", "set", here, "up", ns=client)
            self._ip("link", "set", there, "up", ns=server)

    def _in_server(self, args: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns("s"), *args] if self.isolated else args

    def _daemon(self) -> None:
        listen = "0.0.0.0" if self.isolated else "127.0.0.1"  # (the namespace's own addresses)
        args = ["git", "daemon", "--reuseaddr", f"--listen={listen}", f"--port={self.port}",
                f"--base-path={self.base}", "--export-all", "--enable=receive-pack",
                "--informative-errors", str(self.base)]  # fmt: skip
        proc = subprocess.Popen(
            self._in_server(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._stack.callback(stop_process, proc)
        probe = [sys.executable, "-c",
                 "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), "
                 "timeout=0.5).close()",
                 "127.0.0.1", str(self.port)]  # fmt: skip
        deadline = time.monotonic() + 15
        while _run(*self._in_server(probe)).returncode != 0:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("git daemon did not start")
            time.sleep(0.05)

    def _forwarder(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-c", FORWARDER, str(self.port)], stdout=subprocess.PIPE, text=True
        )
        self._stack.callback(stop_process, proc)
        assert proc.stdout is not None
        proc.port = int(proc.stdout.readline())  # type: ignore[attr-defined]
        self._forwarders.append(proc)

    # ----------------------------------------------------------------- use

    def url(self, client: int, path: str) -> str:
        """How ``client`` names the server's repository ``path`` (under ``base``)."""
        if self.isolated:
            return f"git://10.211.{client + 1}.1:{self.port}/{path}"
        port = self._forwarders[client].port  # type: ignore[attr-defined]
        return f"git://127.0.0.1:{port}/{path}"

    def command(self, client: int, args: list[str]) -> list[str]:
        """``args`` as run on ``client``'s host."""
        return ["ip", "netns", "exec", self.ns(client), *args] if self.isolated else args

    def partition(self, client: int) -> None:
        """Cut ``client`` off, silently: its packets are dropped, nothing is refused."""
        self.partitioned.add(client)
        self._cut(client, True)

    def heal(self, client: int) -> None:
        self.partitioned.discard(client)
        self._cut(client, False)

    def _cut(self, client: int, cut: bool) -> None:
        if not self.isolated:
            os.kill(self._forwarders[client].pid, signal.SIGSTOP if cut else signal.SIGCONT)
        elif shutil.which("iptables"):
            rule = ["INPUT", "-s", f"10.211.{client + 1}.2", "-j", "DROP"]
            iptables = ["ip", "netns", "exec", self.ns("s"), "iptables"]
            subprocess.run([*iptables, "-I" if cut else "-D", *rule], check=True)
        else:
            state = "down" if cut else "up"
            self._ip("link", "set", f"g{self.tag}s{client}", state, ns=self.ns("s"))

    @property
    def how(self) -> str:
        if not self.isolated:
            return "127.0.0.1 (no network namespaces here)"
        return "network namespaces, partitions by " + (
            "iptables DROP" if shutil.which("iptables") else "the server's veth end set down"
        )


@contextlib.contextmanager
def network(base: Path, clients: int) -> Iterator[Network]:
    with Network(base, clients) as net:
        yield net
