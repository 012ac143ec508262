"""Path scopes on claims: the record's ``paths`` line, acquire refusing overlapping scopes
(every form, racing processes too), and ``who`` (docs/howto/path-scopes.md); through a git
remote: tests/scopes/test_scopes_remote.py."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli, store_git
from hypothesis import given, settings
from hypothesis import strategies as st

from gitlease.errors import CorruptRecordError
from gitlease.model.record import parse, verify

CTX = multiprocessing.get_context("spawn")


def _blob(cwd: Path, ref: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(_store(cwd)), "cat-file", "blob", ref],
        capture_output=True,
        check=True,
    ).stdout


def _store(cwd: Path) -> Path:
    from conftest import store_path

    return store_path(cwd)


# ------------------------------------------------------------------ the record


def test_a_claim_without_scopes_has_no_paths_line_and_one_with_them_is_signed(cli, repo):
    plain = cli("acquire", "plain", "--json")
    assert plain.code == 0, plain
    assert plain.json["paths"] is None
    raw = _blob(repo, plain.json["ref"])
    assert b"\npaths " not in raw  # byte for byte the format without scopes
    lines = [line.split(" ", 1)[0] for line in raw.decode().splitlines()]
    assert lines[16:19] == ["note", "checkpoint", "public-key"]

    scoped = cli("acquire", "scoped", "--paths", "src/**", "--paths", "docs/é.md", "--json")
    assert scoped.code == 0, scoped
    assert scoped.json["paths"] == ["src/**", "docs/é.md"]
    raw = _blob(repo, scoped.json["ref"])
    text = raw.decode()
    assert '\ncheckpoint -\npaths ["src/**","docs/é.md"]\npublic-key ' in text
    record = parse(raw)
    verify(record)  # the paths line is signed
    assert record.paths == ("src/**", "docs/é.md")
    forged = raw.replace(b'"src/**"', b'"src/*"')
    with pytest.raises(CorruptRecordError):
        verify(parse(forged))
    # show, list and the table show them; heartbeat keeps them; release keeps the history
    shown = cli("show", "scoped", "--json").json
    assert shown["paths"] == ["src/**", "docs/é.md"]
    listed = {c["resource"]: c for c in cli("list", "--json").json["claims"]}
    assert listed["plain"]["paths"] is None and listed["scoped"]["paths"] == shown["paths"]
    table = cli("list").out
    assert "PATHS" in table and "src/** docs/é.md" in table
    beat = cli("heartbeat", "scoped", "--json")
    assert beat.code == 0 and beat.json["paths"] == shown["paths"]


@pytest.mark.parametrize(
    "bad",
    [
        b'paths ["a","a"x]',
        b"paths []",
        b'paths ["a", "b"]',  # not canonical
        b'paths "a"',
        b"paths [1]",
        b'paths ["\\u0001"]',
        b"paths -",
    ],
)
def test_a_paths_line_is_parsed_totally(cli, repo, bad: bytes) -> None:
    got = cli("acquire", "r", "--paths", "a", "--json")
    raw = _blob(repo, got.json["ref"])
    start = raw.index(b"\npaths ") + 1
    end = raw.index(b"\n", start)
    with pytest.raises(CorruptRecordError):
        parse(raw[:start] + bad + raw[end:])
    moved = raw[:start] + raw[end + 1 :]
    moved = moved.replace(b"\nnonce ", b"\n" + raw[start:end] + b"\nnonce ")
    with pytest.raises(CorruptRecordError):
        parse(moved)  # only right after checkpoint
    twice = raw[:end] + b"\n" + raw[start:end] + raw[end:]
    with pytest.raises(CorruptRecordError):
        parse(twice)


def test_bad_patterns_are_usage_before_anything_is_written(cli, repo) -> None:
    for bad in ["/etc/passwd", "a/../b", "", "[ab", "a**"]:
        got = cli("acquire", "x", "--paths", bad, "--json")
        assert got.code == 2, (bad, got)
        assert got.json["error"]["code"] == "USAGE"
    assert store_git("for-each-ref", "refs/worklease/", cwd=repo).stdout == ""


# ------------------------------------------------------------------ overlap refused


def test_overlapping_scopes_are_held_naming_claim_patterns_and_witness(cli, repo) -> None:
    first = cli("acquire", "auth", "--paths", "src/auth/**", "--paths", "docs/auth.md", "--json")
    assert first.code == 0, first
    held = cli("acquire", "login", "--paths", "src/*/login.py", "--json")
    assert held.code == 3, held
    error = held.json["error"]
    assert error["code"] == "HELD" and error["claim"]["claim_id"] == first.json["claim_id"]
    assert "'src/*/login.py' overlaps 'src/auth/**'" in error["message"]
    assert "src/auth/login.py" in error["message"]  # the witness
    assert [c["claim_id"] for c in error["claims"]] == [first.json["claim_id"]]
    assert error["claim"]["overlaps"] == [
        {"paths": "src/*/login.py", "scope": "src/auth/**", "witness": "src/auth/login.py"}
    ]
    assert store_git("for-each-ref", "refs/worklease/login.lease", cwd=repo).stdout == ""
    # disjoint scopes, and a claim without scopes, are both fine
    assert cli("acquire", "main", "--paths", "src/main.py").code == 0
    assert cli("acquire", "noscope").code == 0
    # the same for --first-free and bundle acquire
    ff = cli("acquire", "--first-free", "q1", "q2", "--paths", "docs/*.md", "--json")
    assert ff.code == 3 and "docs/auth.md" in ff.json["error"]["message"], ff
    bundle = cli("bundle", "acquire", "b1", "b2", "--paths", "src/**", "--json")
    assert bundle.code == 3, bundle
    assert store_git("for-each-ref", "refs/worklease/b1.lease", cwd=repo).stdout == ""
    # once the holder releases, the scope is free
    assert cli("release", "auth").code == 0
    ff = cli("acquire", "--first-free", "q1", "q2", "--paths", "docs/*.md", "--json")
    assert ff.code == 0 and ff.json["resource"] == "q1" and ff.json["paths"] == ["docs/*.md"]
    bundle = cli("bundle", "acquire", "b1", "b2", "--paths", "src/auth/", "--json")
    assert bundle.code == 0, bundle
    assert [c["paths"] for c in bundle.json["claims"]] == [["src/auth/"], ["src/auth/"]]


def test_an_expired_scoped_claim_holds_no_scope(cli, repo) -> None:
    from gitlease.scopes import acquiring as index
    from gitlease.store.location import open_store

    got = cli("acquire", "short", "--ttl", "1s", "--paths", "x/**", "--json")
    assert got.code == 0
    store = open_store(cwd=repo)
    while index.conflicts(store, index.current(store), ["x/y"], [], _now())[0]:  # (an event)
        pass
    assert cli("acquire", "next", "--paths", "x/y").code == 0


def _now():
    from gitlease.model.clock import Now

    return Now.read()


def test_library_acquire_takes_paths(store) -> None:
    from gitlease.api.bundle import acquire_many
    from gitlease.api.lease import acquire, acquire_first_free
    from gitlease.errors import HeldError, UsageError

    got = acquire(store, "lib/a", paths=["pkg/**"])
    assert got.claim.record.paths == ("pkg/**",)
    with pytest.raises(HeldError):
        acquire_first_free(store, ["lib/b"], paths=["pkg/x.py"])
    with pytest.raises(HeldError):
        acquire_many(store, ["lib/c", "lib/d"], paths=["**/x.py"])
    with pytest.raises(UsageError):
        acquire(store, "lib/e", paths="pkg/**")  # a list, not one string
    assert acquire(store, "lib/f", paths=["other/"]).claim.to_dict()["paths"] == ["other/"]


def test_the_index_is_rebuilt_when_missing(cli, repo) -> None:
    from gitlease.scopes.index import index_path

    assert cli("acquire", "one", "--paths", "a/**").code == 0
    index_path(_store(repo)).unlink()
    assert cli("acquire", "two", "--paths", "a/b").code == 3  # rebuilt from the records
    assert index_path(_store(repo)).exists()


# ------------------------------------------------------------------ races


def _racer(cwd: str, env: dict[str, str], resource: str, paths: list[str], barrier, results):
    """A real ``gitlease acquire --paths`` process, started once every racer is ready (in
    the test's environment: a spawned child's own import of conftest makes a new HOME)."""
    barrier.wait()
    args = [sys.executable, "-m", "gitlease", "acquire", resource, "--no-bind", "--json"]
    for p in paths:
        args += ["--paths", p]
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)
    results.put((resource, proc.returncode, proc.stdout + proc.stderr))


def _race(cwd: Path, jobs: list[tuple[str, list[str]]]) -> dict[str, tuple[int, str]]:
    barrier = CTX.Barrier(len(jobs))
    results = CTX.Queue()
    env = dict(os.environ)
    procs = [
        CTX.Process(target=_racer, args=(str(cwd), env, r, p, barrier, results)) for r, p in jobs
    ]
    for p in procs:
        p.start()
    out = {}
    for _ in jobs:
        resource, code, text = results.get(timeout=180)
        out[resource] = (code, text)
    for p in procs:
        p.join(timeout=60)
    return out


def test_racing_acquires_with_overlapping_scopes_have_exactly_one_winner(repo: Path) -> None:
    patterns = ["src/**", "src/auth/*", "**/login.py", "src/auth/login.py", "src/auth/"]
    for round_ in range(3):
        jobs = [(f"race{round_}/{i}", [p]) for i, p in enumerate(patterns)]
        codes = _race(repo, jobs)
        assert sorted(c for c, _ in codes.values()) == [0] + [3] * (len(jobs) - 1), codes
        winner = next(r for r, (c, _) in codes.items() if c == 0)
        listed = run_cli("list", "--json", cwd=repo).json["claims"]
        assert [c["resource"] for c in listed if c["state"] == "active"] == [winner]
        assert (
            run_cli("release", winner, "--receipt", _receipt(codes[winner][1]), cwd=repo).code == 0
        )


def _receipt(out: str) -> str:
    import json

    return json.loads(out)["receipt"]


def test_racing_acquires_with_disjoint_scopes_all_win(repo: Path) -> None:
    jobs = [(f"d/{i}", [f"pkg{i}/**", f"docs/{i}.md"]) for i in range(5)]
    codes = _race(repo, jobs)
    assert all(c == 0 for c, _ in codes.values()), codes


_SAMPLE: list[bytes] = []


def _sample_record() -> bytes:
    """A real signed record with a paths line (made once)."""
    if not _SAMPLE:
        from gitlease.model.record import HELD, Record, SigningKey, new_token

        key = SigningKey(new_token())
        stamp = "2026-01-01T00:00:00.000Z"
        record = Record(
            resource="r", state=HELD, claim_id="c-0123456789abcdef", owner="o", revision=1,
            bundle_id=None, mode="guarded", acquired_at=stamp, renewed_at=stamp,
            released_at=None, expires_at=stamp, renew_by=stamp, ttl_ms=1000, boot_id="b",
            boot_expires_ms=1, note=None, checkpoint=None, public_key=key.public_hex,
            previous=None, paths=("src/**",),
        )  # fmt: skip
        _SAMPLE.append(record.signed(key).raw or b"")
    return _SAMPLE[0]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80) | st.text(max_size=40).map(lambda t: t.encode()))
def test_any_paths_value_gives_a_record_or_a_clean_invalid(value: bytes) -> None:
    raw = _sample_record()
    start = raw.index(b"\npaths ") + len(b"\npaths ")
    end = raw.index(b"\n", start)
    data = raw[:start] + value + raw[end:]
    try:
        record = parse(data)
    except CorruptRecordError:
        return
    assert record.paths is not None and all(isinstance(p, str) for p in record.paths)
    assert record.raw == data and record.payload() + b"signature " in data


def test_wait_takes_the_scope_once_its_holder_releases(cli, repo) -> None:
    """``--wait`` waits for an overlapping scope like for a held resource (on events: the
    waiter's line on stderr, then its exit)."""
    assert cli("acquire", "holder", "--paths", "lib/**").code == 0
    waiter = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "acquire", "waiter", "--paths", "lib/x.py",
         "--wait", "2m", "--json"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        from gitlease.state.waitqueue import Line
        from gitlease.store.location import open_store

        store = open_store(cwd=repo)
        ref = "refs/worklease/waiter.lease"
        while not Line(store.git_dir, (ref,)).ahead() and waiter.poll() is None:
            time.sleep(0.02)  # polling for the event: the waiter is in line (or gave up)
        assert waiter.poll() is None, waiter.communicate()
        assert cli("release", "holder").code == 0
        out, err = waiter.communicate(timeout=120)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert waiter.returncode == 0, (out, err)
    assert '"waiter"' in out


def test_a_scoped_acquire_of_a_held_resource_never_keeps_its_guard_from_the_holder(
    cli, worktrees, tmp_path: Path
) -> None:
    """The store-wide scope guard is waited for (up to half a minute) with the resources'
    guards held: a scoped acquire of a held resource is refused from a look before those
    guards, naming the holder at once, so the holder's heartbeat and release never wait on
    it (they failed with HELD after 10 s while it waited)."""
    import fcntl

    from conftest import store_path

    from gitlease.scopes.index import guard_path

    a, b = worktrees
    assert cli("acquire", "res/x", "--owner", "first-holder", cwd=a).code == 0
    scope_guard = guard_path(store_path(a))
    scope_guard.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(scope_guard, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another acquire's scope decision, taking its time
        got = cli("acquire", "res/x", "--paths", "docs/**", "--json", cwd=b)
        assert cli("heartbeat", "res/x", cwd=a).code == 0, "the holder's guard was free"
    finally:
        os.close(fd)
    assert got.code == 3, got
    message = got.json["error"]["message"]
    assert "first-holder" in message and "scope" not in message, message
    assert cli("release", "res/x", cwd=a).code == 0
