"""Real git servers on 127.0.0.1, started and stopped by the tests (docs/remote.md).

- ``Sshd``: the distribution's ``sshd`` with its own config, host key and
  authorized keys under the test's temporary directory, ``ListenAddress
  127.0.0.1`` on a free port, ``MaxStartups`` raised for bursts of pushes.
- ``Lighttpd``: ``git http-backend`` behind lighttpd (mod_cgi), receive-pack
  open on ``/git/NAME.git``, behind basic auth on ``/git/auth/NAME.git`` (only
  its POST on ``/git/postauth/``), and refused (403) on ``/git/forbidden/``
  (only its POST on ``/git/postforbidden/``).
- ``Gitolite``: gitolite3 with its own HOME, reached through the same sshd by
  keys whose forced command is ``gitolite-shell USER``.
- ``Proxy``: a TCP proxy that passes bytes on until it is told to cut one
  connection (a network cut at a chosen moment of a push).

Every simulated host gets its own environment (``Host.env``): its own HOME,
XDG_STATE_HOME and git config, its own ssh key, and for every host but the
first another boot id and boot clock. Two hosts on one machine must share
nothing a real pair of machines would not.

A machine without one of the programs skips the tests that need it, naming the
program; with ``GITLEASE_REQUIRE_SERVERS=1`` (set by ``.ci/run``) it fails them.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRE_ENV = "GITLEASE_REQUIRE_SERVERS"
GITOLITE_SHELL = Path("/usr/share/gitolite3/gitolite-shell")
#: boot id, boot clock offset of each simulated host after the first (the first is this machine)
BOOTS = [
    ("b0000000-0000-4000-8000-00000000000b", 7 * 86_400_000),
    ("c0000000-0000-4000-8000-00000000000c", 3 * 86_400_000),
    ("d0000000-0000-4000-8000-00000000000d", 11 * 86_400_000),
]
BOOT_OFFSETS = dict(BOOTS)
_GITCONFIG = (
    "[user]\n\tname = {name}\n\temail = {name}@example.invalid\n"
    "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
)


def find(program: str) -> str | None:
    """Where ``program`` is (also in /usr/sbin, and gitolite's own directory), or None."""
    places = (f"/usr/sbin/{program}", f"/usr/bin/{program}", f"{GITOLITE_SHELL.parent}/{program}")
    return shutil.which(program) or next((p for p in places if os.access(p, os.X_OK)), None)


def need(program: str, package: str) -> str:
    """The program's path; else skip the test naming it (fail under GITLEASE_REQUIRE_SERVERS).

    (Outside pytest, e.g. in bench/remote.py, ask ``find`` first.)
    """
    path = find(program)
    if path is not None:
        return path
    import pytest

    reason = f"{program} is not installed (Debian package {package}; .ci/run installs it)"
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{reason}, and {REQUIRE_ENV} is set: these tests must run", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, what: str, log: Path) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise RuntimeError(f"{what} did not start on port {port}:\n{text}") from None
            time.sleep(0.02)


def stop_process(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """End a server process started by a test: SIGTERM (after SIGCONT: one stopped by a
    test cannot act on it), SIGKILL if it is still there 10 s later; reaped either way."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        os.kill(proc.pid, signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _git(*args: str, cwd: Path, env: dict[str, str] | None = None, check: bool = True):
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, text=True, capture_output=True, check=check
    )


def eventually(check, seconds: float = 5.0):
    """``check()``'s first truthy value within ``seconds`` (a server's log is written a moment
    after its answer), else its last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def keygen(path: Path, comment: str) -> Path:
    """An ed25519 key pair at ``path`` and ``path.pub``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    return path


def server_home(path: Path) -> Path:
    """A HOME for a server's git: its own config, nothing from the machine's."""
    path.mkdir(parents=True, exist_ok=True)
    (path / ".gitconfig").write_text(_GITCONFIG.format(name="server"))
    return path


def bare_repo(path: Path, **config: str) -> Path:
    """An empty bare repository (gitlease needs no commit at the remote)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _git("init", "-q", "--bare", str(path), cwd=path.parent)
    for key, value in config.items():
        _git("config", key.replace("_", "."), value, cwd=path)
    return path


# ------------------------------------------------------------------ hosts


class Host:
    """One simulated machine's clone: where it works, and the environment it runs in."""

    def __init__(self, name: str, path: Path, env: dict[str, str]) -> None:
        self.name = name
        self.path = path
        self.env = env

    def run(self, *args: str, env: dict[str, str] | None = None, **kw):
        """The real CLI in this host's clone and environment (a ``conftest.Result``)."""
        from conftest import run_cli

        return run_cli(*args, cwd=kw.pop("cwd", self.path), env={**self.env, **(env or {})}, **kw)

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _git(*args, cwd=self.path, env={**os.environ, **self.env}, check=check)

    def receipts(self) -> list[Path]:
        # one directory per resource (and bundles/): docs/reference/store.md
        return sorted((self.path / ".git" / "worklease" / "receipts").glob("*/*.json"))

    def live_receipts(self) -> list[Path]:
        return [p for p in self.receipts() if json.loads(p.read_text()).get("token")]

    def __repr__(self) -> str:
        return f"Host({self.name}, {self.path})"


def host_env(home: Path, index: int, ssh_command: str | None = None) -> dict[str, str]:
    """The environment of simulated host number ``index`` (0: this machine's own clocks).

    Its own HOME, XDG_STATE_HOME, XDG_CONFIG_HOME and global git config; host
    1 and later another boot id and boot clock.
    """
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(_GITCONFIG.format(name=f"agent-{index}"))
    env = {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GITLEASE_OWNER": f"agent-{index}",
    }
    if ssh_command is not None:
        env["GIT_SSH_COMMAND"] = ssh_command
    if index:
        from conftest import TESTING  # (the switches count only with it)

        boot, offset = BOOTS[(index - 1) % len(BOOTS)]
        env.update(TESTING)
        env["GITLEASE_TESTING_BOOT_ID"] = boot
        env["GITLEASE_TESTING_BOOT_OFFSET_MS"] = str(offset)
    return env


def clone_host(
    name: str, url: str, path: Path, env: dict[str, str], *, source: Path | None = None
) -> Host:
    """A clone of ``url`` acting as one host, coordinating through ``origin``.

    With ``source`` (the repository on the server's disk) the clone is made from
    there and ``origin`` then pointed at ``url``: the same clone, a round trip less.
    """
    full = {**os.environ, **env}
    path.parent.mkdir(parents=True, exist_ok=True)
    _git("clone", "-q", str(source or url), str(path), cwd=path.parent, env=full)
    if source is not None:
        _git("remote", "set-url", "origin", url, cwd=path, env=full)
    _git("config", "gitlease.remote", "origin", cwd=path, env=full)
    return Host(name, path, env)


# ------------------------------------------------------------------ sshd


class Sshd:
    """The distribution's sshd on 127.0.0.1, every file of it under ``base``."""

    def __init__(self, base: Path) -> None:
        self.program = need("sshd", "openssh-server")
        need("ssh", "openssh-client")
        self.base = base
        self.user = getpass.getuser()
        self.port = free_port()
        self.log = base / "sshd.log"
        self.authorized = base / "authorized_keys"
        self.known_hosts = base / "known_hosts"
        self.home = server_home(base / "server-home")
        self.proc: subprocess.Popen | None = None

    def start(self) -> Sshd:
        base = self.base
        base.mkdir(parents=True, exist_ok=True)
        host_key = keygen(base / "host_ed25519_key", "gitlease-test-sshd")
        self.known_hosts.write_text(
            f"gitlease-test-sshd {(base / 'host_ed25519_key.pub').read_text()}"
        )
        self.authorized.write_text("")
        self.authorized.chmod(0o600)
        if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
        config = base / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key}",
                    f"PidFile {base / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.authorized}",
                    f"AllowUsers {self.user}",
                    "StrictModes no",  # the temporary directory's modes are not sshd's business
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "UsePAM no",
                    "UseDNS no",
                    "PrintMotd no",
                    "MaxStartups 200:30:400",  # the stock 10:30:100 refuses a burst of pushes
                    "MaxSessions 50",
                    "LoginGraceTime 30",
                    # the server side's git reads a HOME of its own, not the machine's
                    f"SetEnv HOME={self.home} GIT_CONFIG_NOSYSTEM=1 LC_ALL=C.UTF-8",
                    "LogLevel INFO",
                    "",
                ]
            )
        )
        self.proc = subprocess.Popen(
            [self.program, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "ab"),  # noqa: SIM115 - the server keeps it
        )
        _wait_listening(self.port, self.proc, "sshd", self.log)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def authorize(self, public_key: Path, options: str = "restrict") -> None:
        with open(self.authorized, "a") as f:
            f.write(f"{options} {public_key.read_text().strip()}\n")

    def client_key(self, name: str, options: str = "restrict") -> Path:
        """A new key pair for ``name``, authorized with ``options``."""
        key = keygen(self.base / "keys" / name, name)
        self.authorize(key.with_suffix(".pub"), options)
        return key

    def ssh_command(self, key: Path, *extra: str) -> str:
        """``GIT_SSH_COMMAND`` for ``key``: no config files, no agent, no prompt of any kind."""
        args = [
            "ssh",
            "-F",
            "/dev/null",
            "-i",
            str(key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "IdentityAgent=none",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "HostKeyAlias=gitlease-test-sshd",  # one known host, whichever port (or proxy)
            "-o",
            "LogLevel=ERROR",
            *extra,
        ]
        return shlex.join(args)

    def url(self, path: str, port: int | None = None) -> str:
        return f"ssh://{self.user}@127.0.0.1:{port or self.port}{path}"

    def accepted(self) -> int:
        """How many ssh connections the server has authenticated so far."""
        return self.log.read_text(errors="replace").count("Accepted publickey")


# ------------------------------------------------------------------ lighttpd


LIGHTTPD_CONF = """\
server.modules = ("mod_access", "mod_alias", "mod_auth", "mod_authn_file", "mod_cgi",
                  "mod_setenv", "mod_accesslog")
server.document-root = "{base}/www"
server.bind = "127.0.0.1"
server.port = {port}
server.pid-file = "{base}/lighttpd.pid"
server.errorlog = "{base}/error.log"
accesslog.filename = "|/bin/cat >> {base}/access.log"
server.max-keep-alive-idle = 30
alias.url = ("/git" => "{backend}")
$HTTP["url"] =~ "^/git" {{
    cgi.assign = ("" => "")
    setenv.add-environment = (
        "GIT_PROJECT_ROOT" => "{root}",
        "GIT_HTTP_EXPORT_ALL" => "",
        "HOME" => "{home}",
        "GIT_CONFIG_NOSYSTEM" => "1",
    )
}}
auth.backend = "plain"
auth.backend.plain.userfile = "{base}/users"
# as git-http-backend(1) shows: anonymous reads, authenticated writes
$HTTP["url"] =~ "^/git/auth/" {{
    $HTTP["querystring"] =~ "service=git-receive-pack" {{
        auth.require = ("" => ("method" => "basic", "realm" => "git", "require" => "valid-user"))
    }}
}}
$HTTP["url"] =~ "^/git/auth/.*/git-receive-pack$" {{
    auth.require = ("" => ("method" => "basic", "realm" => "git", "require" => "valid-user"))
}}
# only the POST that carries the pack needs credentials (the refs are shown to anyone)
$HTTP["url"] =~ "^/git/postauth/.*/git-receive-pack$" {{
    auth.require = ("" => ("method" => "basic", "realm" => "git", "require" => "valid-user"))
}}
# no writes at all here: 403 before anything is sent
$HTTP["url"] =~ "^/git/forbidden/" {{
    $HTTP["querystring"] =~ "service=git-receive-pack" {{ url.access-deny = ("") }}
}}
$HTTP["url"] =~ "^/git/forbidden/.*/git-receive-pack$" {{ url.access-deny = ("") }}
# ... and here 403 only for the POST, once the pack was sent
$HTTP["url"] =~ "^/git/postforbidden/.*/git-receive-pack$" {{ url.access-deny = ("") }}
"""
HTTP_USER, HTTP_PASSWORD = "agent", "s3cret-pw"


class Lighttpd:
    """lighttpd serving ``git http-backend`` (smart HTTP) from ``base/root``."""

    def __init__(self, base: Path) -> None:
        self.program = need("lighttpd", "lighttpd")
        exec_path = subprocess.run(
            ["git", "--exec-path"], capture_output=True, text=True, check=True
        ).stdout.strip()
        self.backend = Path(exec_path) / "git-http-backend"
        if not os.access(self.backend, os.X_OK):
            need("git-http-backend", "git")  # skips (or fails), naming it
        self.base = base
        self.root = base / "root"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> Lighttpd:
        base = self.base
        (base / "www").mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        (base / "users").write_text(f"{HTTP_USER}:{HTTP_PASSWORD}\n")
        home = server_home(base / "server-home")
        config = base / "lighttpd.conf"
        config.write_text(
            LIGHTTPD_CONF.format(
                base=base, port=self.port, backend=self.backend, root=self.root, home=home
            )
        )
        log = base / "error.log"
        self.proc = subprocess.Popen(
            [self.program, "-D", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(base / "stderr.log", "ab"),  # noqa: SIM115 - the server keeps it
        )
        _wait_listening(self.port, self.proc, "lighttpd", log)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def repo(self, name: str) -> Path:
        """A new repository at ``/git/NAME`` (NAME may start with ``auth/``, ``forbidden/``...)."""
        config = {} if name.startswith("auth/") else {"http_receivepack": "true"}
        return bare_repo(self.root / name, **config)

    def url(self, name: str, port: int | None = None, userinfo: str = "") -> str:
        at = f"{userinfo}@" if userinfo else ""
        return f"http://{at}127.0.0.1:{port or self.port}/git/{name}"

    def requests(self, name: str) -> list[str]:
        """The access log's request lines for one repository (``GET .../info/refs?...``)."""
        log = self.base / "access.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return [
            m.group(1)
            for m in re.finditer(r'"((?:GET|POST) /git/' + re.escape(name) + r'[^"]*)"', text)
        ]


# ------------------------------------------------------------------ gitolite


GITOLITE_CONF = """\
repo gitolite-admin
    RW+     =   admin

# what docs/remote.md asks for: RW+ on refs/worklease/ (a heartbeat replaces one blob with
# another, which gitolite counts as a rewind), plain RW on everything else
repo open/..*
    C                       =   @all
    RW+ refs/worklease/     =   @all
    RW                      =   @all

# plain RW: every update must be a fast-forward, which a blob never is
repo rw/..*
    C       =   @all
    RW      =   @all

# a per-ref deny rule on the namespace
repo denied/..*
    C       =   @all
    -   refs/worklease/     =   @all
    RW+     =   @all

# no write access at all: refused before the ref updates are looked at
repo readonly/..*
    C       =   @all
    R       =   @all
"""


class Gitolite:
    """gitolite3 in a HOME of its own, reached through ``sshd`` as ``gitolite-shell USER``."""

    def __init__(self, base: Path, sshd: Sshd) -> None:
        need("gitolite", "gitolite3")
        self.shell = need("gitolite-shell", "gitolite3")
        self.base = base
        self.sshd = sshd
        self.home = base / "gitolite-home"
        self.env = {
            **os.environ,
            "HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
        }
        for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME"):
            self.env.pop(name, None)

    def start(self) -> Gitolite:
        server_home(self.home)
        admin = keygen(self.base / "admin", "admin")
        subprocess.run(
            ["gitolite", "setup", "-pk", str(admin.with_suffix(".pub"))],
            env=self.env, cwd=self.base, capture_output=True, check=True,
        )  # fmt: skip
        (self.home / ".gitolite" / "conf" / "gitolite.conf").write_text(GITOLITE_CONF)
        for args in (["compile"], ["trigger", "POST_COMPILE"]):
            subprocess.run(
                ["gitolite", *args], env=self.env, cwd=self.base, capture_output=True, check=True
            )
        return self

    def user_key(self, user: str) -> Path:
        """A key that logs in to gitolite as ``user`` (the forced command gitolite writes)."""
        command = f"env HOME={self.home} {self.shell} {user}"
        return self.sshd.client_key(f"gitolite-{user}", f'restrict,command="{command}"')

    def url(self, repo: str, port: int | None = None) -> str:
        return self.sshd.url(f"/{repo}", port)

    def path(self, repo: str) -> Path:
        return self.home / "repositories" / f"{repo}.git"


# ------------------------------------------------------------------ a TCP proxy that cuts


class Proxy:
    """127.0.0.1:``port`` -> 127.0.0.1:``upstream``, cutting one connection when told.

    ``cut_after_marker(path)``: the next time the server sends anything after
    ``path`` exists (a server hook wrote it), the client's connection is reset
    and nothing more reaches it (any transport, ssh's encrypted stream too).

    ``cut_http_answer(keep_headers)``: the answer to the next ``POST
    .../git-receive-pack`` is read whole from the server (the push is done
    there) and never passed on; the client's connection is reset, after the
    answer's headers if ``keep_headers``, else before any byte of it. On a
    reused connection that last case makes git's HTTP client (libcurl) send the
    POST again.
    """

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = free_port()
        self._lock = threading.Lock()
        self._marker: Path | None = None
        self._http: bool | None = None  # keep_headers of an armed HTTP cut
        self.cuts = 0
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", self.port))
        self._server.listen(128)
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> Proxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        self._server.close()

    def cut_after_marker(self, marker: Path) -> None:
        with self._lock:
            self._marker = marker

    def cut_http_answer(self, keep_headers: bool) -> None:
        with self._lock:
            self._http = keep_headers

    def disarm(self) -> None:
        with self._lock:
            self._marker = None
            self._http = None

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self._stopped:
                client.close()
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        holding: bool | None = None  # this connection carries the armed HTTP answer
        held = b""
        request = b""
        try:
            while True:
                ready, _, _ = select.select([client, upstream], [], [], 60)
                if not ready:
                    return
                if client in ready:
                    data = client.recv(65536)
                    if not data:
                        upstream.shutdown(socket.SHUT_WR)
                        if upstream not in ready:
                            continue
                    else:
                        request = (request + data)[-4096:]
                        if (
                            holding is None
                            and b"POST " in request
                            and b"git-receive-pack" in request
                        ):
                            with self._lock:
                                if self._http is not None:
                                    holding, self._http = self._http, None
                        upstream.sendall(data)
                if upstream in ready:
                    data = upstream.recv(65536)
                    if holding is not None:
                        held += data
                        if not data or _http_answer_complete(held):
                            head = held.partition(b"\r\n\r\n")[0] + b"\r\n\r\n"
                            self._reset(client, head if holding else b"")
                            return
                        continue
                    if not data:
                        client.shutdown(socket.SHUT_WR)
                        return
                    with self._lock:
                        marker = self._marker
                        if marker is not None and marker.exists():
                            self._marker = None
                        else:
                            marker = None
                    if marker is not None:
                        self._reset(client, b"")
                        return
                    client.sendall(data)
        except OSError:
            return
        finally:
            for s in (client, upstream):
                with contextlib.suppress(OSError):
                    s.close()

    def _reset(self, client: socket.socket, last: bytes) -> None:
        """Send ``last``, then reset the connection (RST, not a clean close)."""
        with contextlib.suppress(OSError):
            if last:
                client.sendall(last)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.cuts += 1
        client.close()


def _http_answer_complete(data: bytes) -> bool:
    """Whether ``data`` holds a whole HTTP response (by Content-Length, or chunked)."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if length:
        return len(body) >= int(length.group(1))
    return body.endswith(b"0\r\n\r\n")


# A server-side reference-transaction hook: at the moment named in $GIT_DIR/cut-push
# ("prepared": about to commit; "committed": done) it writes $GIT_DIR/push-cut, which
# an armed Proxy turns into a reset connection; at "prepared" it also aborts the push.
CUT_HOOK = r"""#!/bin/sh
mode=$(cat "$GIT_DIR/cut-push" 2>/dev/null) || exit 0
[ "$1" = "$mode" ] || exit 0
rm -f "$GIT_DIR/cut-push"
echo "$1" > "$GIT_DIR/push-cut"
[ "$1" = prepared ] && exit 1
exit 0
"""


def arm_cut(repo: Path, when: str) -> Path:
    """Make the next push to ``repo`` (on disk) mark the moment ``when``; the marker's path."""
    hook = repo / "hooks" / "reference-transaction"
    hook.write_text(CUT_HOOK)
    hook.chmod(0o755)
    (repo / "push-cut").unlink(missing_ok=True)
    (repo / "cut-push").write_text(when)
    return repo / "push-cut"


# ------------------------------------------------------------------ racing processes

# One contender in its own host's environment: imports done, "ready", then one
# acquire per resource read from stdin (the parent writes each line to every
# contender at once), answering with the exit code.
RACER = r"""
import contextlib, io, json, sys
import pygit2  # noqa: F401
from gitlease.cli import claims  # noqa: F401
from gitlease.cli.app import main
print("ready", flush=True)
for line in sys.stdin:
    resource, ttl = line.split()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["acquire", resource, "--ttl", ttl, "--json"])
    print(json.dumps([code, out.getvalue()[-400:] if code not in (0, 3) else ""]), flush=True)
"""


class Racers:
    """``count`` contender processes dealt round-robin to ``hosts``, each in its host's
    clone and environment, started once for several rounds (a context manager)."""

    def __init__(self, hosts: list[Host], count: int) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACER],
                cwd=hosts[i % len(hosts)].path,
                env={**os.environ, **hosts[i % len(hosts)].env},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(count)
        ]

    def __enter__(self) -> Racers:
        for p in self.procs:
            assert p.stdout.readline().strip() == "ready"
        return self

    def round(self, resource: str, ttl: str = "1m") -> tuple[list[int], list[str]]:
        """Every contender acquires ``resource`` at once: the exit codes, and the output
        of any that answered neither 0 nor 3."""
        for p in self.procs:  # as close together as the pipes allow
            p.stdin.write(f"{resource} {ttl}\n")
            p.stdin.flush()
        codes, odd = [], []
        for p in self.procs:
            code, text = json.loads(p.stdout.readline())
            codes.append(code)
            if text:
                odd.append(text)
        return codes, odd

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            with contextlib.suppress(OSError):
                p.stdin.close()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()


@contextlib.contextmanager
def started(server) -> Iterator:
    server.start()
    try:
        yield server
    finally:
        server.stop()


# ------------------------------------------------------------------ fixtures, once per module
# A test module that needs a server imports its fixture (``from servers import
# sshd_fixture``) and asks for it as ``sshd``: pytest then starts it once for that module.


@pytest.fixture(scope="module", name="sshd")
def sshd_fixture(tmp_path_factory):
    """An ``sshd`` on 127.0.0.1, started once per module that uses it."""
    with started(Sshd(tmp_path_factory.mktemp("sshd"))) as server:
        yield server


@pytest.fixture(scope="module", name="lighttpd")
def lighttpd_fixture(tmp_path_factory):
    """A lighttpd serving smart HTTP on 127.0.0.1, started once per module."""
    with started(Lighttpd(tmp_path_factory.mktemp("lighttpd"))) as server:
        yield server


@pytest.fixture(scope="module", name="gitolite")
def gitolite_fixture(sshd, tmp_path_factory):
    """gitolite3 behind the module's ``sshd``."""
    yield Gitolite(tmp_path_factory.mktemp("gitolite"), sshd).start()
