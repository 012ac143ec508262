"""Free text (owner, note, checkpoint): control characters and tokens are refused at input and
never repeated, and what a record written by others holds never writes to a terminal
(docs/reliability.md, "At the edges", items 4 and 5).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from forged import forge, put, text
from observe import CONTROL, receipt_doc, ref_of, refs, state
from terminal import tty_run

R = "edge/1"
NASTY = {"ESC": "\x1b]0;pwned\x07", "CR": "a\rb", "LF": "a\nstate released", "DEL": "a\x7f",
         "C1": "a\x9b2J"}  # fmt: skip


def _refusals(cli, make_args) -> None:
    for name, value in NASTY.items():
        args, env = make_args(value)
        got = cli(*args, "--json", env=env)
        assert got.code == 2, (name, got)
        assert got.json["error"]["code"] == "USAGE"


def test_a_note_with_control_characters_is_refused(cli, repo: Path) -> None:
    _refusals(cli, lambda v: (["acquire", R, "--note", v], None))
    assert refs(repo) == ""


def test_an_owner_with_control_characters_is_refused(cli, repo: Path) -> None:
    _refusals(cli, lambda v: (["acquire", R, "--owner", v], None))
    _refusals(cli, lambda v: (["acquire", R], {"GITLEASE_OWNER": v}))
    assert refs(repo) == ""


def test_a_checkpoint_with_control_characters_is_refused_and_the_claim_kept(cli) -> None:
    doc = cli("acquire", R, "--json").json
    _refusals(cli, lambda v: (["release", R, "--checkpoint", v], None))
    assert cli("show", R, "--json").json["oid"] == doc["oid"], "still held, unchanged"


def test_a_forged_record_cannot_write_to_the_terminal(cli, repo: Path) -> None:
    note = "x\nstate      released\x1b]0;pwned\x07\r"
    put(
        repo,
        ref_of(R),
        forge(R, owner=text("evil\x1b[2J\x9b"), note=text(note), checkpoint=text("c\x1b[8m")),
    )
    shown = cli("show", R)
    assert shown.code == 0 and not CONTROL.search(shown.out), shown
    assert len([line for line in shown.out.splitlines() if line.startswith("state")]) == 1
    for args in (["list"], ["log", R], ["acquire", R], ["acquire", R, "--wait", "1s"]):
        got = cli(*args)
        assert not CONTROL.search(got.out + got.err), (args, got)
        assert len(got.err.splitlines()) <= 1, (args, got)
    assert cli("show", R, "--json").json["note"] == note, "JSON carries the exact value"


def test_the_wait_status_line_escapes_the_holders_owner(repo: Path) -> None:

    put(repo, ref_of(R), forge(R, owner=text("evil\x1b]0;pwned\x07\x1b[2J")))
    out = tty_run(["acquire", R, "--wait", "1s"], repo, {})
    assert "waiting for" in out
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x07" not in out


def _a_token(cli) -> str:
    doc = cli("acquire", "edge/token-source", "--no-bind", "--json").json
    return receipt_doc(Path(doc["receipt"]))["token"]


def test_a_token_in_a_note_owner_or_checkpoint_is_refused_and_never_shown(cli, repo: Path) -> None:
    token = _a_token(cli)
    held = cli("acquire", R, "--json").json
    outputs = []
    for args, env in (
        (["acquire", "edge/2", "--note", f"my token is {token}"], None),
        (["acquire", "edge/2", "--owner", token], None),
        (["acquire", "edge/2"], {"GITLEASE_OWNER": token}),
        (["release", R, "--checkpoint", f"see {token}"], None),
        (["acquire", "edge/2", "--note", token[:24]], None),  # part of a token is a leak too
    ):
        for json_ in ([], ["--json"]):
            got = cli(*args, *json_, env=env)
            assert got.code == 2, (args, got)
            outputs += [got.out, got.err]
    assert not any(token[4:20] in o for o in outputs), "the refusal never repeats the text"
    assert state(cli, "edge/2") == "free"
    assert cli("show", R, "--json").json["oid"] == held["oid"]
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True
    ).stdout
    assert token.encode() not in objects and token[:24].encode() not in objects
