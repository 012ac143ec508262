"""The verified-records cache (docs/design.md): reads verify a record once across processes;
an entry never passes other bytes under its id, a foreign cache is ignored, and no decision
uses the cache. Counting, never timing: which modules a process imported.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import git, store_path
from probes import probe, replace_object


def _cache(repo: Path) -> Path:
    return store_path(repo) / "worklease" / f"verified-{os.getuid()}"


def test_reads_verify_a_record_once_across_processes(cli, repo: Path) -> None:
    for i in range(3):
        assert cli("acquire", f"c/{i}", "--ttl", "5m", "--no-bind").code == 0
    _cache(repo).unlink()  # (as if another host had written them: see the next test)
    assert probe(repo, "cli", "list", "--json")["crypto"], "the first list verifies"
    assert _cache(repo).exists()
    for args in (["list", "--json"], ["show", "c/1"], ["free", "c/1", "c/9"]):
        got = probe(repo, "cli", *args)
        assert got["code"] == 0 and got["crypto"] == [], (args, got)


def test_a_write_notes_its_own_records(cli, repo: Path) -> None:
    """The first `show` or `list` after an acquire verified the record this host had just
    signed, loading cryptography for it (10-20 ms): the write now notes its records' ids,
    appended to the cache, and a record written elsewhere is still verified."""
    assert cli("acquire", "w/1", "--ttl", "5m", "--no-bind").code == 0
    assert probe(repo, "cli", "show", "w/1")["crypto"] == []
    assert cli("acquire", "w/2", "--ttl", "5m", "--no-bind").code == 0
    assert cli("heartbeat", "w/1").code == 0
    assert probe(repo, "cli", "list", "--json")["crypto"] == []
    assert cli("release", "w/2").code == 0
    assert probe(repo, "cli", "show", "w/2")["crypto"] == []
    lines = _cache(repo).read_bytes().split(b"\n")
    assert lines[0].startswith(b"gitlease verified-records") and lines[-1] == b"", lines
    # a record no write of this host made: its id is not in the cache, and it is verified
    assert cli("acquire", "c/1", "--ttl", "5m", "--no-bind").code == 0
    _tampered(repo)  # (c/1's record, changed and set at its ref by hand)
    got = probe(repo, "cli", "show", "c/1")
    assert got["crypto"] and got["code"] == 7, got


def _tampered(repo: Path) -> str:
    """Make the record of c/1 fail its signature (its note changed, the signature kept), set
    the ref to it; its object id."""
    gd = store_path(repo)
    oid = git(f"--git-dir={gd}", "rev-parse", "refs/worklease/c/1.lease", cwd=repo).stdout.strip()
    raw = git(f"--git-dir={gd}", "cat-file", "blob", oid, cwd=repo).stdout
    bad = raw.replace("note -", 'note "tampered"')
    new = (
        subprocess.run(
            ["git", f"--git-dir={gd}", "hash-object", "-w", "--stdin"],
            input=bad.encode(),
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    git(f"--git-dir={gd}", "update-ref", "refs/worklease/c/1.lease", new, cwd=repo)
    return new


def _write_cache(repo: Path, oids: list[str], mode: int = 0o600) -> None:
    from gitlease.state.verified_records import MAGIC

    path = _cache(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(MAGIC + "".join(f"{o}\n" for o in oids).encode())
    path.chmod(mode)


def test_a_cache_entry_never_passes_other_bytes_under_its_id(cli, repo: Path) -> None:
    doc = cli("acquire", "c/1", "--ttl", "5m", "--no-bind", "--json").json
    cli("list")  # remembers the good record's id
    from gitlease.state.verified_records import load

    gd = store_path(repo)
    assert doc["oid"] in load(gd)
    raw = git(f"--git-dir={gd}", "cat-file", "blob", doc["oid"], cwd=repo).stdout
    # the same record with its note changed and its signature kept, under the cached id
    replace_object(gd, doc["oid"], raw.replace("note -", 'note "tampered"').encode())
    got = cli("show", "c/1", "--json")
    assert got.code == 7 and got.json["error"]["claim"]["state"] == "invalid", got
    listed = cli("list", "--json").json["claims"]
    assert [c["state"] for c in listed] == ["invalid"], listed


@pytest.mark.parametrize("foreign", ["group-writable", "bad header", "a symbolic link"])
def test_a_foreign_cache_is_ignored(cli, repo: Path, tmp_path: Path, foreign: str) -> None:
    cli("acquire", "c/1", "--ttl", "5m", "--no-bind")
    bad = _tampered(repo)
    if foreign == "group-writable":
        _write_cache(repo, [bad], mode=0o620)
    elif foreign == "bad header":
        _write_cache(repo, [bad])
        _cache(repo).write_bytes(b"something else\n" + f"{bad}\n".encode())
    else:
        target = tmp_path / "elsewhere"
        _write_cache(repo, [bad])
        _cache(repo).rename(target)
        _cache(repo).symlink_to(target)
    listed = cli("list", "--json").json["claims"]
    assert [c["state"] for c in listed] == ["invalid"], (foreign, listed)
    assert cli("show", "c/1").code == 7


def test_decisions_never_use_the_cache(cli, repo: Path) -> None:
    """Even a cache of this user's own that names a broken record (only this user can write
    it) makes no decision take it: acquire, verify and the holder's own commands check."""
    doc = cli("acquire", "c/1", "--ttl", "1s", "--no-bind", "--json").json
    bad = _tampered(repo)
    _write_cache(repo, [bad, doc["oid"]])
    assert cli("list", "--json").json["claims"][0]["state"] != "invalid", (
        "the reads believe their own cache: what this user's cache says, they show"
    )
    time.sleep(1.2)
    taken = cli("acquire", "c/1", "--json")
    assert taken.code == 7 and "corrupt" in taken.json["error"]["message"], taken
    assert cli("heartbeat", "c/1").code == 4
    report = cli("verify", "--json")
    assert report.code != 0 and "invalid-record" in report.out, report


def test_a_fifo_at_the_cache_path_never_holds_a_write(repo: Path) -> None:
    """Anyone who may make files in a shared store's folder could put a FIFO where a user's
    cache goes: a write opened it to append and waited for a reader, its guard held."""
    from gitlease.state.verified_records import note_written

    path = _cache(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    note_written(store_path(repo), ["a" * 40])  # (returns: nothing reads the FIFO)
    assert path.exists() and not path.is_file()


def test_the_cache_is_this_user_s_alone_in_a_shared_store(cli, repo: Path) -> None:
    """In a store with core.sharedRepository=group every file gitlease writes is made group
    writable, the cache too, which the reads then refused: the cache never worked there."""
    git(f"--git-dir={store_path(repo)}", "config", "core.sharedRepository", "group", cwd=repo)
    assert cli("acquire", "sh/1", "--ttl", "5m", "--no-bind").code == 0
    assert probe(repo, "cli", "list", "--json")["code"] == 0
    assert oct(_cache(repo).stat().st_mode & 0o777) == oct(0o600)
    assert probe(repo, "cli", "show", "sh/1")["crypto"] == [], "the cache is used"
