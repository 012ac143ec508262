"""Findings of an adversarial review of issue 14's core edges and issue 20's shortcuts, each
shown with real processes on a real repository (docs/reference/exit-codes.md: an exit code
never contradicts the store; docs/design.md: the object id shortcut).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from conftest import run_cli, store_git, store_path
from test_retention import _counting_git

R = "review/1"
REF = "refs/worklease/review/1.lease"


def _with_stderr_closed(repo: Path, args: list[str]) -> types.SimpleNamespace:
    """``gitlease ARGS 2>&1 >/dev/tty | head -0``, made deterministic: stderr is a pipe whose
    reader is gone before the command writes (a supervisor that stopped reading its log)."""
    reader, writer = os.pipe()
    os.close(reader)
    proc = subprocess.run(
        [sys.executable, "-m", "gitlease", *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=writer,
        text=True,
    )
    os.close(writer)
    return types.SimpleNamespace(code=proc.returncode, out=proc.stdout)


@pytest.mark.parametrize(
    "args",
    [["acquire", R], ["acquire", R, "--json"], ["bundle", "acquire", "review/2", R]],
    ids=["acquire", "acquire-json", "bundle-acquire"],
)
def test_a_closed_stderr_never_leaves_a_claim_behind_a_failure(
    cli, repo: Path, args: list[str]
) -> None:
    """No hooks are installed, so the acquire warns on stderr that commits are not checked;
    that stderr cannot be written. The answer must still agree with the store: 0 with the
    claim held, or a failure with the claim released again (never exit 1 with it held)."""
    got = _with_stderr_closed(repo, args)
    held = cli("show", R, "--json").json["state"] == "active"
    assert (got.code == 0) == held, f"exit {got.code}, claim {'held' if held else 'not held'}"


def test_a_closed_stderr_after_first_free_skipped_an_invalid_record_leaves_no_claim(
    cli, repo: Path
) -> None:
    """``acquire --first-free`` reports on stderr each candidate it passed over for an invalid
    record; that line cannot be written either."""
    oid = subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
        input=b"not a record\n", capture_output=True, check=True,
    ).stdout.decode().strip()  # fmt: skip
    store_git("update-ref", "refs/worklease/review/bad.lease", oid, cwd=repo)
    got = _with_stderr_closed(repo, ["acquire", "--first-free", "review/bad", R, "--no-bind"])
    held = cli("show", R, "--json").json["state"] == "active"
    assert (got.code == 0) == held, f"exit {got.code}, claim {'held' if held else 'not held'}"


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
    from test_edges import _stamp, forge

    past = _stamp(time.time() - 10)
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


@pytest.mark.parametrize("verb", ["heartbeat", "release"])
def test_a_receipt_whose_token_was_replaced_is_lost_never_an_error(
    cli, repo: Path, verb: str
) -> None:
    """The record at the ref is byte for byte the one this worktree wrote (its binding names
    it), but the receipt's token was replaced since (by hand, or a receipt restored from
    another claim's copy): it proves nothing. A write must say LOST, as it did before the
    object id shortcut spared the key check, never exit 1 (a bug)."""
    from gitlease.model.record import new_token

    doc = cli("acquire", R, "--json").json
    receipt = Path(doc["receipt"])
    text = receipt.read_text()
    token = json.loads(text)["token"]
    receipt.write_text(text.replace(token, new_token()))
    got = cli(verb, R, "--json")
    assert got.code == 4, got
    assert cli("show", R, "--json").json["oid"] == doc["oid"], "nothing was written"


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


def test_a_stray_name_among_the_spent_receipts_never_fails_an_acquire_after_its_write(
    cli, repo: Path
) -> None:
    """The tidying after an acquire reads the hours under receipts/spent/ by name; a name
    that str.isdigit() takes but int() does not ('²') made it raise after the write: exit 1
    with the claim left active."""
    assert cli("acquire", "review/0", "--no-bind").code == 0
    (repo / ".git" / "worklease" / "receipts" / "spent" / "\u00b2").mkdir(parents=True)
    got = cli("acquire", R, "--no-bind")
    held = cli("show", R, "--json").json["state"] == "active"
    assert (got.code == 0) == held, got
    assert got.code == 0, got
    assert cli("prune").code == 0


def test_a_repository_whose_path_is_not_utf8_is_never_an_error(tmp_path: Path) -> None:
    """Refused as USAGE, naming the path and the fix (it used to be exit 1 everywhere)."""
    from conftest import make_repo, run_cli

    parent = Path(os.fsdecode(bytes(tmp_path) + b"/not-utf8-\xff"))
    repo = make_repo(parent / "repo")
    for args in (["list"], ["acquire", R], ["release", R], ["hooks", "install"], ["where"]):
        got = run_cli(*args, cwd=repo)
        assert got.code == 2 and "unexpected error" not in got.err, (args, got)
        assert "not UTF-8" in got.err and "\\xff" in got.err, (args, got.err)
    assert not (repo / ".git" / "worklease").exists(), "nothing written"


def test_free_never_offers_a_ref_moved_back_that_acquire_refuses(cli, repo: Path) -> None:
    """A released claim, another taken at the next revision, then the ref moved back to the
    first one's tombstone (a restored backup): acquire refuses it (STORE), so `free`, which
    says what can be acquired now, must not offer it."""
    assert cli("acquire", R, "--no-bind").code == 0
    tombstone = cli("release", R, "--json").json["oid"]
    assert cli("acquire", R, "--no-bind", "--ttl", "1h").code == 0
    store_git("update-ref", REF, tombstone, cwd=repo)
    assert cli("acquire", R, "--no-bind").code == 7
    got = cli("free", R, "review/2", "--json")
    assert got.code == 0, got
    assert [c["resource"] for c in got.json["claims"]] == ["review/2"], got


def test_a_copied_working_copy_does_not_hold_the_originals_claim(tmp_path: Path) -> None:
    """Issue 29.19: `cp -a` of a working copy copied its receipts (tokens) and bindings into
    a working copy sharing the store: the copy passed `check` and committed under the
    original's claim. Receipts and bindings now name the working copy they were written in."""
    import shutil

    from conftest import git, make_repo, run_cli

    origin = tmp_path / "origin.git"
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    repo = make_repo(tmp_path / "repo")
    git("remote", "add", "origin", str(origin), cwd=repo)
    assert run_cli("hooks", "install", cwd=repo).code == 0
    assert run_cli("acquire", R, cwd=repo).code == 0
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    assert run_cli("where", "--path", cwd=copy).out == run_cli("where", "--path", cwd=repo).out
    assert run_cli("check", R, cwd=copy).code == 4, "the copy holds the original's claim"
    (copy / "change").write_text("x\n")
    git("add", "change", cwd=copy)
    committed = subprocess.run(["git", "commit", "-qm", "x"], cwd=copy, capture_output=True)
    assert committed.returncode != 0, "a commit in the copy passed the check"
    assert run_cli("check", R, cwd=repo).code == 0, "the original still holds its claim"
    assert run_cli("heartbeat", R, cwd=repo).code == 0
    (repo / "change").write_text("x\n")
    git("add", "change", cwd=repo)
    assert subprocess.run(["git", "commit", "-qm", "x"], cwd=repo).returncode == 0


def test_a_bundle_members_check_spawns_no_more_git_processes_as_others_take_a_member(
    cli, repo: Path, tmp_path: Path, store
) -> None:
    """One member released on its own, then taken and released by others again and again:
    the partial-bundle check follows that member's chain of records back to the bundle's
    revision on every `check` and every commit. Through one `git cat-file --batch`, not two
    git processes a record (with 300 records, that was 600 processes and seconds a commit)."""
    from gitlease.api import lease

    receipt = tmp_path / "bundle.json"
    assert cli("bundle", "acquire", R, "review/2", "--receipt", str(receipt)).code == 0
    assert cli("release", "review/2", "--receipt", str(receipt)).code == 0
    env, calls = _counting_git(tmp_path)

    def check_calls() -> int:
        calls.write_text("")
        got = run_cli("check", R, "--receipt", str(receipt), cwd=repo, env=env)
        assert got.code == 0, got
        # (the store's location is read by git only when its cache is stale: not counted)
        return len([c for c in calls.read_text().splitlines() if "--show-origin" not in c])

    lease.acquire(store, "review/2", bind=False)
    lease.release(store, "review/2")
    few = check_calls()
    for _ in range(20):
        lease.acquire(store, "review/2", bind=False)
        lease.release(store, "review/2")
    assert check_calls() == few


def test_a_ref_restored_below_its_prune_floor_never_repeats_a_revision(cli, repo: Path) -> None:
    """prune removes a tombstone, keeps its revision as the floor and drops the high-water
    mark (the floor holds it); then a backup of the refs is restored, bringing back an
    older tombstone. The next acquire must not write a revision that was written before."""
    assert cli("acquire", R, "--no-bind").code == 0
    older = cli("release", R, "--json").json["oid"]
    second = cli("acquire", R, "--no-bind", "--json").json["revision"]
    assert cli("release", R).code == 0
    assert cli("prune", "--older-than", "0s").code == 0
    assert cli("show", R, "--json").json["state"] == "free", "the tombstone was pruned"
    store_git("update-ref", REF, older, cwd=repo)  # the restored backup
    got = cli("acquire", R, "--no-bind", "--json")
    if got.code == 0:
        assert got.json["revision"] > second, f"revision {second} repeated"
    else:
        assert got.code == 7 and "moved back" in got.json["error"]["message"], got
    assert cli("verify").code == 7 or got.code == 0, "verify names the ref moved back"


def test_the_commit_hook_says_when_test_only_switches_count(cli, repo: Path) -> None:
    """With the explicit test gate set, a boot offset makes an expired claim look live: every
    command warns that the switches count, so that they never change a decision silently;
    the commit check changes one (it lets the commit through), so it must warn too."""
    from conftest import TESTING, git

    assert cli("hooks", "install").code == 0
    assert cli("acquire", R, "--ttl", "1s").code == 0
    time.sleep(1.3)
    (repo / "change").write_text("x\n")
    git("add", "change", cwd=repo)
    env = {**os.environ, **TESTING, "GITLEASE_TESTING_BOOT_OFFSET_MS": "-100000"}
    committed = subprocess.run(
        ["git", "commit", "-qm", "x"], cwd=repo, capture_output=True, text=True, env=env
    )
    if committed.returncode == 0:
        assert "GITLEASE_TESTING is set" in committed.stderr, committed.stderr
