"""What revisions depend on is on disk before ``acquire`` answers
(docs/reference/store.md, durability): a real ``acquire`` under ``strace``, whose fsync and
fdatasync calls name the receipt, the record object, the ref, and then the high-water mark,
in that order. Skipped, saying why, where strace is not installed or cannot trace here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import store_path

pytestmark = pytest.mark.skipif(
    shutil.which("strace") is None and os.environ.get("GITLEASE_REQUIRE_TOOLS") != "1",
    reason="strace is not installed",
)


#: An acquire through the library, which writes through libgit2 (the CLI: git update-ref).
_LIBRARY_ACQUIRE = (
    "import sys; from gitlease.api.lease import acquire; "
    "from gitlease.store.location import open_store; "
    "acquire(open_store(), sys.argv[1], bind=False)"
)


def _synced(repo: Path, tmp_path: Path, *args: str, library: bool = False) -> list[str]:
    """The files ``gitlease ARGS`` fsyncs or fdatasyncs, in order ("dir:" for directories);
    ``library``: an acquire of ``ARGS[0]`` through the library instead."""
    out = tmp_path / "trace"
    run = ["-c", _LIBRARY_ACQUIRE] if library else ["-m", "gitlease"]
    cmd = [
        "strace", "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", "-o", str(out),
        sys.executable, *run, *args,
    ]  # fmt: skip
    got = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    if got.returncode != 0 and "ptrace" in got.stderr:
        pytest.skip(f"strace cannot trace here: {got.stderr.strip()[:200]}")
    assert got.returncode == 0, got.stderr
    synced = []
    for line in out.read_text().splitlines():
        if "<" not in line or "= 0" not in line:
            continue
        call = line.split("(", 1)[0].split()[-1]
        target = line.split("<", 1)[1].rsplit(">", 1)[0]
        kind = "dir:" if os.path.isdir(target) else ""
        synced.append(f"{call} {kind}{target}")
    return synced


def _first(synced: list[str], *needles: str) -> int:
    for i, entry in enumerate(synced):
        if all(n in entry for n in needles):
            return i
    raise AssertionError(f"no sync of {needles} in {synced}")


@pytest.mark.parametrize("writer", ["cli", "library"])
def test_acquire_syncs_receipt_record_ref_then_mark(
    repo: Path, tmp_path: Path, writer: str
) -> None:
    """The CLI's writer (git update-ref: git syncs the ref's new file, gitlease its folder)
    and the library's (libgit2, which syncs both) keep the same order."""
    if writer == "cli":
        synced = _synced(repo, tmp_path, "acquire", "durable/1", "--no-bind")
    else:
        synced = _synced(repo, tmp_path, "durable/1", library=True)
    store = str(store_path(repo))
    receipt = _first(synced, "fsync ", "/worklease/receipts/", ".gitlease")
    receipt_dir = _first(synced, "fsync dir:", "/worklease/receipts/")
    record = _first(synced, "fsync ", store + "/objects/")
    ref = _first(synced, "fsync ", store + "/refs/worklease/durable/1.lease.lock")
    ref_dir = _first(synced, "fsync dir:", store + "/refs/worklease/durable")
    mark = _first(synced, "fdatasync ", store + "/worklease/highwater/")
    assert receipt < receipt_dir < record < ref < ref_dir < mark, synced
    # a second acquire of the same resource (after release) syncs its mark in place again
    subprocess.run([sys.executable, "-m", "gitlease", "release", "durable/1"], cwd=repo, check=True)
    again = _synced(repo, tmp_path, "acquire", "durable/1", "--no-bind")
    _first(again, "fdatasync ", store + "/worklease/highwater/")


@pytest.mark.parametrize("writer", ["cli", "library"])
def test_an_explicit_receipt_is_synced_before_its_claim(
    repo: Path, tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receipt at a path the caller names (``--receipt``, written in place under its lock)
    is on disk, with its folder's new name, before the record and the ref, as the worktree's
    own receipts are (it was not synced at all before)."""
    folder = tmp_path / "receipts"
    folder.mkdir(mode=0o700)
    path = folder / f"{writer}.json"
    if writer == "cli":
        args = ("acquire", "durable/3", "--no-bind", "--receipt", str(path))
        synced = _synced(repo, tmp_path, *args)
    else:
        monkeypatch.setenv("GITLEASE_RECEIPT", str(path))
        synced = _synced(repo, tmp_path, "durable/3", library=True)
    store = str(store_path(repo))
    receipt = _first(synced, "fsync ", str(path))
    receipt_dir = _first(synced, f"fsync dir:{folder}")
    record = _first(synced, "fsync ", store + "/objects/")
    ref = _first(synced, "fsync ", store + "/refs/worklease/durable/3.lease.lock")
    assert receipt < receipt_dir < record < ref, synced


def test_release_syncs_nothing(repo: Path, tmp_path: Path) -> None:
    """A release hands out no revision: losing it to a power cut never repeats one."""
    subprocess.run(
        [sys.executable, "-m", "gitlease", "acquire", "durable/2", "--no-bind"],
        cwd=repo,
        check=True,
    )
    synced = _synced(repo, tmp_path, "release", "durable/2")
    assert synced == [], synced
    # and the next acquire (another process) syncs again
    again = _synced(repo, tmp_path, "acquire", "durable/2", "--no-bind")
    _first(again, "fsync ", str(store_path(repo)) + "/refs/worklease/durable/2.lease.lock")
