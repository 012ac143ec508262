"""`verify` names store problems, not housekeeping (issues 29.16 and 29.20)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import run_cli, store_git, store_path

import gitlease
from gitlease.gitio.catfile import BatchReader
from gitlease.model.refname import encode
from gitlease.store.location import open_store

R = "verify/1"


def test_a_routine_release_and_reacquire_by_someone_else_is_no_problem(
    worktrees: tuple[Path, Path],
) -> None:
    """verify exited 7 ('PROBLEM orphan-receipt') for the spent receipt of a claim released
    and then taken by someone else: a spent receipt is housekeeping, tidied a day later."""
    a, b = worktrees
    assert run_cli("acquire", R, cwd=a).code == 0
    assert run_cli("release", R, cwd=a).code == 0
    assert run_cli("acquire", R, cwd=b).code == 0
    got = run_cli("verify", "--json", cwd=a)
    assert got.code == 0, got
    assert got.json["ok"] is True and got.json["problems"] == [], got
    assert run_cli("release", R, cwd=b).code == 0


# ------------------------------------------------------------------ reading once, trusting nothing


def _record_at(repo: Path, ref: str) -> tuple[str, str]:
    oid = store_git("rev-parse", ref, cwd=repo).stdout.strip()
    return oid, store_git("cat-file", "blob", oid, cwd=repo).stdout


def _write_blob(repo: Path, text: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
        input=text, text=True, capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip


def test_a_forged_record_is_flagged_after_its_valid_predecessor_was_read(store, repo) -> None:
    """verify reads each resource's history once and holds its records by id for every
    check; the current record is still verified itself. A forgery whose `previous` names a
    valid record, read by the history and by a list's cache of verified records, is flagged."""
    gitlease.acquire(store, R, ttl="10m", bind=False)
    gitlease.heartbeat(store, R)
    assert gitlease.verify(store).ok
    gitlease.list_claims(store)  # the reads' cache of verified records holds the current one
    ref = encode(R)
    oid, raw = _record_at(repo, ref)
    assert "\nnote -\n" in raw
    forged = _write_blob(repo, raw.replace("\nnote -\n", '\nnote "mine now"\n'))
    store_git("update-ref", ref, forged, oid, cwd=repo)
    report = gitlease.verify(store)
    assert [(p.kind, p.resource) for p in report.problems] == [("invalid-record", R)], report
    assert "signature" in report.problems[0].message


def test_a_record_from_another_resources_history_is_invalid_here(store, repo) -> None:
    """The records of one resource's history are read for all the checks of its group: one
    of them put at another resource's ref is still that resource's record, and invalid."""
    other = "verify/2"
    gitlease.acquire(store, other, ttl="10m", bind=False)
    gitlease.heartbeat(store, other)
    gitlease.acquire(store, R, ttl="10m", bind=False)
    reflog = (store_path(repo) / "logs" / encode(other)).read_text().splitlines()
    first = reflog[0].split(" ")[1]  # its acquire's record, named by its reflog
    store_git("update-ref", encode(R), first, cwd=repo)
    report = gitlease.verify(store)
    assert [(p.kind, p.resource) for p in report.problems] == [("invalid-record", R)], report
    assert repr(other) in report.problems[0].message


def test_verify_reads_each_kept_record_once(store, repo, monkeypatch) -> None:
    """The rollback check and the chain walk read the same records: each is read from git
    once a pass (before, twice: one round trip each)."""
    for i in range(3):
        for _ in range(2):
            gitlease.acquire(store, f"once/{i}", ttl="10m", bind=False)
            gitlease.heartbeat(store, f"once/{i}")
            gitlease.release(store, f"once/{i}")
    asked: list[str] = []
    real_read, real_many = BatchReader.read, BatchReader.blobs

    def read(self, oid):
        asked.append(oid)
        return real_read(self, oid)

    def read_many(self, oids):
        oids = list(oids)
        asked.extend(oids)
        return real_many(self, oids)

    monkeypatch.setattr(BatchReader, "read", read)
    monkeypatch.setattr(BatchReader, "blobs", read_many)
    assert gitlease.verify(open_store()).ok  # (as the CLI opens it: no pygit2 handle yet)
    assert len(asked) >= 3 * 5, "the histories were read"
    assert len(asked) == len(set(asked)), "a record was read twice"
