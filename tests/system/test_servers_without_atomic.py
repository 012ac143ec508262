"""A server without atomic push, over the real servers on 127.0.0.1 (issue 34, item 3;
docs/remote.md, "Which servers work").

``tests/store/test_remote.py`` turns ``receive.advertiseAtomic`` off over ``file://`` and
``git daemon``; here the same over ssh (the distribution's sshd), smart HTTP (``git
http-backend`` behind lighttpd) and gitolite3: every write answers STORE (exit 7) naming
the missing capability, nothing is sent, no receipt is left, and the claim taken before is
as it was once the server offers atomic push again.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest
from servers import (
    Gitolite,
    Host,
    Lighttpd,
    Sshd,
    bare_repo,
    clone_host,
    gitolite_fixture,  # noqa: F401 (a pytest fixture)
    host_env,
    lighttpd_fixture,  # noqa: F401 (a pytest fixture)
    sshd_fixture,  # noqa: F401 (a pytest fixture)
)

_names = itertools.count()


def _host(request, kind: str, tmp: Path) -> tuple[Host, Path]:
    """A host coordinating through a new repository on server ``kind``, and that
    repository's path on the server's disk."""
    n = next(_names)
    home = tmp / "home"
    if kind == "ssh":
        server: Sshd = request.getfixturevalue("sshd")
        path = bare_repo(tmp / "server" / f"r{n}.git")
        env = host_env(home, 0, server.ssh_command(server.client_key(f"noatomic-{n}")))
        return clone_host("ssh", server.url(str(path)), tmp / "host", env, source=path), path
    if kind == "http":
        web: Lighttpd = request.getfixturevalue("lighttpd")
        path = web.repo(f"noatomic{n}.git")
        env = host_env(home, 0)
        return clone_host("http", web.url(f"noatomic{n}.git"), tmp / "host", env, source=path), path
    forge: Gitolite = request.getfixturevalue("gitolite")
    name = f"open/noatomic{n}"
    env = host_env(home, 0, forge.sshd.ssh_command(forge.user_key(f"noatomic{n}")))
    host = clone_host("gitolite", forge.url(name), tmp / "host", env)  # creates it
    return host, forge.path(name)


def _refs(path: Path) -> list[str]:
    out = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", "refs/worklease/"],
        cwd=path, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()


def _atomic(path: Path, on: bool) -> None:
    subprocess.run(
        ["git", "config", "receive.advertiseAtomic", "true" if on else "false"],
        cwd=path, check=True,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["ssh", "http", "gitolite"])
def test_a_server_without_atomic_push_is_a_store_error_naming_the_capability(
    request, kind: str, tmp_path: Path
) -> None:
    host, path = _host(request, kind, tmp_path)
    got = host.run("acquire", "r/kept", "--ttl", "5m", "--json")
    assert got.code == 0, got
    before = host.receipts()
    _atomic(path, False)
    for args in (("acquire", "r/new"), ("heartbeat", "r/kept"), ("release", "r/kept"),
                 ("bundle", "acquire", "r/b1", "r/b2")):  # fmt: skip
        out = host.run(*args, "--json")
        assert out.code == 7, (kind, args, out)
        assert out.json["error"]["code"] == "STORE", out
        message = out.json["error"]["message"]
        assert "does not support atomic push" in message, message
        assert "receive.advertiseAtomic" in message, message
    assert host.receipts() == before  # no receipt left behind
    assert _refs(path) == ["refs/worklease/r/kept.lease"]  # nothing was sent
    assert json.loads(before[0].read_text())["token"]  # the claim is still held here
    _atomic(path, True)
    assert host.run("check", "r/kept").code == 0  # it was kept all along
    assert host.run("release", "r/kept").code == 0
