"""Over a tombstone at the last revision that parses (2**63 - 1), neither ``acquire`` nor
``verify --repair`` answers 0 for a record that nothing can read.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from conftest import store_git, store_path
from forged import forge, stamp

R = "review/1"
REF = "refs/worklease/review/1.lease"


def _put(repo: Path, ref: str, data: bytes) -> str:
    """Point ``ref`` at a blob holding ``data``, as a hand-run git command would."""
    oid = subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
        input=data, capture_output=True, check=True,
    ).stdout.decode().strip()  # fmt: skip
    store_git("update-ref", ref, oid, cwd=repo)
    return oid


def _at_the_last_revision(**values: str) -> bytes:
    """A validly self-signed tombstone at revision 2**63 - 1, the highest that parses (anyone
    who can write the store can make one)."""

    past = stamp(time.time() - 10)
    return forge(R, revision=str(2**63 - 1), state="released", released_at=past,
                 expires_at=past, **values)  # fmt: skip


def test_acquire_never_answers_0_for_a_revision_that_does_not_parse(cli, repo: Path) -> None:
    """The next revision after 2**63 - 1 would not parse: an acquire over that tombstone
    must not answer 0 for a record that every later command calls invalid."""
    forged = _put(repo, REF, _at_the_last_revision())
    got = cli("acquire", R, "--no-bind", "--json")
    if got.code == 0:
        assert cli("check", R).code == 0, f"acquire said 0, yet the claim is not held: {got}"
    else:
        assert got.code == 7, got
        assert cli("show", R, "--json").json["oid"] == forged, "nothing was written"


def test_verify_repair_never_calls_a_tombstone_that_does_not_parse_a_repair(
    cli, repo: Path
) -> None:
    """The record at revision 2**63 - 1 has a broken signature: the repair's tombstone would
    carry 2**63, which no parser reads. Exit 0 ("repaired") would contradict the store."""
    data = _at_the_last_revision()
    head, _, signature = data.rpartition(b"signature ")
    broken = head + b"signature " + (b"0" if signature[:1] != b"0" else b"1") + signature[1:]
    _put(repo, REF, broken)
    assert cli("verify").code == 7
    repaired = cli("verify", "--repair", "--json")
    after = cli("verify")
    assert repaired.code != 0 or after.code == 0, f"repaired, yet {after.out}"
