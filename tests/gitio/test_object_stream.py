"""The one reader of many objects (``gitio/catfile.py``): loose objects from their files, the
rest through one ``git cat-file --batch`` stream, gives for any mix of ids (loose, packed,
not blobs, missing, not ids at all, repeated) what one read of each gives.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitlease.gitio.catfile import BatchReader


def _git(git_dir: Path, *args: str, data: bytes | None = None) -> str:
    return (
        subprocess.run(
            ["git", f"--git-dir={git_dir}", *args], input=data, capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[str]]:
    """A bare repository with packed blobs, loose blobs (one larger than a pipe's page),
    a tree, and ids that are missing or no ids at all."""
    git_dir = tmp_path_factory.mktemp("objects") / "store.git"
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    write = ["hash-object", "-w", "--stdin"]
    packed = [_git(git_dir, *write, data=f"packed {i}\n".encode() * (i + 1)) for i in range(40)]
    listed = "".join(oid + "\n" for oid in packed).encode()
    subprocess.run(
        ["git", f"--git-dir={git_dir}", "pack-objects", "-q", str(git_dir / "objects/pack/p")],
        input=listed, capture_output=True, check=True,
    )  # fmt: skip
    _git(git_dir, "prune-packed")
    loose = [_git(git_dir, *write, data=f"loose {i}\n".encode()) for i in range(20)]
    loose.append(_git(git_dir, *write, data=b"x" * 9000))
    tree = _git(git_dir, "hash-object", "-w", "-t", "tree", "/dev/null")
    odd = [tree, "f" * 40, "not-an-id", "-", "a" * 41, ""]
    assert not (git_dir / "objects" / packed[0][:2] / packed[0][2:]).exists(), "packed"
    assert (git_dir / "objects" / loose[0][:2] / loose[0][2:]).exists(), "loose"
    return git_dir, packed + loose, odd


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_stream_of_any_mix_gives_what_one_read_each_gives(pool, data) -> None:
    git_dir, blobs, odd = pool
    ids = data.draw(st.lists(st.sampled_from(blobs + odd), max_size=120))
    one, many = BatchReader(git_dir), BatchReader(git_dir)
    try:
        expected = {oid: one.read(oid) for oid in ids}
        assert many.blobs(ids) == expected
        assert many.read(blobs[0]) == one.read(blobs[0]), "the process stays in step"
    finally:
        one.close()
        many.close()


def test_objects_names_each_objects_type_and_none_for_what_git_has_not(pool) -> None:
    git_dir, blobs, odd = pool
    tree, missing, *not_ids = odd
    reader = BatchReader(git_dir)
    try:
        found = reader.objects([blobs[0], blobs[-1], tree, missing, *not_ids, blobs[0]])
    finally:
        reader.close()
    assert found[blobs[0]] is not None and found[blobs[0]][0] == "blob"  # packed
    assert found[blobs[-1]] == ("blob", b"x" * 9000)  # loose, larger than a page
    assert found[tree] == ("tree", b"")
    assert found[missing] is None
    assert all(found[oid] is None for oid in not_ids)
    assert len(found) == 4 + len(not_ids)


def test_an_answer_out_of_step_is_asked_again_one_at_a_time(pool, monkeypatch) -> None:
    """When the stream's answers stop matching what was asked, the rest is read afresh."""
    from gitlease.gitio import catfile

    git_dir, blobs, _odd = pool
    real = catfile._answer
    calls = {"n": 0}

    def answer(oid: str, header: bytes, stdout):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 3:  # the third answer of the stream reads as out of step
            stdout.read(int(header.split()[2]) + 1)
            return catfile._ODD
        return real(oid, header, stdout)

    monkeypatch.setattr(catfile, "_answer", answer)
    packed = blobs[:10]
    reader, one = BatchReader(git_dir), BatchReader(git_dir)
    try:
        got = reader.blobs(packed)
        monkeypatch.setattr(catfile, "_answer", real)
        assert got == {oid: one.read(oid) for oid in packed}
    finally:
        reader.close()
        one.close()
