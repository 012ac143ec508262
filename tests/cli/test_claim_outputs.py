"""Every output says what the claim is: ``--coordination-only`` stated by every command (text
and JSON), nothing of it for a guarded claim; ``bound`` looked up truly, ``null`` where a
command does not look; ``exec --json`` prints one document, the command's stdout on stderr
(docs/reliability.md, "At the edges", item 12).
"""

from __future__ import annotations

import json
import shlex

from conftest import wait_state

R = "edge/1"


def test_coordination_only_is_stated_by_heartbeat_check_and_release(cli) -> None:
    assert cli("acquire", R, "--coordination-only").code == 0
    for args in (["heartbeat", R], ["check", R], ["release", R]):
        got = cli(*args)
        assert got.code == 0 and "coordination only" in got.out, (args, got)


def test_coordination_only_is_stated_by_exec(cli) -> None:
    got = cli("exec", R, "--coordination-only", "--", "true")
    assert got.code == 0 and "coordination only" in got.out + got.err, got


def test_coordination_only_is_stated_by_bundle_commands(cli) -> None:
    for args in (
        ["bundle", "acquire", "b/1", "b/2", "--coordination-only"],
        ["bundle", "heartbeat"],
        ["bundle", "check"],
        ["bundle", "release"],
    ):
        got = cli(*args)
        assert got.code == 0 and "coordination only" in got.out, (args, got)


def test_coordination_only_is_stated_in_json_by_every_command(cli) -> None:
    sentence = cli("acquire", R, "--coordination-only", "--json").json["guarantee"]
    assert sentence.startswith("coordination only")
    for args in (["heartbeat", R], ["check", R], ["release", R]):
        doc = cli(*args, "--json").json
        assert (doc["mode"], doc["guarantee"]) == ("coordination-only", sentence), (args, doc)
    done = cli("exec", "edge/x", "--coordination-only", "--json", "--", "true").json
    assert done["claim"]["guarantee"] == sentence
    docs = cli("bundle", "acquire", "b/1", "b/2", "--coordination-only", "--json").json
    assert {c["guarantee"] for c in docs["claims"]} == {sentence}


def test_a_guarded_claim_says_nothing_about_coordination(cli) -> None:
    for args in (["acquire", R], ["heartbeat", R], ["check", R], ["exec", R, "--", "true"],
                 ["release", R]):  # fmt: skip
        got = cli(*args)
        assert got.code == 0 and "coordination" not in got.out + got.err, (args, got)


def test_check_json_says_a_bound_claim_is_bound(cli) -> None:
    assert cli("acquire", R, "--json").json["bound"] is True
    assert cli("show", R, "--json").json["bound"] is True
    assert cli("check", R, "--json").json["bound"] is True


def test_every_command_that_looks_says_bound_truly_and_the_others_say_null(cli) -> None:
    assert cli("acquire", R, "--json").json["bound"] is True
    assert cli("heartbeat", R, "--json").json["bound"] is True
    assert cli("acquire", "edge/2", "--no-bind", "--json").json["bound"] is False
    assert cli("check", "edge/2", "--json").json["bound"] is False
    assert [c["bound"] for c in cli("list", "--json").json["claims"]] == [True, False]
    bundle = cli("bundle", "acquire", "b/1", "b/2", "--json").json
    assert [c["bound"] for c in bundle["claims"]] == [True, True]
    assert [c["bound"] for c in cli("bundle", "check", "--json").json["claims"]] == [True, True]
    assert cli("release", R, "--json").json["bound"] is False, "release unbinds"
    assert {c["bound"] for c in cli("log", R, "--json").json["records"]} == {None}, "not looked"
    held = cli("acquire", "edge/2", "--json").json["error"]["claim"]
    assert held["bound"] is None, "an error's claim: not looked"


def test_exec_json_sends_the_commands_stdout_to_stderr(cli) -> None:
    got = cli("exec", R, "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert got.code == 3, got
    doc = json.loads(got.out)
    assert doc["exit"] == 3 and doc["claim"]["state"] == "released", "exec acquired it"
    assert got.err.split() == ["out", "err"], got
    assert cli("acquire", R).code == 0
    kept = cli("exec", R, "--json", "--", "true")
    assert kept.code == 0 and kept.json["claim"]["state"] == "active", "the caller's own"
    assert kept.json["claim"]["bound"] is True
    lost = cli("exec", "edge/2", "--json", "--", "true", env={"GITLEASE_TESTING_X": "1"})
    assert lost.code == 0 and json.loads(lost.out)["exit"] == 0, "a warning stays on stderr"


def test_exec_json_prints_one_json_document(cli) -> None:
    got = cli("exec", R, "--json", "--", "true")
    assert got.code == 0, got
    json.loads(got.out)


def test_a_release_after_expiry_says_how_the_worktree_gets_unbound(cli) -> None:
    """The worktree stays bound to the lost claim (its commits stay refused: the work may have
    gone on past the claim's end); the answer says so and names the way out."""
    assert cli("acquire", R, "--ttl", "1s").code == 0
    wait_state(cli, R, "expired")
    got = cli("release", R, "--json")
    assert got.code == 4 and got.json["error"]["code"] == "LOST", got
    message = got.json["error"]["message"]
    assert "stays bound" in message and f"`gitlease unbind {R}`" in message, message
    assert cli("show", R, "--json").json["bound"] is True


def test_the_unbind_a_lost_release_names_runs_as_given(cli) -> None:
    spaced = "my task"
    assert cli("acquire", spaced, "--ttl", "1s").code == 0
    wait_state(cli, spaced, "expired")
    message = cli("release", spaced, "--json").json["error"]["message"]
    command = message.split("`gitlease unbind ", 1)[1].split("`", 1)[0]
    assert command == "'my task'", message
    assert cli("unbind", *shlex.split(command)).code == 0
