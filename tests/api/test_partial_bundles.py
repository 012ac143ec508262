"""Partial bundles: what a bundle acquire killed mid-commit leaves (a member never written) is
reported by ``verify``, refused by every command on either member, and releasable; a
member released on its own and taken since is no partial bundle, nor is an expired one;
the check follows a member's chain through one ``git cat-file --batch``
(docs/reliability.md, "At the edges", item 15).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import git, run_cli, store_git
from gitcalls import counted, counting_git
from observe import ref_of, state

R = "edge/1"


def _partial_bundle(cli, repo: Path, receipt: Path | None = None) -> list[str]:
    """What a bundle acquire killed mid-commit leaves: the receipt, and one member written
    (libgit2 commits ref by ref). Built by removing the other member's ref."""
    extra = ["--receipt", str(receipt)] if receipt else []
    assert cli("bundle", "acquire", "p/1", "p/2", "--no-bind", *extra).code == 0
    store_git("update-ref", "-d", ref_of("p/2"), cwd=repo)
    return extra


def test_verify_reports_a_partial_bundle_and_bundle_commands_refuse_it(cli, repo: Path) -> None:
    _partial_bundle(cli, repo)
    report = cli("verify", "--json")
    assert report.code == 7
    assert [p["kind"] for p in report.json["problems"]] == ["partial-bundle"]
    assert "p/2" in report.json["problems"][0]["message"]
    for args in (["bundle", "check"], ["bundle", "heartbeat"]):
        got = cli(*args, "--json")
        assert got.code == 4 and "partial: p/2 was never written" in got.json["error"]["message"]


@pytest.mark.parametrize("where", ["receipt", "worktree"])
def test_nobody_can_act_on_a_member_of_a_partial_bundle(cli, repo: Path, where: str) -> None:
    extra = _partial_bundle(cli, repo, repo.parent / "bundle.json" if where == "receipt" else None)
    held = cli("show", "p/1", "--json").json
    (repo / "f").write_text("old\n")
    for args in (
        ["check", "p/1"], ["heartbeat", "p/1"], ["exec", "p/1", "--", "true"],
        ["check", "p/2"], ["heartbeat", "p/2"],
        ["replace-file", str(repo / "f"), "p/1", "--expect-absent"],
    ):  # fmt: skip
        got = cli(*args[:2], *extra, "--json", *args[2:], input="new\n")
        assert got.code == 4, (args, got)
        assert "p/2 was never written" in got.json["error"]["message"], (args, got)
    assert (repo / "f").read_text() == "old\n"
    assert cli("show", "p/1", "--json").json["oid"] == held["oid"], "nothing was renewed"


def test_a_member_left_at_its_older_record_is_never_written_too(cli, repo: Path) -> None:
    """The member's ref still shows what was there before the bundle (a tombstone of an
    earlier claim), as a crash before its ref was committed leaves it."""
    assert cli("acquire", "p/2").code == 0
    older = cli("release", "p/2", "--json").json["oid"]
    assert cli("bundle", "acquire", "p/1", "p/2", "--no-bind").code == 0
    store_git("update-ref", ref_of("p/2"), older, cwd=repo)
    got = cli("bundle", "check", "--json")
    assert got.code == 4 and "p/2 was never written" in got.json["error"]["message"], got
    assert cli("check", "p/1").code == 4


def test_a_partial_bundle_releases_what_it_holds(cli, repo: Path) -> None:
    _partial_bundle(cli, repo)
    got = cli("bundle", "release", "--json")
    assert got.code == 0, got
    assert [c["state"] for c in got.json["claims"]] == ["released", "free"]
    assert "never written" in cli("bundle", "release").out, "text says what was not held"
    assert cli("verify").code == 0, "the receipt is spent: nothing partial any more"
    assert cli("bundle", "acquire", "p/1", "p/2").code == 0


def test_releasing_only_the_unwritten_member_is_lost(cli, repo: Path) -> None:
    receipt = repo.parent / "bundle.json"
    _partial_bundle(cli, repo, receipt)
    got = cli("release", "p/2", "--receipt", str(receipt), "--json")
    assert got.code == 4 and "never written" in got.json["error"]["message"], got
    assert cli("release", "p/1", "--receipt", str(receipt)).code == 0, "the held one: yes"
    assert state(cli, "p/1") == "released"


def test_a_whole_bundle_whose_member_was_released_and_taken_is_not_partial(cli, worktrees) -> None:
    """The documented flow: one member released on its own, then taken by someone else;
    the other member stays the bundle holder's to renew, check and release."""
    a, b = worktrees
    assert cli("bundle", "acquire", "w/1", "w/2", cwd=a).code == 0
    assert cli("release", "w/2", cwd=a).code == 0
    assert cli("acquire", "w/2", cwd=b).code == 0
    assert cli("release", "w/2", cwd=b).code == 0
    assert cli("acquire", "w/2", cwd=b).code == 0  # a later revision: the chain is followed
    for args in (["check", "w/1"], ["heartbeat", "w/1"], ["exec", "w/1", "--", "true"]):
        assert cli(*args, cwd=a).code == 0, args
    assert [p["kind"] for p in cli("verify", "--json", cwd=a).json["problems"]] == []
    assert cli("bundle", "check", cwd=a).code == 4, "the bundle as a whole is not held"
    assert cli("release", "w/1", cwd=a).code == 0


def test_an_expired_bundle_with_a_member_taken_since_is_lost_not_partial(cli, repo: Path) -> None:
    """Every member was written, so the bundle is not partial (that is a crash mid-commit,
    the tests above): it expired, and heartbeat says so."""
    bid = cli("bundle", "acquire", "p/1", "p/2", "--ttl", "1s", "--json").json["bundle_id"]
    time.sleep(1.2)
    other = repo.parent / "other"
    git("worktree", "add", "-q", "-b", "other", str(other), cwd=repo)
    assert cli("acquire", "p/2", cwd=other).code == 0
    report = cli("verify", "--json")
    assert [p for p in report.json["problems"] if p["kind"] == "partial-bundle"] == []
    lost = cli("bundle", "heartbeat", bid, "--json")
    assert lost.code == 4 and "partial" not in lost.json["error"]["message"], lost
    # a partial bundle (a crash mid-commit leaves one member written): the text report
    assert cli("bundle", "acquire", "q/1", "q/2", "--no-bind").code == 0
    store_git("update-ref", "-d", "refs/worklease/q/2.lease", cwd=repo)
    text = cli("verify")
    assert text.code == 7 and "partial-bundle" in text.out, "the report goes to stdout"
    assert text.err == "", "`gitlease verify | less` shows the whole report"


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
    env, calls = counting_git(tmp_path)

    def check_calls() -> int:
        calls.write_text("")
        got = run_cli("check", R, "--receipt", str(receipt), cwd=repo, env=env)
        assert got.code == 0, got
        return counted(calls)  # (the store's location is read by git only when its cache is stale)

    lease.acquire(store, "review/2", bind=False)
    lease.release(store, "review/2")
    few = check_calls()
    for _ in range(20):
        lease.acquire(store, "review/2", bind=False)
        lease.release(store, "review/2")
    assert check_calls() == few
