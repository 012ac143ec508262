"""Refs made by hand under ``refs/worklease/``: a name that is not UTF-8 is reported, never a
crash; a symbolic ref is an invalid record for every command, reads and writes alike.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import store_git, store_path
from forged import forge, put
from observe import CONTROL, no_crash, ref_of

R = "edge/1"
REF = "refs/worklease/edge/1.lease"


def test_a_ref_name_that_is_not_utf8_is_reported_not_a_crash(cli, repo: Path) -> None:
    """git allows any byte from 0x80 up in a ref name: a hand-made one must not crash."""
    oid = put(repo, ref_of("edge/ok"), forge("edge/ok"))
    store = f"--git-dir={store_path(repo)}"
    subprocess.run(["git", store, "update-ref", b"refs/worklease/\xff.lease", oid], check=True)
    for args in (["list"], ["list", "--json"], ["verify"], ["verify", "--json"], ["free", R],
                 ["acquire", R, "--no-bind"]):  # fmt: skip
        got = cli(*args)
        no_crash(got)
        assert not CONTROL.search(got.out + got.err), got
    listed = cli("list", "--json").json["claims"]
    assert [c["state"] for c in listed] == ["active", "active", "invalid"], listed
    assert listed[2]["ref"] == "refs/worklease/\udcff.lease", "the byte, kept as a surrogate"
    problems = cli("verify", "--json").json["problems"]
    assert [(p["kind"], p["ref"]) for p in problems] == [
        ("bad-ref-name", "refs/worklease/\udcff.lease")
    ]


def test_a_symbolic_ref_is_judged_alike_by_every_command(cli, repo: Path) -> None:
    """Issue 29.20: a symbolic ref under refs/worklease/ was read through by check, list,
    verify and the commit hook but unreadable to the writes: it is invalid for all."""
    doc = cli("acquire", R, "--no-bind", "--json").json
    store_git("update-ref", "refs/keep/review", doc["oid"], cwd=repo)
    store_git("symbolic-ref", REF, "refs/keep/review", cwd=repo)
    check, beat = cli("check", R), cli("heartbeat", R)
    assert (check.code == 0) == (beat.code == 0), f"check {check.code}, heartbeat {beat.code}"
    assert check.code != 0, check
    listed = {c["resource"]: c for c in cli("list", "--json").json["claims"]}
    assert listed[R]["state"] == "invalid", listed[R]
    shown = cli("show", R, "--json")
    assert shown.code == 7 and "symbolic" in shown.out, shown
    assert cli("verify").code == 7, "a ref gitlease cannot write is a problem verify names"


def test_a_broken_ref_file_is_listed_as_invalid(cli, repo: Path) -> None:
    """git names a broken ref only on stderr (``ignoring broken ref``), which the listing reads
    back from an unnamed file: ``list`` and ``list --json`` show it, whatever else is there."""
    assert cli("acquire", R, "--no-bind").code == 0
    broken = store_path(repo) / "refs" / "worklease" / "edge" / "broken.lease"
    broken.write_text("not an object id\n")
    listed = {c["ref"]: c for c in cli("list", "--json").json["claims"]}
    assert listed[REF]["state"] == "active", listed
    assert listed["refs/worklease/edge/broken.lease"]["state"] == "invalid", listed
    table = cli("list")
    no_crash(table)
    assert "edge/broken" in table.out, table
