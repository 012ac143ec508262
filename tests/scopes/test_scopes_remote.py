"""Path scopes on a store coordinated through a git remote (docs/reference/path-scopes.md,
remote stores): the scope index is the ref ``refs/worklease/@scopes``, replaced by each
scoped acquire in the same atomic push as its claim, leased at the id it was read at.

Real processes on "hosts" (clones of one bare repository over ``file://``, each with its
own store, and all but the first with another boot id and boot clock: tests/support/hosts.py).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import TESTING, git, run_cli, wait_for
from cutpush import drop_next_push
from hosts import HOST_B_ENV, make_host, make_server
from hypothesis import given, settings
from hypothesis import strategies as st

from gitlease.model.refname import SCOPES_INDEX_REF, decode
from gitlease.scopes import acquiring as scope_acquiring
from gitlease.scopes import index as scope_index

CTX = multiprocessing.get_context("spawn")
HOST_C_ENV = {
    **TESTING,
    "GITLEASE_TESTING_BOOT_ID": "c0000000-0000-4000-8000-00000000000c",
    "GITLEASE_TESTING_BOOT_OFFSET_MS": str(3 * 86_400_000),
    "XDG_STATE_HOME": str(Path(os.environ["HOME"]) / "host-c" / "state"),
}


@pytest.fixture
def hosts(tmp_path: Path):
    """Three hosts on one remote: a (this machine's clock), b and c (other boots)."""
    server = make_server(tmp_path)
    url = server.as_uri()
    places = {}
    for name, env in (("a", {}), ("b", HOST_B_ENV), ("c", HOST_C_ENV)):
        places[name] = SimpleNamespace(path=make_host(url, tmp_path / f"host-{name}"), env=env)

    def on(name: str):
        place = places[name]

        def call(*args: str, **kw):
            return run_cli(*args, cwd=kw.pop("cwd", place.path), env=place.env, **kw)

        return call

    return SimpleNamespace(
        server=server, places=places, a=places["a"].path, b=places["b"].path,
        on_a=on("a"), on_b=on("b"), on_c=on("c"),
    )  # fmt: skip


def remote_index(server: Path) -> dict | None:
    """The remote's scope index, as JSON (None when the ref is absent)."""
    got = subprocess.run(
        ["git", "cat-file", "blob", SCOPES_INDEX_REF], cwd=server, capture_output=True
    )
    return json.loads(got.stdout) if got.returncode == 0 else None


def remote_refs(server: Path) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/worklease/", cwd=server)
    return dict(line.split(" ") for line in out.stdout.splitlines())


def error_of(got) -> dict:
    return json.loads(got.out)["error"]


# ------------------------------------------------------------------ one index, two readers


class Paused:
    """``gitlease acquire`` on a host, stopped once it has judged the scopes and made the
    index's new value (before its push), until :meth:`go`: two hosts stopped there have
    read the same index."""

    POINT = "scopes-noted"

    def __init__(self, place: SimpleNamespace, args: list[str], tmp: Path) -> None:
        self.dir = tmp / f"pause-{os.urandom(4).hex()}"
        self.dir.mkdir()
        env = {
            **os.environ,
            **TESTING,
            **place.env,
            "GITLEASE_TESTING_PAUSE": self.POINT,
            "GITLEASE_TESTING_PAUSE_DIR": str(self.dir),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gitlease", "acquire", *args, "--json"],
            cwd=place.path, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def wait_paused(self) -> None:
        marker = self.dir / f"{self.POINT}.paused"

        def paused() -> bool:
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(f"exited {self.proc.returncode} before its pause: {out} {err}")
            return marker.exists()

        wait_for(paused, what="the acquire to stand at its pause point")

    def go(self) -> tuple[int, str, str]:
        (self.dir / f"{self.POINT}.go").write_text("")
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, err


def test_two_hosts_that_read_one_index_overlapping_the_second_push_is_refused_held(
    hosts, tmp_path: Path
) -> None:
    """Both decide from the same index; the first push lands; the second is refused by its
    lease on the index, fetches, sees the winner's entry, judges it from the winner's record
    and answers HELD naming the winner's claim and the overlapping patterns."""
    assert hosts.on_a("acquire", "warm", "--paths", "warm/**").code == 0  # an index to read
    assert hosts.on_b("list").code == 0  # (b's mirror holds it)
    before = remote_index(hosts.server)
    first = Paused(hosts.places["a"], ["auth", "--paths", "src/auth/**"], tmp_path)
    second = Paused(hosts.places["b"], ["login", "--paths", "src/*/login.py"], tmp_path)
    first.wait_paused()
    second.wait_paused()
    assert remote_index(hosts.server) == before  # neither has written anything
    code, out, err = first.go()
    assert code == 0, (out, err)
    winner = json.loads(out)
    code, out, err = second.go()
    assert code == 3, (out, err)
    error = json.loads(out)["error"]
    assert error["code"] == "HELD"
    assert error["claim"]["claim_id"] == winner["claim_id"]
    assert error["claim"]["overlaps"][0]["scope"] == "src/auth/**"
    assert "'src/*/login.py' overlaps 'src/auth/**'" in error["message"]
    assert "refs/worklease/login.lease" not in remote_refs(hosts.server)
    entries = remote_index(hosts.server)["entries"]
    assert [e[1] for e in entries] == [before["entries"][0][1], winner["claim_id"]]
    assert not list((hosts.b / ".git" / "worklease" / "receipts").glob("*/*.json"))


def test_two_hosts_that_read_one_index_disjoint_both_win(hosts, tmp_path: Path) -> None:
    """The second push is refused all the same (the index moved); it decides again from a
    fresh fetch, finds nothing in its way, and lands with both entries in the index."""
    first = Paused(hosts.places["a"], ["web", "--paths", "web/**"], tmp_path)
    second = Paused(hosts.places["b"], ["api", "--paths", "api/**"], tmp_path)
    first.wait_paused()
    second.wait_paused()
    assert remote_index(hosts.server) is None  # the first index of all: both made it afresh
    code, out, err = first.go()
    assert code == 0, (out, err)
    code, out, err = second.go()
    assert code == 0, (out, err)
    entries = remote_index(hosts.server)["entries"]
    assert sorted(e[2] for e in entries) == ["api", "web"]
    assert all(e[4] == 1 for e in entries)  # each names its claim's revision


# ------------------------------------------------------------------ free races


def _racer(cwd: str, env: dict[str, str], resource: str, paths: list[str], barrier, results):
    """A real ``gitlease acquire --paths`` process on one host, started with the others."""
    barrier.wait()
    args = [sys.executable, "-m", "gitlease", "acquire", resource, "--no-bind", "--json"]
    for p in paths:
        args += ["--paths", p]
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)
    results.put((resource, proc.returncode, proc.stdout, proc.stderr))


def _race(jobs: list[tuple[SimpleNamespace, str, list[str]]]) -> dict[str, tuple[int, str]]:
    barrier = CTX.Barrier(len(jobs))
    results = CTX.Queue()
    procs = [
        CTX.Process(
            target=_racer,
            args=(str(place.path), {**os.environ, **place.env}, r, p, barrier, results),
        )
        for place, r, p in jobs
    ]
    for p in procs:
        p.start()
    out = {}
    for _ in jobs:
        resource, code, stdout, stderr = results.get(timeout=300)
        out[resource] = (code, stdout or stderr)
    for p in procs:
        p.join(timeout=60)
    return out


@pytest.mark.slow
def test_racing_overlapping_acquires_on_three_hosts_have_exactly_one_winner(hosts) -> None:
    patterns = ["src/**", "src/auth/*", "**/login.py", "src/auth/login.py", "src/auth/", "s*/"]
    order = ["a", "b", "c"]
    for round_ in range(3):
        jobs = [
            (hosts.places[order[(i + round_) % 3]], f"race{round_}/{i}", [p])
            for i, p in enumerate(patterns)
        ]
        codes = _race(jobs)
        assert sorted(c for c, _ in codes.values()) == [0] + [3] * (len(jobs) - 1), codes
        winner = next(r for r, (c, _) in codes.items() if c == 0)
        won = json.loads(codes[winner][1])
        for resource, (_code, out) in codes.items():
            if resource != winner:  # every loser names the winner
                assert json.loads(out)["error"]["claim"]["claim_id"] == won["claim_id"], out
        listed = hosts.on_a("list", "--json").json["claims"]
        assert [c["resource"] for c in listed if c["state"] == "active"] == [winner]
        where = next(place for place, r, _ in jobs if r == winner)
        released = run_cli("release", winner, "--receipt", won["receipt"], cwd=where.path,
                           env=where.env)  # fmt: skip
        assert released.code == 0, released


@pytest.mark.slow
def test_racing_disjoint_acquires_on_two_hosts_all_win(hosts) -> None:
    places = [hosts.places["a"], hosts.places["b"]] * 2
    jobs = [(place, f"d/{i}", [f"pkg{i}/**", f"docs/{i}.md"]) for i, place in enumerate(places)]
    codes = _race(jobs)
    assert all(c == 0 for c, _ in codes.values()), codes
    entries = remote_index(hosts.server)["entries"]
    assert sorted(e[2] for e in entries) == sorted(codes)


@pytest.mark.parametrize("behind", ["absent", "older"])
def test_a_mirror_behind_its_index_is_looked_at_again_before_it_grants(hosts, behind: str) -> None:
    """Host b's mirror holds the index with a's entry, but a's ref as it was before that
    claim (a fetch seen half done): b never grants from that look (its push's lease would
    match: the index is the remote's). It fetches again, and answers HELD."""
    if behind == "older":
        assert hosts.on_a("acquire", "auth", "--paths", "src/auth/**").code == 0
        assert hosts.on_a("release", "auth").code == 0
        old = hosts.on_a("show", "auth", "--json").json["oid"]  # a's tombstone, revision 1
        assert hosts.on_b("list").code == 0  # (b has it)
    got = hosts.on_a("acquire", "auth", "--paths", "src/auth/**", "--json")
    assert got.code == 0, got
    assert hosts.on_b("list").code == 0
    mirror = hosts.b / ".git"  # b's store (tests/support/hosts.py)
    if behind == "older":
        git("update-ref", "refs/worklease/auth.lease", old, cwd=mirror)
    else:
        git("update-ref", "-d", "refs/worklease/auth.lease", cwd=mirror)
    held = hosts.on_b("acquire", "login", "--paths", "src/*/login.py", "--json")
    assert held.code == 3, held
    assert error_of(held)["claim"]["claim_id"] == got.json["claim_id"]


# ------------------------------------------------------------------ release, hooks, who


def test_release_frees_the_scope_for_the_other_host(hosts) -> None:
    got = hosts.on_a("acquire", "auth", "--paths", "src/auth/**", "--json")
    assert got.code == 0, got
    held = hosts.on_b("acquire", "login", "--paths", "src/auth/login.py", "--json")
    assert held.code == 3, held
    assert error_of(held)["claim"]["claim_id"] == got.json["claim_id"]
    who = hosts.on_c("who", "src/auth/login.py", "--json").json
    assert [c["claim_id"] for c in who["paths"][0]["claims"]] == [got.json["claim_id"]]
    assert hosts.on_a("release", "auth").code == 0
    # b's mirror still shows the claim live: b refuses only on a fresh look, and takes it
    taken = hosts.on_b("acquire", "login", "--paths", "src/auth/login.py", "--json")
    assert taken.code == 0, taken
    who = hosts.on_c("who", "src/auth/login.py", "--json").json
    assert [c["resource"] for c in who["paths"][0]["claims"]] == ["login"]


def _commit(worktree: Path, name: str, env: dict[str, str] | None = None) -> tuple[bool, str]:
    """Commit a change of ``name`` in ``worktree`` with its host's environment (its hooks
    judge on that host's clock); undone again when refused."""
    path = worktree / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{time.monotonic_ns()}\n")
    git("add", name, cwd=worktree)
    result = subprocess.run(
        ["git", "commit", "-qm", f"change {name}"], cwd=worktree, text=True,
        capture_output=True, env={**os.environ, **(env or {})},
    )  # fmt: skip
    if result.returncode != 0:
        git("reset", "-q", "--hard", cwd=worktree)
    return result.returncode == 0, result.stderr


def test_the_commit_hook_on_another_host_refuses_a_path_scoped_there(hosts) -> None:
    """Host b's hook reads b's mirror (fetched by any gitlease command there): a claim taken
    on host a, judged on b's clock, reserves its files for b's commits too; packed or
    loose, the index ref tells the hook's shell fast path that the store has scopes."""
    assert hosts.on_b("hooks", "install").code == 0
    assert _commit(hosts.b, "src/auth/early.py", HOST_B_ENV)[0]  # no scope anywhere yet
    got = hosts.on_a("acquire", "auth", "--paths", "src/auth/**", "--ttl", "10m", "--json")
    assert got.code == 0, got
    assert hosts.on_b("who", "src/auth/login.py").code == 0  # (a fetch on b)
    ok, err = _commit(hosts.b, "src/auth/login.py", HOST_B_ENV)
    assert not ok, err
    assert "commit refused" in err and got.json["claim_id"] in err and "test-agent" in err
    assert _commit(hosts.b, "src/other.py", HOST_B_ENV)[0]  # outside the scope
    git("pack-refs", "--all", cwd=hosts.b)  # b's store is b's .git (tests/support/hosts.py)
    assert not (hosts.b / ".git" / SCOPES_INDEX_REF).exists()
    ok, err = _commit(hosts.b, "src/auth/login.py", HOST_B_ENV)
    assert not ok and got.json["claim_id"] in err, err
    # the holder's own host commits in its scope
    assert hosts.on_a("hooks", "install").code == 0
    assert _commit(hosts.a, "src/auth/mine.py")[0]
    assert hosts.on_a("release", "auth").code == 0
    assert hosts.on_b("list").code == 0  # b sees the release on its next fetch
    ok, err = _commit(hosts.b, "src/auth/login.py", HOST_B_ENV)
    assert ok, err


# ------------------------------------------------------------------ a forged index ref


def _forge(server: Path, data: bytes | None, *, tree: bool = False) -> None:
    if tree:
        oid = git("mktree", cwd=server).stdout.strip()
    else:
        oid = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], cwd=server, input=data,
            capture_output=True, check=True,
        ).stdout.decode().strip()  # fmt: skip
    git("update-ref", SCOPES_INDEX_REF, oid, cwd=server)


GARBAGE = [
    b"not an index",
    b"\xff\xfe\x00garbage",
    b"[" * 100_000,
    b'{"version": 1, "live": 0, "entries": [["HEAD", "c-1", "r", ["**"]]]}',
    b'{"version": 1, "live": 0, "entries": [["refs/worklease/r.lease", "c-1", "r", []]]}',
    b'{"version": 1, "live": 0, "entries": [["refs/worklease/r.lease", "c", "r", ["a"], true]]}',
    b'{"version": 2, "live": 0, "entries": []}',
]


def test_a_forged_index_ref_is_read_as_a_hint_to_rebuild_from_the_records(hosts) -> None:
    got = hosts.on_a("acquire", "auth", "--paths", "src/auth/**", "--ttl", "10m", "--json")
    assert got.code == 0, got
    claim_id = got.json["claim_id"]
    assert hosts.on_b("hooks", "install").code == 0
    for data in [*GARBAGE, None]:
        _forge(hosts.server, data, tree=data is None)
        who = hosts.on_b("who", "src/auth/login.py", "--json")
        assert who.code == 0, (data, who)
        assert [c["claim_id"] for c in who.json["paths"][0]["claims"]] == [claim_id], data
        ok, err = _commit(hosts.b, "src/auth/login.py", HOST_B_ENV)
        assert not ok and claim_id in err and "Traceback" not in err, (data, err)
        held = hosts.on_b("acquire", "login", "--paths", "src/*/login.py", "--json")
        assert held.code == 3, (data, held)
        assert error_of(held)["claim"]["claim_id"] == claim_id
        assert "Traceback" not in held.err
    # it is no claim: list, verify and show never mention it
    listed = hosts.on_b("list", "--json").json["claims"]
    assert [c["resource"] for c in listed] == ["auth"]
    assert hosts.on_b("verify", "--json").code == 0
    with pytest.raises(ValueError):
        decode(SCOPES_INDEX_REF)
    # the next scoped acquire replaces it (leased at the forged id) with a good one
    assert hosts.on_b("acquire", "web", "--paths", "web/**").code == 0
    entries = remote_index(hosts.server)["entries"]
    assert sorted(e[2] for e in entries) == ["auth", "web"]


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=200)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=20,
    ).map(lambda v: json.dumps({"version": 1, "live": 0, "entries": v}).encode())
)
def test_any_index_bytes_give_an_index_or_none(data: bytes) -> None:
    found = scope_index._parse_index(data)
    if found is not None:
        assert all(e.ref.startswith("refs/worklease/") for e in found.entries)
        assert scope_index._parse_index(scope_index.document(found)) == found


# ------------------------------------------------------------------ compaction rides along

# The server logs every ref transaction it commits: the refs it moved, one line each.
LOG_HOOK = r"""#!/bin/sh
[ "$1" = committed ] || exit 0
refs=$(awk '{print $3}' | sort | tr '\n' ' ')
echo "$refs" >> "$GIT_DIR/transactions"
"""


def test_compaction_rides_on_a_scoped_acquires_push(hosts) -> None:
    """Entries of dead claims are dropped only by a scoped acquire's own push: the index
    never moves at the remote without a claim moving in the same transaction."""
    from gitlease.api.lease import acquire, release
    from gitlease.store.location import open_store

    hook = hosts.server / "hooks" / "reference-transaction"
    hook.write_text(LOG_HOOK)
    hook.chmod(0o755)
    kept = hosts.on_c("acquire", "kept", "--paths", "kept/**", "--ttl", "10m")
    assert kept.code == 0, kept  # live, on another host's clock: compaction keeps it
    store = open_store(cwd=hosts.a)
    assert store.remote is not None
    # (the index compacts once it holds 32 entries more than twice the live ones last
    # counted: none, since its first entry was made afresh)
    for i in range(scope_acquiring._SLACK - 1):
        got = acquire(store, f"dead/{i}", paths=[f"dead{i}/**"], ttl="1m", bind=False)
        release(store, f"dead/{i}", receipt=got.receipt.path)
    grown = remote_index(hosts.server)["entries"]
    assert len(grown) == scope_acquiring._SLACK
    # b compacts from a mirror that does not show c's claim yet (fetched half done): only
    # what proves a claim over drops its entry
    assert hosts.on_b("list").code == 0
    git("update-ref", "-d", "refs/worklease/kept.lease", cwd=hosts.b / ".git")
    live = hosts.on_b("acquire", "live", "--paths", "live/**", "--json")
    assert live.code == 0, live
    index = remote_index(hosts.server)
    assert sorted(e[2] for e in index["entries"]) == ["kept", "live"], index
    assert index["live"] == 1
    held = hosts.on_a("acquire", "other", "--paths", "kept/x", "--json")
    assert held.code == 3 and error_of(held)["claim"]["resource"] == "kept", held
    transactions = (hosts.server / "transactions").read_text().splitlines()
    with_index = [t.split() for t in transactions if SCOPES_INDEX_REF in t.split()]
    assert len(with_index) == scope_acquiring._SLACK + 1  # one a scoped acquire, no other
    assert all(any(r.endswith(".lease") for r in t) for t in with_index), with_index


# ------------------------------------------------------------------ a push cut off


def _hold_fetches(host: Path) -> Path:
    """Make ``host``'s fetches (over file://) wait while the returned marker exists: a
    partition that heals when the test removes it."""
    marker = host.parent / "hold-fetch"
    wrapper = host.parent / "holding-fetch"
    wrapper.write_text(
        f'#!/bin/sh\nn=0\nwhile [ -e "{marker}" ] && [ $n -lt 1200 ]; do sleep 0.05; '
        'n=$((n+1)); done\nexec git-upload-pack "$@"\n'
    )
    wrapper.chmod(0o755)
    git("config", "remote.origin.uploadpack", str(wrapper), cwd=host)
    return marker


def _cut_acquire(server: Path, a: Path, resource: str, pattern: str, when: str):
    """``gitlease acquire`` on ``a`` whose push is cut off (``when``: after the server
    committed it, or as it was about to), its settling fetch held until the test lets it go."""
    held = _hold_fetches(a)
    held.touch()
    drop_next_push(server, when)
    cut = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "acquire", resource, "--paths", pattern, "--json"],
        cwd=a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for(lambda: (server / "push-dropped").exists() or cut.poll() is not None,
             what="the push to be cut")  # fmt: skip
    assert cut.poll() is None, cut.communicate()
    return cut, held


@pytest.mark.parametrize("overlapping", [True, False])
def test_a_scoped_push_cut_off_after_it_landed_is_settled_from_its_records(
    tmp_path: Path, overlapping: bool
) -> None:
    """The push landed but its answer was lost, and before the settling fetch another
    host's scoped acquire moved the index on: the claim's record at the remote tells that
    the push (and so, atomic, the index riding on it) landed."""
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    assert run_cli("acquire", "warm", "--paths", "warm/**", cwd=a).code == 0  # (a's mirror
    # holds the index: the acquire below pushes without a fetch first)
    cut, held = _cut_acquire(server, a, "auth", "src/auth/**", "committed")
    pattern = "src/*/login.py" if overlapping else "web/**"
    other = run_cli("acquire", "other", "--paths", pattern, "--json", cwd=b, env=HOST_B_ENV)
    assert other.code == (3 if overlapping else 0), other  # b sees a's claim if they overlap
    held.unlink()
    out, err = cut.communicate(timeout=120)
    assert cut.returncode == 0, (out, err)
    resources = sorted(e[2] for e in remote_index(server)["entries"])
    assert resources == (["auth", "warm"] if overlapping else ["auth", "other", "warm"])


def test_a_scoped_push_cut_off_while_another_host_moved_the_index_is_decided_again(
    tmp_path: Path,
) -> None:
    """The push did not land, and before the settling fetch another host's scoped acquire
    moved the index: the cut push can never land (its lease cannot match again), so it is
    decided again, and answers HELD naming the other host's claim (not AMBIGUOUS)."""
    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    assert run_cli("acquire", "warm", "--paths", "warm/**", cwd=a).code == 0
    cut, held = _cut_acquire(server, a, "auth", "src/auth/**", "prepared")
    other = run_cli("acquire", "login", "--paths", "src/*/login.py", "--json", cwd=b,
                    env=HOST_B_ENV)  # fmt: skip
    assert other.code == 0, other
    held.unlink()
    out, err = cut.communicate(timeout=120)
    assert cut.returncode == 3, (out, err)
    assert json.loads(out)["error"]["claim"]["claim_id"] == other.json["claim_id"]
    assert "refs/worklease/auth.lease" not in remote_refs(server)


def test_the_index_ref_is_read_unless_nothing_surely_names_it(tmp_path: Path) -> None:
    """The look for a mirror's index ref answered "no scopes" when ``packed-refs`` could not
    be opened (a commit then passed every scope unchecked): unsure, the ref is read, and a
    store that cannot be read refuses (fail closed)."""
    from gitlease.scopes import lookup

    store_dir = tmp_path / "store.git"
    git("init", "-q", "--bare", str(store_dir), cwd=tmp_path)
    opened: list[str] = []

    def store():  # type: ignore[no-untyped-def]
        opened.append("store")
        raise AssertionError("read")

    assert lookup._index_of(store_dir, store) is None and not opened  # surely none
    (store_dir / "packed-refs").symlink_to(store_dir / "packed-refs")  # (cannot be opened)
    with pytest.raises(AssertionError, match="read"):
        lookup._index_of(store_dir, store)
    (store_dir / "packed-refs").unlink()
    (store_dir / "reftable").mkdir()  # (git's other ref backend keeps no ref files)
    with pytest.raises(AssertionError, match="read"):
        lookup._index_of(store_dir, store)
