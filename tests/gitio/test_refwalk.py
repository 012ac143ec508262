"""A small store's refs read from their files (gitlease/gitio/refwalk.py) say what ``git
for-each-ref`` says of the same files, or leave the answer to git: never a third answer.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import run_cli, store_git, store_path
from gitcalls import counted, counting_git
from hypothesis import given, settings
from hypothesis import strategies as st

from gitlease.gitio import gitread, refwalk

PREFIX = "refs/worklease/"
A, B, C = "a" * 40, "b" * 40, "c" * 40


def _git_listing(git_dir: Path) -> tuple[list[tuple[str, str]], str]:
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", "for-each-ref", "--format=%(refname) %(objectname)",
         PREFIX],
        capture_output=True, check=True,
    )  # fmt: skip
    lines = out.stdout.decode("utf-8", "surrogateescape").splitlines()
    return [tuple(line.split(" ")) for line in lines], out.stderr.decode()  # type: ignore[misc]


def _write(git_dir: Path, ref: str, data: bytes) -> None:
    path = git_dir / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_a_store_gitlease_wrote_is_walked_loose_packed_and_both(repo: Path) -> None:
    for name in ("w/b", "w/a", "w/a-b", "w/%c3%a9", "w/z/deeper"):
        assert run_cli("acquire", name, "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    walked = refwalk.ref_ids(git_dir, PREFIX)
    assert walked is not None and len(walked) == 5
    assert walked == _git_listing(git_dir)[0]
    store_git("pack-refs", "--all", cwd=repo)  # every ref now a line of packed-refs
    assert not list((git_dir / "refs" / "worklease").rglob("*.lease"))
    assert refwalk.ref_ids(git_dir, PREFIX) == walked
    # a loose ref written after the packing stands over its packed line
    assert run_cli("acquire", "w/new", "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    _write(git_dir, "refs/worklease/w/a.lease", (C + "\n").encode())
    both = refwalk.ref_ids(git_dir, PREFIX)
    assert both is not None and dict(both)["refs/worklease/w/a.lease"] == C
    assert both == _git_listing(git_dir)[0]


def test_list_and_free_of_a_small_store_start_no_git(repo: Path, tmp_path: Path) -> None:
    """``list``'s one git process was ``for-each-ref``; ``free`` of more names than are read
    one by one listed the refs with it too. A store of plain refs, loose or packed, is now
    read from its files; a ref git must judge (here a symbolic one) still goes to git."""
    for i in range(3):
        assert run_cli("acquire", f"lg/{i}", "--ttl", "10m", cwd=repo).code == 0
    env, calls = counting_git(tmp_path)
    names = [f"lg/{i}" for i in range(20)]
    for packed in (False, True):
        if packed:
            store_git("pack-refs", "--all", cwd=repo)
        for args in (("list",), ("list", "--json"), ("free", *names)):
            calls.write_text("")
            out = (
                run_cli(*args, "--json", cwd=repo, env=env)
                if args[0] == "free"
                else run_cli(*args, cwd=repo, env=env)
            )
            assert out.code == 0, out
            assert counted(calls) == 0, (args, packed, calls.read_text())
        listed = run_cli("list", "--json", cwd=repo).json["claims"]
        assert [c["resource"] for c in listed] == ["lg/0", "lg/1", "lg/2"], listed
        free = run_cli("free", *names, "--json", cwd=repo).json["claims"]
        assert [c["resource"] for c in free] == names[3:], free
    store_git("symbolic-ref", "refs/worklease/lg/link.lease", "refs/worklease/lg/0.lease", cwd=repo)
    calls.write_text("")
    listed = run_cli("list", "--json", cwd=repo, env=env).json["claims"]
    assert counted(calls) >= 1, "a symbolic ref is git's to read"
    assert {c["ref"]: c["state"] for c in listed}["refs/worklease/lg/link.lease"] == "invalid"


def test_a_loose_ref_packed_while_the_walk_runs_is_found(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``git pack-refs`` writes ``packed-refs`` before it deletes the loose files: the walk
    reads the loose files first, so a file that vanished under it is in the ``packed-refs``
    read after (read before, the ref would be missed: a held claim listed as free)."""
    for name in ("pk/a", "pk/b", "pk/c"):
        assert run_cli("acquire", name, "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    before = refwalk.ref_ids(git_dir, PREFIX)
    assert before is not None and len(before) == 3
    opened: list[str] = []

    def pack_then_open(path, mode="r"):  # type: ignore[no-untyped-def]
        if not opened:
            store_git("pack-refs", "--all", cwd=repo)  # (every loose file is gone now)
        opened.append(str(path))
        return open(path, mode)

    monkeypatch.setattr(refwalk, "open", pack_then_open, raising=False)
    assert refwalk.ref_ids(git_dir, PREFIX) == before
    assert len(opened) == 3, "each file was listed, then found gone"


def test_a_store_larger_than_the_walk_goes_to_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the limit git lists the store, and the walk read no ref file first (it read up
    to the limit before: 2,000 wasted reads on every look at a big store)."""
    for name in ("big/a", "big/b", "big/c"):
        assert run_cli("acquire", name, "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    monkeypatch.setattr(refwalk, "WALK_LIMIT", 2)
    opened: list[str] = []
    monkeypatch.setattr(refwalk, "open", lambda p, m="r": opened.append(p), raising=False)
    assert refwalk.ref_ids(git_dir, PREFIX) is None
    assert opened == [], "a store too large for the walk goes to git with no file read"
    monkeypatch.delattr(refwalk, "open")
    store_git("pack-refs", "--all", cwd=repo)
    assert refwalk.ref_ids(git_dir, PREFIX) is None
    monkeypatch.setattr(refwalk, "WALK_LIMIT", 3)
    assert refwalk.ref_ids(git_dir, PREFIX) is not None


#: Name parts git reads plainly, and ones it refuses, skips or reads otherwise.
_PLAIN = ["a", "b", "a-b", "a.lease", "%2f", "x+1", "@scopes", "=q", "Z", "a.b"]
_ODD = [
    ".hidden", "x.lock", "end.", "a..b", "at@{1}", "@", "sp ace", "t~1", "c^", "q?", "*",
    "é", "a:b", "[x", "back\\slash", "\x7f",
]  # fmt: skip
_IDS = [(oid + "\n").encode() for oid in (A, B, C)]
_ODD_CONTENTS = [
    A.encode(), (A.upper() + "\n").encode(), (A + " \n").encode(), (" " + A + "\n").encode(),
    (A + "\r\n").encode(), (A + "\nmore\n").encode(), b"ref: refs/worklease/a\n",
    b"not an id\n", b"", ("d" * 64 + "\n").encode(), ("0" * 40 + "\n").encode(),
]  # fmt: skip
_SORTED = "# pack-refs with: peeled fully-peeled sorted \n"


def _names(parts: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(parts), min_size=1, max_size=3).map("/".join)


def _packed(names: list[str], ids: list[str], header: str, order: str) -> bytes:
    pairs = list(zip(names, ids, strict=False))
    if order == "sorted":
        pairs.sort()
    elif order == "reversed":
        pairs.sort(reverse=True)
    body = "".join(f"{oid} {PREFIX}{name}\n" for name, oid in pairs)
    return (header + body).encode("utf-8", "surrogateescape")


def _made(
    tmp: str, loose: list[tuple[str, bytes]], packed: bytes | None, link: bool
) -> Path | None:
    """A bare repository holding ``loose`` ref files and ``packed``; None when two of the
    names cannot both be made (one is a file and a folder of the other)."""
    git_dir = Path(tmp) / "store.git"
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    for name, data in loose:
        try:
            _write(git_dir, PREFIX + name, data)
        except OSError:
            return None
    if packed is not None:
        (git_dir / "packed-refs").write_bytes(packed)
    if link:
        (git_dir / "refs" / "worklease").mkdir(parents=True, exist_ok=True)
        (git_dir / "refs" / "worklease" / "ln").symlink_to(git_dir / "HEAD")
    gitread._KNOWN_GOOD.clear()
    return git_dir


def _same_as_git(git_dir: Path) -> bool:
    """Whether the walk answered (True) or left it to git; when it answered, it is exactly
    git's listing, and git warned of nothing (a warning is a ref the listing reports as
    broken, which only git's stderr names)."""
    walked = refwalk.ref_ids(git_dir, PREFIX)
    if walked is None:
        return False
    listing, warned = _git_listing(git_dir)
    assert walked == listing, (walked, listing)
    assert warned == "", warned
    return True


@settings(max_examples=60)
@given(
    loose=st.lists(st.tuples(_names(_PLAIN), st.sampled_from(_IDS)), max_size=6),
    packed_names=st.lists(_names(_PLAIN), max_size=6, unique=True),
    packed_ids=st.lists(st.sampled_from([A, B, C]), min_size=6, max_size=6),
)
def test_plain_stores_are_walked_as_git_lists_them(
    loose: list[tuple[str, bytes]], packed_names: list[str], packed_ids: list[str]
) -> None:
    """Plain names, whole ids, a sorted ``packed-refs`` (a loose ref over a packed line of
    the same name): read from the files, and the same as git's listing."""
    with tempfile.TemporaryDirectory() as tmp:
        packed = _packed(packed_names, packed_ids, _SORTED, "sorted") if packed_names else None
        git_dir = _made(tmp, loose, packed, link=False)
        if git_dir is not None:
            assert _same_as_git(git_dir), "a plain store is walked"


@settings(max_examples=150)
@given(
    loose=st.lists(
        st.tuples(
            st.one_of(_names(_PLAIN), _names(_PLAIN + _ODD)),
            st.one_of(st.sampled_from(_IDS), st.sampled_from(_IDS + _ODD_CONTENTS)),
        ),
        max_size=5,
    ),
    packed_names=st.lists(st.one_of(_names(_PLAIN), _names(_PLAIN + _ODD)), max_size=5),
    packed_ids=st.lists(
        st.sampled_from([A, B, C, "e" * 39, "^" + A, "0" * 40, "#"]), min_size=5, max_size=5
    ),
    header=st.sampled_from(["", _SORTED, "# pack-refs with: peeled \n"]),
    order=st.sampled_from(["sorted", "reversed", "given"]),
    link=st.sampled_from([False, False, False, True]),
)  # fmt: skip
def test_the_walk_is_git_s_listing_or_none(
    loose: list[tuple[str, bytes]],
    packed_names: list[str],
    packed_ids: list[str],
    header: str,
    order: str,
    link: bool,
) -> None:
    """Hand-made stores of every kind: whatever the walk answers is git's listing."""
    with tempfile.TemporaryDirectory() as tmp:
        packed = _packed(packed_names, packed_ids, header, order) if packed_names else None
        git_dir = _made(tmp, loose, packed, link)
        if git_dir is not None:
            _same_as_git(git_dir)


def test_a_loose_ref_with_a_leading_blank_is_git_s_to_judge(repo: Path) -> None:
    """git reads `` <id>`` as a broken ref; the one-ref quick read took it for the record."""
    from gitlease.gitio.objects import read_blob_ref

    assert run_cli("acquire", "lb/x", "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    ref = "refs/worklease/lb/x.lease"
    oid = (git_dir / ref).read_text().strip()
    assert read_blob_ref(git_dir, ref) is not None
    (git_dir / ref).write_text(" " + oid)
    assert read_blob_ref(git_dir, ref) is None
    shown = run_cli("show", "lb/x", "--json", cwd=repo)
    assert shown.code == 7 and "corrupt" in shown.out, shown


def _denied(folder: Path):  # type: ignore[no-untyped-def]
    """``os.scandir`` and ``os.lstat`` as a user who cannot enter ``folder`` sees them (a
    folder's mode does not stop root, as whom the tests may run)."""
    import os

    real_scandir, real_lstat = os.scandir, os.lstat

    def scandir(path):  # type: ignore[no-untyped-def]
        if Path(path) == folder:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    def lstat(path, *a, **k):  # type: ignore[no-untyped-def]
        if Path(path).parent == folder:
            raise PermissionError(13, "Permission denied", str(path))
        return real_lstat(path, *a, **k)

    return scandir, lstat


def test_a_ref_folder_this_user_cannot_read_is_store_not_free(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git skips a folder of refs it cannot list without a word: in a store shared by several
    users, a folder one of them made 0700 held a claim the others' `list` and `free` showed
    as free, and `show` too (nothing at its name, as far as this user could see). Unsure is
    not absent: the walk says STORE, and the one-ref look leaves the answer to git."""
    from gitlease.errors import StoreError

    assert run_cli("acquire", "pm/held", "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    folder = git_dir / "refs" / "worklease" / "pm"
    scandir, lstat = _denied(folder)
    monkeypatch.setattr(refwalk.os, "scandir", scandir)
    with pytest.raises(StoreError, match="cannot be read by this user"):
        refwalk.ref_ids(git_dir, PREFIX)
    monkeypatch.setattr(gitread.os, "lstat", lstat)
    assert not gitread.surely_absent(git_dir, "refs/worklease/pm/held.lease")
    monkeypatch.undo()
    assert gitread.surely_absent(git_dir, "refs/worklease/pm/other.lease")
    assert not gitread.surely_absent(git_dir, "refs/worklease/pm/held.lease")


@pytest.mark.parametrize(
    "damage",
    [
        b"# refs/worklease/c.lease\n",  # a comment after the header: git says "unexpected line"
        b"^" + A.encode() + b"\n^" + B.encode() + b"\n",  # two peeled lines in a row
        b"\n",  # a blank line
        b"0" * 40 + b" refs/worklease/z.lease\n",  # the null id
    ],
)
def test_a_packed_refs_line_git_refuses_is_git_s_to_judge(repo: Path, damage: bytes) -> None:
    """The walk took a comment line naming a ref for a ref whose id is ``#``, and read other
    lines git refuses the whole file for: each goes to git now, which says what it says."""
    for name in ("pd/a", "pd/b"):
        assert run_cli("acquire", name, "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    store_git("pack-refs", "--all", cwd=repo)
    git_dir = store_path(repo)
    packed = git_dir / "packed-refs"
    packed.write_bytes(packed.read_bytes() + damage)
    gitread._KNOWN_GOOD.clear()
    assert refwalk.ref_ids(git_dir, PREFIX) is None
    listed = run_cli("list", "--json", cwd=repo)
    resources = [c["resource"] for c in listed.json.get("claims", [])] if listed.code == 0 else []
    assert listed.code == 7 or "c" not in resources, listed


def test_a_loose_ref_of_the_null_id_is_git_s_to_judge(repo: Path) -> None:
    """git ignores a ref file of forty zeros as broken; the walk listed it with that id."""
    assert run_cli("acquire", "nz/a", "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    _write(git_dir, "refs/worklease/nz/zero.lease", b"0" * 40 + b"\n")
    assert refwalk.ref_ids(git_dir, PREFIX) is None
    listed = {c["ref"]: c for c in run_cli("list", "--json", cwd=repo).json["claims"]}
    assert listed["refs/worklease/nz/zero.lease"]["state"] == "invalid", listed


def test_a_listing_through_git_refuses_a_folder_this_user_cannot_read(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store too large for the walk is listed by git, which skips a folder it cannot list
    without a word: the folders are looked at first (STORE), and a ref git calls absent while
    its folder cannot be entered is a problem, never a free resource."""

    from gitlease.api.reads import list_claims
    from gitlease.errors import StoreError
    from gitlease.gitio.gitread import Snapshot
    from gitlease.store.location import open_store

    for name in ("pg/held", "other/a"):
        assert run_cli("acquire", name, "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    folder = git_dir / "refs" / "worklease" / "pg"
    monkeypatch.setattr(refwalk, "WALK_LIMIT", 1)  # (git lists this store)
    store = open_store(cwd=repo)
    assert [c.resource for c in list_claims(store)] == ["other/a", "pg/held"]
    scandir, lstat = _denied(folder)
    monkeypatch.setattr(gitread.os, "scandir", scandir)
    with pytest.raises(StoreError, match="refs/worklease/pg cannot be read by this user"):
        list_claims(store)
    names = [f"refs/worklease/pg/{i}.lease" for i in range(20)]
    with pytest.raises(StoreError, match="cannot be read by this user"):
        store.read_many(["refs/worklease/pg/held.lease", *names])
    monkeypatch.setattr(gitread.os, "lstat", lstat)
    missed = store._missed(Snapshot("refs/worklease/pg/held.lease", None, None))
    assert missed.oid is not None and "permission denied" in (missed.problem or ""), missed


def test_a_ref_file_this_user_cannot_open_is_a_problem_never_absent(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder others may enter (0711) holding a ref file only its owner reads (0600): git
    answers "no such ref" and for-each-ref lists nothing there, and `show` said free."""
    import os

    from gitlease.gitio.gitread import Snapshot
    from gitlease.store.location import open_store

    assert run_cli("acquire", "po/held", "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    held = git_dir / "refs" / "worklease" / "po" / "held.lease"
    real_open = os.open

    def denied(path, *a, **k):  # type: ignore[no-untyped-def]
        if Path(path) == held:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(gitread.os, "open", denied)
    store = open_store(cwd=repo)
    missed = store._missed(Snapshot("refs/worklease/po/held.lease", None, None))
    assert missed.oid is not None and "cannot be read" in (missed.problem or ""), missed
    free = store._missed(Snapshot("refs/worklease/po/free.lease", None, None))
    assert free.oid is None, "a ref with no file is absent, as git says"


def test_a_folder_listed_but_not_entered_is_store_for_every_listing(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder this user may list but not enter (0744 of another's): git skips the refs in
    it without a word; the look at the folders before a listing through git missed them."""
    import os

    from gitlease.errors import StoreError

    assert run_cli("acquire", "pe/held", "--no-bind", "--ttl", "10m", cwd=repo).code == 0
    git_dir = store_path(repo)
    folder = git_dir / "refs" / "worklease" / "pe"
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, m, *a, **k: Path(p) != folder and real_access(p, m, *a, **k)
    )
    assert gitread.unreadable_folder(git_dir, PREFIX) == "refs/worklease/pe"
    with pytest.raises(StoreError, match="cannot be read by this user"):
        refwalk.ref_ids(git_dir, PREFIX)
