"""The fast paths of issue 33 keep the behaviour of the slow ones they replace.

* ``packed-refs`` is checked whole once per file identity, then only looked up (a binary
  search when sorted): a damaged line is still found, and a lookup agrees with a scan.
* The high-water mark is overwritten in place under a lock: it only ever rises, and a
  longer old text leaves no tail.
* Blobs read through pygit2 are remembered by object id; refs are read afresh.
"""

from __future__ import annotations

import mmap
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import store_git, store_path

from gitlease.gitio import gitread as _gitread
from gitlease.state import highwater


def _sorted_packed(names: list[bytes], peeled: set[bytes]) -> bytes:
    lines = [b"# pack-refs with: peeled fully-peeled sorted \n"]
    for name in sorted(names):
        lines.append(b"a" * 40 + b" " + name + b"\n")
        if name in peeled:
            lines.append(b"^" + b"b" * 40 + b"\n")
    return b"".join(lines)


@pytest.mark.parametrize("seed", range(20))
def test_the_binary_search_agrees_with_a_scan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    names = sorted({f"refs/worklease/{rng.randrange(10**6)}.lease".encode() for _ in range(60)})
    present = names[::2]
    peeled = set(rng.sample(present, len(present) // 3))
    path = tmp_path / "packed-refs"
    path.write_bytes(_sorted_packed(present, peeled))
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for name in [*names, b"refs/a", b"refs/zzz", b"refs/worklease/"]:
            assert _gitread._names(data, name) == (name in present), name


def test_an_unsorted_file_is_searched_whole(tmp_path: Path) -> None:
    path = tmp_path / "packed-refs"
    path.write_bytes(b"a" * 40 + b" refs/worklease/b\n" + b"a" * 40 + b" refs/worklease/a\n")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        assert _gitread._names(data, b"refs/worklease/a")
        assert _gitread._names(data, b"refs/worklease/b")
        assert not _gitread._names(data, b"refs/worklease/c")


def test_packed_refs_are_scanned_once_per_file_and_damage_is_still_found(
    cli, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitlease.api import lease
    from gitlease.store.location import open_store

    store = open_store(cwd=repo)  # (30 claims in one process: 30 commands take minutes at load)
    for i in range(30):
        lease.acquire(store, f"packed/{i}", receipt=repo.parent / f"r{i}.json", bind=False)
    store_git("pack-refs", "--all", cwd=repo)
    git_dir = store_path(repo)
    scans = []
    real = _gitread._scan
    monkeypatch.setattr(_gitread, "_scan", lambda *a: scans.append(a[3]) or real(*a))
    _gitread._KNOWN_GOOD.clear()
    for i in range(30, 40):
        ref = f"refs/worklease/packed/{i}.lease"
        assert _gitread.packed_refs_problem(git_dir, ref) is None
    assert len(scans) == 1, "one whole scan for one packed-refs file"
    assert (git_dir / "worklease" / "packed-refs-checked").exists()
    _gitread._KNOWN_GOOD.clear()  # another process: it reads the identity from the file
    assert _gitread.packed_refs_problem(git_dir, "refs/worklease/packed/99.lease") is None
    assert len(scans) == 1
    # a line naming the ref is found by the lookup, and then judged by the scan
    named = "refs/worklease/packed/7.lease"
    assert "names" in (_gitread.packed_refs_problem(git_dir, named) or "")
    # an edit of the file, in place and at the same size, is a new identity: scanned again
    packed = git_dir / "packed-refs"
    good = packed.read_bytes()
    damaged = good.replace(b"packed/3.lease\n", b"packed/3.lease \n", 1)[:-1]
    assert len(damaged) == len(good)
    packed.write_bytes(damaged)
    problem = _gitread.packed_refs_problem(git_dir, "refs/worklease/packed/55.lease")
    assert problem and "corrupt at line" in problem
    got = cli("acquire", "packed/55", "--json")
    assert got.code == 7 and "packed-refs" in got.json["error"]["message"], got
    packed.write_bytes(good)
    assert cli("acquire", "packed/55").code == 0


def test_a_mark_only_rises_and_leaves_no_tail(tmp_path: Path) -> None:
    git_dir = tmp_path / "store.git"
    ref = "refs/worklease/x.lease"
    highwater.raise_to(git_dir, ref, 99, durable=True)
    assert highwater.read(git_dir, ref) == 99
    highwater.raise_to(git_dir, ref, 7)
    assert highwater.read(git_dir, ref) == 99, "never lowered"
    highwater.raise_to(git_dir, ref, 100)
    path = highwater.mark_path(git_dir, ref)
    assert path.read_bytes() == f"100 {ref}\n".encode()
    path.write_bytes(b"5 " + b"r" * 200 + b"\n")  # someone else's longer text
    highwater.raise_to(git_dir, ref, 101)
    assert path.read_bytes() == f"101 {ref}\n".encode()
    highwater.forget(git_dir, ref)
    assert highwater.read(git_dir, ref) == 0
    highwater.raise_to(git_dir, ref, 3)
    assert highwater.read(git_dir, ref) == 3


def test_concurrent_raisers_leave_the_highest(tmp_path: Path) -> None:
    git_dir = tmp_path / "store.git"
    ref = "refs/worklease/x.lease"
    code = (
        "import sys; from pathlib import Path; from gitlease.state import highwater\n"
        "g, start = Path(sys.argv[1]), int(sys.argv[2])\n"
        "for r in range(start, 400, 4): highwater.raise_to(g, 'refs/worklease/x.lease', r)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(git_dir), str(i)]) for i in range(4)]
    assert all(p.wait() == 0 for p in procs)
    assert highwater.read(git_dir, ref) == 399


def test_a_ref_is_read_afresh_while_its_blob_is_remembered(store) -> None:
    import gitlease

    gitlease.acquire(store, "blob/1", ttl="5m", bind=False)
    ref = "refs/worklease/blob/1.lease"
    first = store.read(ref)
    gitlease.release(store, "blob/1")
    second = store.read(ref)
    assert second.oid != first.oid and second.data != first.data
    assert store.read_blob(first.oid) == (first.data, None)


def test_streamed_list_json_is_the_document_byte_for_byte(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gitlease.cli import jsonout

    docs = [
        {"resource": f"r/{i}\x7f\u0085\udcff", "n": None, "f": 1.5, "b": True, "x": {"k": [1]}}
        for i in range(1203)
    ]
    for case in (docs, [], docs[:1], docs[:500]):
        jsonout.print_claims_json(iter(case))
        streamed = capsys.readouterr().out
        jsonout.print_json({"claims": case})
        assert streamed == capsys.readouterr().out


def test_the_verified_cache_holds_every_record_a_read_saw(tmp_path: Path) -> None:
    from gitlease.state import verified_records as verified

    git_dir = tmp_path / "store.git"
    seen = [f"{i:040x}" for i in range(verified.MAX_ENTRIES + 5000)]
    older = [f"{i:040x}" for i in range(10**6, 10**6 + 10)]
    verified.save(git_dir, seen, older)
    kept = verified.load(git_dir)
    assert set(seen) <= kept and set(older) <= kept


def test_the_json_escape_pattern_is_everything_from_del_up() -> None:
    """Spelled as a negation (the range form cost every command 3-10 ms to compile)."""
    import re

    from gitlease.cli import jsonout

    ranged = re.compile(r"[\x7f-\U0010ffff]")
    assert all(
        bool(jsonout._JSON_RAW.match(chr(c))) == bool(ranged.match(chr(c))) for c in range(0x110000)
    )


def _git_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    real = subprocess.run

    def counting(args, *a, **kw):  # type: ignore[no-untyped-def]
        calls.append(list(args))
        return real(args, *a, **kw)

    monkeypatch.setattr(subprocess, "run", counting)
    return calls


def test_acquires_look_at_the_hooks_runs_two_git_processes(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rev-parse (common dir and top at once) and the `core.hooksPath` lookup; the
    worktrees are listed only when the hooks folder could be part of a checkout."""
    from conftest import git, run_cli

    from gitlease.hooks import install

    assert run_cli("hooks", "install", cwd=repo).code == 0
    wt = repo.parent / "wt-hooks"
    git("worktree", "add", "-q", "-b", "hooked", str(wt), cwd=repo)
    calls = _git_calls(monkeypatch)
    for where in (repo, wt):
        calls.clear()
        found = install.commit_check(where)
        assert found is not None and found.in_effect, found
        assert [c[1] for c in calls] == ["rev-parse", "config"], calls
    # a hooks folder inside the checkout: the worktrees (and its ignore rules) are asked for
    git("config", "core.hooksPath", ".githooks", cwd=repo)
    calls.clear()
    found = install.commit_check(repo)
    assert found is not None and not found.in_effect
    assert found.location.checkout == repo
    assert "worktree" in [c[1] for c in calls] and "check-ignore" in [c[1] for c in calls]


def test_show_and_free_of_loose_or_absent_records_start_no_git(repo: Path, tmp_path: Path) -> None:
    """A record whose ref and object are loose is read from the files; a resource nothing
    names is known free from the files too (no loose ref, a well-formed ``packed-refs``
    without it). A packed record still reads right, through git."""
    from conftest import run_cli
    from gitcalls import counted, counting_git

    assert run_cli("acquire", "fp/held", "--ttl", "10m", cwd=repo).code == 0
    env, calls = counting_git(tmp_path)
    for args in (("show", "fp/held"), ("show", "fp/free"), ("free", "fp/held", "fp/free")):
        calls.write_text("")
        out = run_cli(*args, "--json", cwd=repo, env=env)
        assert out.code in (0, 3), out
        assert counted(calls) == 0, (args, calls.read_text())
    shown = run_cli("show", "fp/free", "--json", cwd=repo).json
    assert shown["state"] == "free", shown
    free = run_cli("free", "fp/held", "fp/free", "--json", cwd=repo)
    assert [c["resource"] for c in free.json["claims"]] == ["fp/free"], free
    store_git("pack-refs", "--all", cwd=repo)  # the record now only in packed-refs
    calls.write_text("")
    held = run_cli("show", "fp/held", "--json", cwd=repo, env=env).json
    assert held["state"] == "active" and counted(calls) >= 1, held
    assert run_cli("free", "fp/held", "fp/free", "--json", cwd=repo, env=env).code == 0


def test_a_packed_refs_sorted_only_by_its_header_never_hides_a_held_claim(
    repo: Path, tmp_path: Path
) -> None:
    """A ``packed-refs`` whose header says ``sorted`` with a line out of order (a hand edit, a
    tool): git and libgit2 binary-search it and miss that line. A read remembered such a file
    as well formed, and every later process binary-searched it too: `free` offered the held
    claim and a second acquire was granted. Such a file is never remembered: the claim stays
    held for every command, read after read."""
    from conftest import run_cli

    for name in ("alpha", "mid", "zulu"):
        assert run_cli("acquire", f"ps/{name}", "--ttl", "10m", cwd=repo).code == 0
    store_git("pack-refs", "--all", cwd=repo)
    packed = store_path(repo) / "packed-refs"
    header, *body = [line for line in packed.read_bytes().split(b"\n") if line]
    assert b" sorted" in header
    moved = [line for line in body if b"/alpha" in line]
    packed.write_bytes(b"\n".join([header, *[x for x in body if x not in moved], *moved]) + b"\n")
    other = tmp_path / "other.json"
    for _ in range(2):  # (the first look scans the file whole; the second must too)
        run_cli("show", "ps/alpha", cwd=repo)
        free = run_cli("free", "ps/alpha", "--json", cwd=repo)
        assert free.json["claims"] == [], free
        got = run_cli("acquire", "ps/alpha", "--ttl", "1m", "--receipt", str(other), cwd=repo)
        assert got.code != 0, "a second holder of ps/alpha"


def _held_and_packed(repo: Path, names: list[str]) -> Path:
    from conftest import run_cli

    for name in names:
        assert run_cli("acquire", name, "--ttl", "10m", cwd=repo).code == 0
    store_git("pack-refs", "--all", cwd=repo)
    return store_path(repo) / "packed-refs"


def _never_free(repo: Path, tmp_path: Path, resource: str) -> None:
    """``resource`` is held: `show` does not say free, `free` does not offer it, and a second
    acquire is refused, at the first look and at the next (once anything was remembered)."""
    from conftest import run_cli

    other = tmp_path / "other.json"
    for _ in range(2):
        show = run_cli("show", resource, "--json", cwd=repo)
        assert show.code != 0 or show.json["state"] != "free", show
        free = run_cli("free", resource, "--json", cwd=repo)
        assert free.json["claims"] == [], free
        got = run_cli("acquire", resource, "--ttl", "1m", "--receipt", str(other), cwd=repo)
        assert got.code != 0, f"a second holder of {resource}: {got}"


def test_a_line_out_of_order_that_git_itself_misses_is_never_absent(
    repo: Path, tmp_path: Path
) -> None:
    """With enough lines, git's own binary search misses the line moved out of order (so
    `cat-file` and `for-each-ref` say absent): a read that finds ``packed-refs`` naming the
    ref never takes git's "absent" for it."""
    names = [f"mv/r{i:02d}" for i in range(12)]
    packed = _held_and_packed(repo, names)
    header, *body = [line for line in packed.read_bytes().split(b"\n") if line]
    moved = [line for line in body if b"/mv/r00." in line]
    packed.write_bytes(b"\n".join([header, *[x for x in body if x not in moved], *moved]) + b"\n")
    ref = "refs/worklease/mv/r00.lease"
    assert store_git("rev-parse", "-q", "--verify", ref, cwd=repo, check=False).returncode != 0
    _never_free(repo, tmp_path, "mv/r00")


def test_a_blank_line_in_a_sorted_packed_refs_never_hides_a_held_claim(
    repo: Path, tmp_path: Path
) -> None:
    """A blank line reads as a ref named "" to a binary search, which then turns the wrong way:
    such a file is not sorted as it claims, and is never remembered."""
    names = [f"bl/r{i:02d}" for i in range(12)]
    packed = _held_and_packed(repo, names)
    lines = packed.read_bytes().split(b"\n")
    lines.insert(len(lines) // 2, b"")
    packed.write_bytes(b"\n".join(lines))
    with open(packed, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        missed = [n for n in names if not _gitread._names(m, f"refs/worklease/{n}.lease".encode())]
    assert missed, "(a binary search misses a line)"
    _never_free(repo, tmp_path, missed[0])


def test_an_identity_remembered_by_an_earlier_version_is_not_believed(
    repo: Path, tmp_path: Path
) -> None:
    """gitlease before the sort check remembered any well-formed ``packed-refs``, sorted as it
    claims or not; its record of a file's identity (the same format then) must not count."""
    import os

    from gitlease.gitio import layout

    packed = _held_and_packed(repo, [f"ps/{n}" for n in ("alpha", "mid", "zulu")])
    header, *body = [line for line in packed.read_bytes().split(b"\n") if line]
    moved = [line for line in body if b"/alpha" in line]
    packed.write_bytes(b"\n".join([header, *[x for x in body if x not in moved], *moved]) + b"\n")
    st = os.stat(packed)
    old = f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} sha1"
    checked = layout.packed_refs_checked(store_path(repo))
    checked.parent.mkdir(parents=True, exist_ok=True)
    checked.write_text(old + "\n")
    _never_free(repo, tmp_path, "ps/alpha")
