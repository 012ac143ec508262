"""The remote mode against real git servers on 127.0.0.1: ssh, smart HTTP, gitolite3.

The servers (``tests/support/servers.py``) are started once per module; every test gets
a repository of its own on them, and clones ("hosts") with environments of
their own. The same tests run on each transport; then what is particular to
one of them: HTTP's replayed POST and its authentication, gitolite's rules,
ssh's connections per write.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import clock_ahead
from servers import (
    HTTP_PASSWORD,
    HTTP_USER,
    Gitolite,
    Host,
    Lighttpd,
    Proxy,
    Racers,
    Sshd,
    arm_cut,
    bare_repo,
    clone_host,
    eventually,
    gitolite_fixture,  # noqa: F401 (a pytest fixture)
    host_env,
    lighttpd_fixture,  # noqa: F401 (a pytest fixture)
    sshd_fixture,  # noqa: F401 (a pytest fixture)
)

_names = itertools.count()


# ------------------------------------------------------------------ servers, once per module


class Transport:
    """One way to reach a server: makes repositories there, and hosts cloned from them."""

    name = ""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self._keys: dict[int, str | None] = {}

    def repo(self, tmp: Path, kind: str = "open") -> Remote:
        raise NotImplementedError

    def ssh_command(self, index: int) -> str | None:
        return None


class SshTransport(Transport):
    name = "ssh"

    def __init__(self, sshd: Sshd, proxy: Proxy) -> None:
        super().__init__(proxy)
        self.sshd = sshd

    def repo(self, tmp: Path, kind: str = "open") -> Remote:
        path = bare_repo(tmp / "server" / f"r{next(_names)}.git")
        return Remote(
            self, tmp, self.sshd.url(str(path)), self.sshd.url(str(path), self.proxy.port), path
        )

    def ssh_command(self, index: int) -> str | None:
        if index not in self._keys:  # each host logs in with its own key
            self._keys[index] = self.sshd.ssh_command(self.sshd.client_key(f"ssh-host-{index}"))
        return self._keys[index]


class HttpTransport(Transport):
    name = "http"

    def __init__(self, server: Lighttpd, proxy: Proxy) -> None:
        super().__init__(proxy)
        self.server = server

    def repo(self, tmp: Path, kind: str = "open") -> Remote:
        name = f"{'' if kind == 'open' else kind + '/'}r{next(_names)}.git"
        path = self.server.repo(name)
        url = self.server.url(name)
        return Remote(self, tmp, url, self.server.url(name, self.proxy.port), path, name)


class GitoliteTransport(Transport):
    name = "gitolite"

    def __init__(self, server: Gitolite, proxy: Proxy) -> None:
        super().__init__(proxy)
        self.server = server

    def repo(self, tmp: Path, kind: str = "open") -> Remote:
        name = f"{kind}/r{next(_names)}"
        url = self.server.url(name)
        remote = Remote(
            self, tmp, url, self.server.url(name, self.proxy.port), self.server.path(name), name
        )
        remote.host(0)  # a wild repository is created by its first clone
        return remote

    def ssh_command(self, index: int) -> str | None:
        if index not in self._keys:  # each host is another gitolite user
            key = self.server.user_key(f"u{index}")
            self._keys[index] = self.server.sshd.ssh_command(key)
        return self._keys[index]


class Remote:
    """One repository on a server: its URLs (direct and through the cutting proxy), its path
    on disk (to look at what the server holds), and the hosts cloned from it."""

    def __init__(
        self, transport: Transport, tmp: Path, url: str, proxied: str, path: Path, name: str = ""
    ) -> None:
        self.transport = transport
        self.tmp = tmp
        self.url = url
        self.proxied = proxied
        self.path = path
        self.name = name
        self._hosts: dict[tuple[int, int, bool], Host] = {}

    def host(self, index: int, clone: int = 0, *, proxied: bool = False) -> Host:
        """Clone number ``clone`` on simulated host number ``index`` (one environment each)."""
        key = (index, clone, proxied)
        if key not in self._hosts:
            env = host_env(self.tmp / f"home-{index}", index, self.transport.ssh_command(index))
            where = self.tmp / f"{self.path.stem}-host-{index}-clone-{clone}"
            where = where.with_name(where.name + ("-proxied" if proxied else ""))
            url = self.proxied if proxied else self.url
            source = self.path if self.path.is_dir() else None  # gitolite: not there yet
            self._hosts[key] = clone_host(f"h{index}.{clone}", url, where, env, source=source)
        return self._hosts[key]

    def refs(self) -> dict[str, str]:
        out = subprocess.run(
            ["git", "for-each-ref", "--format=%(refname) %(objectname)", "refs/worklease/"],
            cwd=self.path, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return dict(line.split(" ") for line in out.splitlines())

    def all_objects_text(self) -> str:
        out = subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch"],
            cwd=self.path, capture_output=True, check=True,
        ).stdout  # fmt: skip
        return out.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def ssh_proxy(sshd):
    proxy = Proxy(sshd.port).start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def ssh_transport(sshd, ssh_proxy):
    return SshTransport(sshd, ssh_proxy)


@pytest.fixture(scope="module")
def http_transport(lighttpd):
    proxy = Proxy(lighttpd.port).start()
    yield HttpTransport(lighttpd, proxy)
    proxy.stop()


@pytest.fixture(scope="module")
def gitolite_transport(gitolite, ssh_proxy):
    return GitoliteTransport(gitolite, ssh_proxy)


@pytest.fixture(scope="module", params=["ssh", "http", "gitolite"])
def transport(request) -> Transport:
    return request.getfixturevalue(f"{request.param}_transport")


@pytest.fixture
def remote(transport: Transport, tmp_path: Path) -> Remote:
    transport.proxy.disarm()
    return transport.repo(tmp_path)


def _posts(server: Lighttpd, name: str, since: int) -> list[str]:
    """The POSTs that carried a pack to repository ``name``, after the first ``since`` requests."""
    return [
        r
        for r in server.requests(name)[since:]
        if r.startswith("POST") and r.split(" ")[1].endswith("/git-receive-pack")
    ]


def _error(result) -> str:
    return result.json["error"]["message"]


# ------------------------------------------------------------------ on every transport


def test_lifecycle_across_two_clones(remote: Remote) -> None:
    a, b = remote.host(0), remote.host(1)
    got = a.run("acquire", "github/acme/api/42", "--ttl", "1m", "--json")
    assert got.code == 0, got
    claim = got.json
    assert remote.refs() == {claim["ref"]: claim["oid"]}  # the server holds it

    held = b.run("acquire", "github/acme/api/42", "--json")
    assert held.code == 3, held
    assert held.json["error"]["claim"]["claim_id"] == claim["claim_id"]
    assert b.run("show", "github/acme/api/42", "--json").json["state"] == "active"

    assert a.run("heartbeat", "github/acme/api/42").code == 0
    assert a.run("check", "github/acme/api/42", "--min-remaining", "30s").code == 0
    done = a.run("release", "github/acme/api/42", "--checkpoint", "PR #7", "--json")
    assert done.code == 0 and done.json["state"] == "released", done

    taken = b.run("acquire", "github/acme/api/42", "--json")
    assert taken.code == 0 and taken.json["revision"] == 2, taken
    assert a.run("check", "github/acme/api/42").code == 4
    history = b.run("log", "github/acme/api/42", "--json").json["records"]
    assert [r["revision"] for r in history][-2:] == [1, 2]
    assert history[-2]["checkpoint"] == "PR #7"
    assert "glt_" not in remote.all_objects_text()  # no token ever reaches the server
    assert a.live_receipts() == [] and len(b.live_receipts()) == 1


RACERS = 10


def test_race_over_several_clones_has_one_winner_per_round(remote: Remote) -> None:
    """10 processes on four clones of three hosts; a fresh resource, then an expired one."""
    clones = [remote.host(0), remote.host(0, 1), remote.host(1), remote.host(2)]
    with Racers(clones, RACERS) as racers:
        codes, odd = racers.round("race/fresh")
        assert sorted(codes) == [0] + [3] * (RACERS - 1), (codes, odd)
        assert clones[0].run("acquire", "race/expired", "--ttl", "1s", "--no-bind").code == 0
        looking = [  # the other hosts' first sighting of it
            subprocess.Popen([sys.executable, "-m", "gitlease", "list"], cwd=clone.path,
                             env={**os.environ, **clone.env}, stdout=subprocess.DEVNULL)
            for clone in clones[2:]
        ]  # fmt: skip
        assert [p.wait(timeout=60) for p in looking] == [0, 0]
        time.sleep(1.2)
        codes, odd = racers.round("race/expired")
        assert sorted(codes) == [0] + [3] * (RACERS - 1), (codes, odd)
    for resource, revisions in (("race/fresh", [1]), ("race/expired", [1, 2])):
        history = clones[0].run("log", resource, "--json").json["records"]
        assert [r["revision"] for r in history] == revisions, (resource, history)


def _scoped_round(clones: list[Host], name: str, patterns: list[str]) -> dict[str, tuple]:
    """One process a pattern, dealt round-robin to ``clones``, each acquiring a resource of
    its own with that scope, started together: resource -> (exit code, JSON answer)."""
    procs = {}
    for i, pattern in enumerate(patterns):
        clone = clones[i % len(clones)]
        resource = f"{name}/{i}"
        procs[resource] = subprocess.Popen(
            [sys.executable, "-m", "gitlease", "acquire", resource, "--paths", pattern,
             "--no-bind", "--json"],
            cwd=clone.path, env={**os.environ, **clone.env}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    out = {}
    for resource, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=180)
        out[resource] = (proc.returncode, json.loads(stdout) if stdout else stderr)
    return out


def test_scoped_races_over_several_clones_have_one_winner_per_round(remote: Remote) -> None:
    """Path scopes through the server: overlapping scopes on other resources, racing from
    four clones of three hosts, one winner (every loser HELD naming it); then disjoint
    scopes, every one granted. The scope index (refs/worklease/@scopes) is accepted by the
    server's rules like the claims (docs/reference/path-scopes.md, remote stores)."""
    clones = [remote.host(0), remote.host(0, 1), remote.host(1), remote.host(2)]
    overlapping = ["src/**", "src/auth/*", "**/login.py", "src/auth/login.py", "src/"]
    for round_ in range(2):
        got = _scoped_round(clones, f"scoped{round_}", overlapping)
        codes = sorted(code for code, _ in got.values())
        assert codes == [0] + [3] * (len(overlapping) - 1), got
        winner = next(doc for code, doc in got.values() if code == 0)
        for code, doc in got.values():
            if code == 3:
                assert doc["error"]["claim"]["claim_id"] == winner["claim_id"], doc
        owner = next(c for c in clones if winner["receipt"].startswith(f"{c.path}/"))
        released = owner.run("release", winner["resource"], "--receipt", winner["receipt"])
        assert released.code == 0, released
    disjoint = [f"pkg{i}/**" for i in range(4)]
    got = _scoped_round(clones, "disjoint", disjoint)
    assert all(code == 0 for code, _ in got.values()), got
    assert "refs/worklease/@scopes" in remote.refs()


def test_takeover_after_expiry_waits_a_ttl_seen_from_the_taker(remote: Remote) -> None:
    # a minute's claim, its minute passed on moved clocks (clock_ahead): a 1 s claim was
    # B's within B's first look, a loaded machine's slow ssh round trips being a second long
    a, b = remote.host(0), remote.host(1)
    assert a.run("acquire", "r/dead", "--ttl", "1m").code == 0
    first = b.run("acquire", "r/dead", "--json")  # B's first sighting
    assert first.code == 3, first
    assert a.run("check", "r/dead", env=clock_ahead(61, a.env)).code == 4  # expired on A's clock
    taken = b.run("acquire", "r/dead", "--ttl", "1m", "--json", env=clock_ahead(61, b.env))
    assert taken.code == 0 and taken.json["revision"] == 2, taken
    assert a.run("heartbeat", "r/dead").code == 4


def test_bundles_are_all_or_nothing(remote: Remote) -> None:
    a, b = remote.host(0), remote.host(1)
    got = a.run("bundle", "acquire", "b/1", "b/2", "--ttl", "1m", "--json")
    assert got.code == 0, got
    clash = b.run("bundle", "acquire", "b/2", "b/3", "--json")
    assert clash.code == 3, clash
    assert not any("b/3" in ref for ref in remote.refs())
    assert b.run("bundle", "acquire", "b/3", "b/4").code == 0
    assert a.run("bundle", "heartbeat", got.json["bundle_id"]).code == 0
    assert a.run("bundle", "release", got.json["bundle_id"]).code == 0
    again = b.run("bundle", "acquire", "b/1", "b/2", "--json")
    assert again.code == 0 and {c["revision"] for c in again.json["claims"]} == {2}, again


def _cut_next_push(remote: Remote, when: str) -> Path:
    """Cut the connection of the next push: at ``when`` on the server ("prepared": about to
    commit, and the push is aborted there; "committed": done), before the client hears it."""
    marker = arm_cut(remote.path, when)
    if remote.transport.name == "http":
        remote.transport.proxy.cut_http_answer(keep_headers=True)  # answer begun: no replay
    else:
        remote.transport.proxy.cut_after_marker(marker)
    return marker


def test_a_connection_cut_after_the_server_committed_is_a_success(remote: Remote) -> None:
    a = remote.host(0, proxied=True)
    cuts = remote.transport.proxy.cuts
    marker = _cut_next_push(remote, "committed")
    got = a.run("acquire", "r/cut", "--ttl", "1m", "--json")
    assert remote.transport.proxy.cuts == cuts + 1 and marker.exists(), "nothing was cut"
    assert got.code == 0, got
    assert remote.refs()[got.json["ref"]] == got.json["oid"]
    assert a.run("check", "r/cut").code == 0
    _cut_next_push(remote, "committed")
    assert a.run("heartbeat", "r/cut").code == 0
    _cut_next_push(remote, "committed")
    assert a.run("release", "r/cut").code == 0
    assert remote.transport.proxy.cuts == cuts + 3
    assert a.run("show", "r/cut", "--json").json["state"] == "released"


def test_a_connection_cut_before_the_server_committed_is_ambiguous(remote: Remote) -> None:
    a, b = remote.host(0, proxied=True), remote.host(1)
    cuts = remote.transport.proxy.cuts
    _cut_next_push(remote, "prepared")
    cut = a.run("acquire", "r/cut", "--ttl", "1m", "--json")
    assert remote.transport.proxy.cuts == cuts + 1, "nothing was cut"
    assert cut.code == 5, cut  # the outcome was unknown to the client
    assert remote.refs() == {}
    assert len(a.live_receipts()) == 1  # kept, to settle it
    assert a.run("show", "r/cut", "--json").json["state"] == "free"
    assert a.run("acquire", "r/cut", "--ttl", "1m").code == 0
    assert b.run("acquire", "r/cut").code == 3
    _cut_next_push(remote, "prepared")
    assert a.run("heartbeat", "r/cut").code == 5
    assert a.run("check", "r/cut").code == 0  # still held as before
    assert a.run("heartbeat", "r/cut").code == 0


def _refuse_the_namespace(remote: Remote) -> None:
    """The server's own policy: refused with a reason (gitolite: a deny rule; else a hook)."""
    hook = remote.path / "hooks" / "update"
    hook.write_text(
        '#!/bin/sh\ncase "$1" in refs/worklease/*)\n'
        '  echo "POLICY: $1 is not for you" >&2; exit 1;;\nesac\n'
    )
    hook.chmod(0o755)


def test_the_servers_policy_refusal_is_a_store_error_with_its_reason(
    transport: Transport, tmp_path: Path
) -> None:
    if transport.name == "gitolite":
        remote = transport.repo(tmp_path, "denied")
        reason = "DENIED by refs/worklease/"
    else:
        remote = transport.repo(tmp_path)
        _refuse_the_namespace(remote)
        reason = "POLICY: refs/worklease/r/no.lease is not for you"
    a = remote.host(0)
    out = a.run("acquire", "r/no", "--json")
    assert out.code == 7, out
    assert reason in _error(out) and "cannot reach" not in _error(out), out
    bundle = a.run("bundle", "acquire", "r/b1", "r/b2", "--json")
    assert bundle.code == 7 and reason.split(" ")[0] in _error(bundle), bundle
    assert remote.refs() == {}
    assert a.live_receipts() == []


# ------------------------------------------------------------------ what is particular to one


def test_gitolite_refuses_plain_rw_on_heartbeat(gitolite_transport, tmp_path: Path) -> None:
    """A blob has no history, so replacing one is a rewind to gitolite: RW+ is needed."""
    remote = gitolite_transport.repo(tmp_path, "rw")
    a = remote.host(0)
    assert a.run("acquire", "r/rw", "--ttl", "1m").code == 0  # creating a ref is allowed
    for verb in ("heartbeat", "release"):
        out = a.run(verb, "r/rw", "--json")
        assert out.code == 7, out
        assert "DENIED" in _error(out) and "refs/worklease/r/rw.lease" in _error(out), out
    assert a.run("check", "r/rw").code == 0  # nothing changed


def test_gitolite_without_write_access_is_refused_not_unreachable(
    gitolite_transport, tmp_path: Path
) -> None:
    remote = gitolite_transport.repo(tmp_path, "readonly")
    a = remote.host(0)
    out = a.run("acquire", "r/ro", "--json")
    assert out.code == 7, out
    message = _error(out)
    assert "DENIED" in message and "cannot reach" not in message, message
    assert a.live_receipts() == []


def test_a_replayed_http_post_that_landed_is_a_success(http_transport, tmp_path: Path) -> None:
    """The answer to the push is lost before its first byte: git's HTTP client sends the
    POST again, and the server refuses it, because the ref already holds our record."""
    remote = http_transport.repo(tmp_path)
    a, b = remote.host(0, proxied=True), remote.host(1)
    proxy, server = http_transport.proxy, http_transport.server
    for args in (
        ("acquire", "r/replay", "--ttl", "1m"),
        ("heartbeat", "r/replay"),
        ("bundle", "acquire", "r/b1", "r/b2", "--ttl", "1m"),
    ):
        before = len(server.requests(remote.name))
        proxy.cut_http_answer(keep_headers=False)
        out = a.run(*args, "--json")
        posts = eventually(lambda n=before: len(_posts(server, remote.name, n)) == 2)
        assert posts, (args, server.requests(remote.name)[before:])  # the replay happened
        assert out.code == 0, (args, out)
    assert a.run("check", "r/replay").code == 0
    assert b.run("acquire", "r/replay").code == 3
    assert b.run("acquire", "r/b2").code == 3
    bundle = [p for p in a.live_receipts() if json.loads(p.read_text()).get("bundle_id")]
    assert len(bundle) == 1
    proxy.cut_http_answer(keep_headers=False)
    assert a.run("release", "r/replay").code == 0
    assert b.run("acquire", "r/replay").code == 0


def test_http_authentication_failures_are_store_errors(http_transport, tmp_path: Path) -> None:
    server = http_transport.server
    remote = http_transport.repo(tmp_path, "auth")
    a = remote.host(0)  # anonymous reads
    port = server.port
    lost = remote.host(1)  # its store is coordinated through a repository that is not there
    cases = {
        "no credentials": (a, remote.url, "terminal prompts disabled"),
        "a wrong password": (
            a,
            server.url(remote.name, port, f"{HTTP_USER}:wrong"),
            "Authentication failed",
        ),
        "a missing repository": (lost, server.url("nowhere.git"), "not found"),
    }
    for what, (host, url, words) in cases.items():
        before = len(server.requests(remote.name))
        out = host.run("acquire", "r/auth", "--remote", url, "--json")
        assert out.code == 7, (what, out)
        assert words in _error(out), (what, out)
        assert "wrong" not in out.out + out.err  # the password is never shown
        assert not _posts(server, remote.name, before), what
    assert a.live_receipts() == lost.live_receipts() == [] and remote.refs() == {}
    good = server.url(remote.name, port, f"{HTTP_USER}:{HTTP_PASSWORD}")
    out = a.run("acquire", "r/auth", "--remote", good, "--json")
    assert out.code == 0, out
    assert a.run("where", "--remote", good, "--json").json["remote"] == server.url(
        remote.name, port, f"{HTTP_USER}:***"
    )


def test_http_403_is_a_refusal_not_an_unreachable_remote(http_transport, tmp_path: Path) -> None:
    remote = http_transport.repo(tmp_path, "forbidden")
    a = remote.host(0)
    out = a.run("acquire", "r/403", "--json")
    assert out.code == 7, out
    message = _error(out)
    assert "403" in message and "cannot reach" not in message, message
    assert a.live_receipts() == [] and remote.refs() == {}


def test_an_http_post_refused_after_the_pack_was_sent_is_settled_as_a_store_error(
    http_transport, tmp_path: Path
) -> None:
    """A 401 or 403 answer to the POST that carried the pack: the server did not take it,
    which a fetch confirms before the receipt goes."""
    server = http_transport.server
    for kind, status in (("postauth", "401"), ("postforbidden", "403")):
        remote = http_transport.repo(tmp_path, kind)
        a = remote.host(0)
        before = len(server.requests(remote.name))
        out = a.run("acquire", "r/post", "--json")
        assert out.code == 7, (kind, out)
        assert status in _error(out) and "refused" in _error(out), (kind, out)
        assert eventually(lambda n=before, r=remote: _posts(server, r.name, n)), kind  # sent
        assert a.live_receipts() == [] and remote.refs() == {}, kind


def test_each_write_over_ssh_is_one_connection(ssh_transport, tmp_path: Path) -> None:
    """No extra fetch or probe: acquire, heartbeat and release are one push each."""
    sshd = ssh_transport.sshd
    remote = ssh_transport.repo(tmp_path)
    a = remote.host(0)
    for args in (
        ("acquire", "r/one", "--ttl", "1m"),
        ("heartbeat", "r/one"),
        ("release", "r/one"),
        ("acquire", "r/one", "--ttl", "1m"),  # a released resource, from the mirror
        ("bundle", "acquire", "r/b1", "r/b2", "--ttl", "1m"),
    ):
        before = sshd.accepted()
        assert a.run(*args).code == 0, args
        assert sshd.accepted() - before == 1, args


def test_redact_hides_passwords_only() -> None:
    from gitlease.store.remote import redact

    assert redact("ssh://git@example.com/x.git") == "ssh://git@example.com/x.git"
    assert redact("https://bob:pw@example.com/x.git") == "https://bob:***@example.com/x.git"
    assert redact("https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@h/x") == "https://***@h/x"
    assert redact("git@example.com:x.git") == "git@example.com:x.git"
    assert redact("/srv/x.git") == "/srv/x.git"


def test_a_missing_server_is_skipped_by_name_and_fails_where_required(monkeypatch) -> None:
    from servers import REQUIRE_ENV, need

    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-sshd is not installed"):
        need("no-such-sshd", "openssh-server")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="no-such-sshd is not installed"):
        need("no-such-sshd", "openssh-server")
    assert need("git", "git").endswith("/git")


# ------------------------------------------------------------------ the clone's own settings


def test_a_clone_s_own_ssh_command_reaches_the_shared_store_s_pushes(
    ssh_transport: SshTransport, tmp_path: Path
) -> None:
    """The store is a repository of its own, but `core.sshCommand` set in the clone (a deploy
    key, say) still applies to the pushes and fetches gitlease makes for it."""
    remote = ssh_transport.repo(tmp_path)
    host = remote.host(0)
    command = host.env.pop("GIT_SSH_COMMAND")
    assert host.run("acquire", "own/ssh", "--json").code == 7, "no key: the server refuses"
    host.git("config", "core.sshCommand", command)
    got = host.run("acquire", "own/ssh", "--json")
    assert got.code == 0, got
    assert remote.refs() == {got.json["ref"]: got.json["oid"]}


def test_an_explicit_store_still_uses_the_clone_s_remote(remote: Remote, tmp_path: Path) -> None:
    """`gitlease.store` naming a store of its own, with `gitlease.remote origin` in the clone:
    the remote is the clone's, never silently dropped."""
    host = remote.host(0)
    store = tmp_path / "own-store.git"
    subprocess.run(["git", "init", "-q", "--bare", str(store)], check=True)
    host.git("config", "gitlease.store", str(store))
    doc = host.run("where", "--json").json
    assert doc["store"] == str(store) and doc["remote"] == "origin", doc
    got = host.run("acquire", "explicit/store", "--json")
    assert got.code == 0, got
    assert got.json["ref"] in remote.refs(), "the claim went to the coordinator"


def test_where_in_a_fresh_clone_with_a_remote_writes_nothing(remote: Remote) -> None:
    host = remote.host(0)
    doc = host.run("where", "--json")
    assert doc.code == 0 and doc.json["remote"] == "origin", doc
    assert not Path(doc.json["store"]).exists(), "where only looks"
