"""The stores are siblings under one abstract contract (``gitlease/store/base.py``): a local
store and a remote store are both a ``gitlease.Store``, neither derives from the other, and
the remote store reaches its mirror (a local store it holds) through public methods only.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

import gitlease
from gitlease.store.base import Location, Store
from gitlease.store.local import LocalStore
from gitlease.store.remote import RemoteStore

STORE = Path(gitlease.__file__).parent / "store"


def test_open_store_gives_a_store_of_either_kind(tmp_path: Path) -> None:
    server = tmp_path / "server.git"
    subprocess.run(["git", "init", "-q", "--bare", str(server)], check=True)
    local = gitlease.open_store(server, remote="")
    remote = gitlease.open_store(server, remote=server.as_uri())
    assert isinstance(local, gitlease.Store) and isinstance(local, LocalStore)
    assert isinstance(remote, gitlease.Store) and isinstance(remote, gitlease.RemoteStore)
    assert not isinstance(remote, LocalStore), "siblings: the remote holds its mirror"
    assert isinstance(remote.mirror, LocalStore)
    assert remote.mirror.git_dir == remote.git_dir == local.git_dir
    assert gitlease.Store is Store


def test_the_abstract_store_cannot_be_made(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="abstract"):
        Store(Location(tmp_path, "test", None, None))  # type: ignore[abstract]


def test_the_remote_side_uses_no_private_name_of_the_local_store() -> None:
    """``remote.py``, ``settle.py`` and ``link.py`` name no ``_private`` attribute of another
    object (only their own ``self._...``), and import nothing private from ``local.py``."""
    for name in ("remote.py", "settle.py", "link.py"):
        tree = ast.parse((STORE / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                if node.attr.startswith("__"):
                    continue
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id == "self", (
                    f"{name}:{node.lineno}: .{node.attr} of another object"
                )
            if isinstance(node, ast.ImportFrom) and node.module == "local":
                assert all(not a.name.startswith("_") for a in node.names), (name, node.lineno)


def test_a_store_that_can_be_behind_says_so_to_the_acquire() -> None:
    """An acquire skips its look before the guards when the store's reads are the truth
    itself; a store whose refusals wait for a fresh look (``recheck_refusal``) must say its
    reads can be behind, or a stale view would answer HELD with no fresh look."""
    import memstore

    kinds = [LocalStore, RemoteStore, memstore.MemoryStore]
    for kind in kinds:
        rechecks = kind.recheck_refusal is not Store.recheck_refusal
        assert kind.reads_are_current is not rechecks, kind


def test_a_remote_store_is_no_local_store_by_class() -> None:
    assert LocalStore not in RemoteStore.__mro__
    assert RemoteStore not in LocalStore.__mro__


def test_a_ref_libgit2_cannot_open_is_a_problem_not_an_unexpected_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libgit2 raises OSError for a ref under a folder this user cannot enter: an acquire
    there ended in exit 1, an unexpected error. It is a ref that cannot be read (exit 7)."""
    from types import SimpleNamespace

    from gitlease.store.location import open_store

    store = open_store(cwd=repo)
    writer = store.writer

    def denied(ref: str) -> None:
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(writer, "repo", SimpleNamespace(references=SimpleNamespace(get=denied)))
    snap = writer.read("refs/worklease/x/held.lease")
    assert snap.oid is not None and "cannot be read by this user" in (snap.problem or ""), snap
