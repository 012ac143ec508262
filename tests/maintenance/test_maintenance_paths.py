"""The fast paths of ``verify`` and the retention pass give the answers of the slow ones they
replace (docs/performance.md, ``verify`` and ``prune``).

* Many blobs read in one stream (``BatchReader.blobs``) are what one read each gives.
* A reflog read once (``maintenance.history.Kept``) says where the history starts and what
  the ref held, as the store's own reads of it do, on odd reflogs too.
* Every high-water mark read in one listing is what a read of each ref's mark gives.
* The reflogs listed by ``scandir`` are the store's list.
* The pass's ``git gc`` skips git's own reflog expiry only in a store whose every reflog is
  a claim's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import store_git, store_path

import gitlease
from gitlease.gitio.catfile import BatchReader
from gitlease.maintenance import history
from gitlease.model.refname import encode
from gitlease.state import highwater
from gitlease.store.base import Store
from gitlease.store.local import LocalStore

Z = "0" * 40


def _blob(repo: Path, data: bytes) -> str:
    return subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
        input=data, capture_output=True, check=True,
    ).stdout.decode().strip()  # fmt: skip


def test_a_stream_of_reads_gives_what_one_read_each_gives(repo: Path) -> None:
    git_dir = store_path(repo)
    blobs = [_blob(repo, f"blob {i}\n".encode() * (i + 1)) for i in range(300)]
    tree = store_git("hash-object", "-w", "-t", "tree", "/dev/null", cwd=repo).stdout.strip()
    odd = [tree, "f" * 40, "not-an-id", "-", "a" * 41, blobs[3]]  # not a blob, missing, bad ids
    wanted = blobs + odd  # (more than a pipe's page: written by the thread)
    one, many = BatchReader(git_dir), BatchReader(git_dir)
    try:
        expected = {oid: one.read(oid) for oid in wanted}
        got = many.blobs(wanted)
        assert got == expected
        assert many.blobs([]) == {}
        assert many.blobs(blobs[:2]) == {oid: expected[oid] for oid in blobs[:2]}
        assert many.read(blobs[7]) == expected[blobs[7]], "the process stays in step"
    finally:
        one.close()
        many.close()


def _line(old: str, new: str, when: int = 1_700_000_000) -> str:
    return f"{old} {new} A U Thor <a@example.invalid> {when} +0000\tgitlease\n"


@pytest.mark.parametrize(
    "shape", ["acquired", "trimmed", "torn write", "empty first line", "long first line", "junk"]
)
def test_a_reflog_read_once_says_what_the_stores_reads_say(store, repo: Path, shape: str) -> None:
    ref = encode("paths/1")
    gitlease.acquire(store, "paths/1", ttl="10m", bind=False)
    gitlease.heartbeat(store, "paths/1")
    log = store_path(repo) / "logs" / ref
    lines = log.read_text().splitlines(keepends=True)
    a, b = (line.split(" ")[1] for line in lines)
    current = store_git("rev-parse", ref, cwd=repo).stdout.strip()
    text = {
        "acquired": "".join(lines),
        "trimmed": _line(Z, b),
        "torn write": _line(Z, a) + _line(a, "e" * 40) + _line(a, b),  # a line never landed
        "empty first line": "\n" + _line(Z, a) + _line(a, b),
        "long first line": _line(Z, a).replace("\tgitlease", "\t" + "x" * 600) + _line(a, b),
        "junk": "x\n" + _line(Z, a) + "\n" + _line(a, b) + "y z",
    }[shape]
    log.write_text(text)
    fresh = LocalStore(store.location)
    kept = history.Kept.read(fresh, ref)
    assert kept.start == fresh.history_start(ref)
    assert kept.landed(current) == fresh.reflog_landed(ref, current)
    assert kept.landed(None) == fresh.reflog_landed(ref, None)
    with history.reading(fresh) as records:
        by_one = {oid: records.get(oid) for oid in kept.named()}
        revisions = [r.revision for r in by_one.values() if r is not None]
        assert history.max_revision(kept.named(), records) == max(revisions, default=0)
    missing = history.Kept.read(fresh, encode("paths/never"))
    assert missing.lines == [] and missing.start is None


def test_every_mark_read_at_once_is_what_each_read_gives(tmp_path: Path) -> None:
    refs = [encode(f"marks/{i}") for i in range(40)]
    for i, ref in enumerate(refs):
        highwater.raise_to(tmp_path, ref, 10 + i, durable=False)
    folder = tmp_path / "worklease" / "highwater"
    named = highwater.mark_path(tmp_path, refs[0]).name
    (folder / named).write_text(f"7 {refs[1]}\n")  # the file of one ref naming another
    (folder / highwater.mark_path(tmp_path, refs[2]).name).write_text("not a mark\n")
    (folder / "stray").write_text(f"99 {refs[3]}\n")  # a name no ref has
    every = highwater.read_every(tmp_path)
    for ref in [*refs, encode("marks/none")]:
        assert every.get(ref, 0) == highwater.read(tmp_path, ref), ref
    assert highwater.read_every(tmp_path / "absent") == {}


def test_the_reflogs_listed_at_once_are_the_stores_list(store, repo: Path) -> None:
    for name in ("a/1", "a/b/2", "c"):
        gitlease.acquire(store, name, ttl="10m", bind=False)
    logs = store_path(repo) / "logs" / "refs" / "worklease"
    (logs / "a" / "1.lease.lock").write_text("")
    (logs / "gone" / "deep").mkdir(parents=True)
    (logs / "gone" / "deep" / "x.lease").write_text("")
    os.symlink(logs / "c.lease", logs / "link.lease")
    assert history.reflog_refs(store) == store.reflog_refs()
    assert len(store.reflog_refs()) == 5


def _gc_runs_reflog_expire(store: Store, tmp_path: Path, monkeypatch) -> bool:
    trace = tmp_path / "trace"
    trace.unlink(missing_ok=True)
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    store.collect_garbage_trimmed("now")
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    return '"reflog","expire"' in trace.read_text() or "reflog expire" in trace.read_text()


def test_the_pass_leaves_out_gits_reflog_expiry_only_for_a_store_of_claims(
    store, repo: Path, tmp_path: Path, monkeypatch
) -> None:
    gitlease.acquire(store, "gc/1", ttl="10m", bind=False)
    assert not _gc_runs_reflog_expire(store, tmp_path, monkeypatch)
    other = store_path(repo) / "logs" / "refs" / "heads" / "main"
    other.parent.mkdir(parents=True)
    other.write_text("")
    assert _gc_runs_reflog_expire(store, tmp_path, monkeypatch), "another ref's reflog"
