"""The object id shortcut (docs/design.md): a worktree's binding names the record it wrote, so
the commit check and ``check`` of our own record need no cryptography; the shortcut is not
taken where it must not be (no binding, a binding others could write, a replaced or forged
record, an untrusted receipt, a receipt whose token was replaced). Counting, never timing:
which modules a process imported.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import store_path
from probes import probe, receipt_of, replace_object

R = "github/acme/api/20"


def binding_of(repo: Path, resource: str = R) -> Path:
    from gitlease.model.refname import encode
    from gitlease.receipts.receipt import resource_key

    return repo / ".git" / "worklease" / "bindings" / f"{resource_key(encode(resource))}.json"


def oid_of(repo: Path, resource: str = R) -> str | None:
    return json.loads(binding_of(repo, resource).read_text()).get("oid")


def test_the_commit_check_of_our_own_record_needs_no_cryptography(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    assert oid_of(repo) == doc["oid"], "the binding names the record that landed"
    assert "oid" not in receipt_of(doc).read_text(), "(the receipt's format is unchanged)"
    got = probe(repo, "hook")
    assert got == {"problems": [], "crypto": []}, got
    assert cli("heartbeat", R).code == 0
    now = cli("show", R, "--json").json["oid"]
    assert oid_of(repo) == now != doc["oid"], "a heartbeat records its record too"
    assert probe(repo, "hook") == {"problems": [], "crypto": []}


def test_check_of_our_own_record_needs_no_cryptography(cli, repo: Path) -> None:
    assert cli("acquire", R, "--ttl", "5m").code == 0
    got = probe(repo, "cli", "check", R)
    assert got == {"code": 0, "crypto": []}, got
    assert cli("heartbeat", R).code == 0
    assert probe(repo, "cli", "check", R) == {"code": 0, "crypto": []}


def test_check_without_a_resource_takes_the_shortcut_too(cli, repo: Path) -> None:
    """``gitlease check`` alone (the one receipt here) and ``--receipt`` name the same claim
    as ``check R``: the binding's id serves them too."""
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    assert probe(repo, "cli", "check") == {"code": 0, "crypto": []}
    explicit = probe(repo, "cli", "check", "--receipt", str(receipt_of(doc)))
    assert explicit == {"code": 0, "crypto": []}


def test_without_a_binding_check_verifies(cli, repo: Path) -> None:
    assert cli("acquire", R, "--ttl", "5m", "--no-bind").code == 0
    got = probe(repo, "cli", "check", R)
    assert got["code"] == 0 and got["crypto"], got


def test_a_binding_others_could_write_is_not_believed(cli, repo: Path) -> None:
    assert cli("acquire", R, "--ttl", "5m").code == 0
    binding_of(repo).chmod(0o666)
    got = probe(repo, "hook")
    assert got["problems"] == [] and got["crypto"], "the id is ignored; the record verified"
    binding_of(repo).chmod(0o600)
    binding_of(repo).parent.chmod(0o777)
    got = probe(repo, "hook")
    assert got["problems"] == [] and got["crypto"], got


def test_a_replaced_record_is_still_lost_and_checked(cli, repo: Path, tmp_path: Path) -> None:
    cli("acquire", R, "--ttl", "1s")
    time.sleep(1.3)
    other = tmp_path / "other.json"
    assert cli("acquire", R, "--ttl", "5m", "--receipt", str(other), "--no-bind").code == 0
    got = probe(repo, "hook")
    assert got["crypto"], "another's record is verified, not taken as ours"
    assert len(got["problems"]) == 1 and "replaced" in got["problems"][0], got
    got = probe(repo, "cli", "check", R)
    assert got["code"] == 4 and got["crypto"], got


def _forged(doc: dict) -> bytes:
    """A record of our claim (same claim id, revision), self-signed by another key, good
    for an hour: what someone who can write the store, but has not our token, can make."""
    from gitlease.model.record import SigningKey, new_token, parse

    raw = subprocess.run(
        ["git", "--git-dir", doc["store"], "cat-file", "blob", doc["oid"]],
        capture_output=True,
        check=True,
    ).stdout
    mine = parse(raw)
    key = SigningKey(new_token())
    forged = mine.evolve(
        public_key=key.public_hex, boot_expires_ms=mine.boot_expires_ms + 3_600_000
    )
    return forged.signed(key).raw or b""


def test_a_forged_record_under_our_object_id_is_refused(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    doc["store"] = str(store_path(repo))
    replace_object(Path(doc["store"]), doc["oid"], _forged(doc))
    assert cli("show", R, "--json").json["oid"] == doc["oid"], "git still names our object id"
    got = probe(repo, "hook")
    assert got["crypto"], "bytes that do not hash to the id are verified"
    assert len(got["problems"]) == 1 and "forged" in got["problems"][0], got
    got = probe(repo, "cli", "check", R)
    assert got["code"] == 4, got


def test_an_untrusted_receipt_still_fails_the_commit_check(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    receipt_of(doc).chmod(0o644)
    got = probe(repo, "hook")
    assert len(got["problems"]) == 1 and "not trusted" in got["problems"][0], got
    assert probe(repo, "cli", "check", R)["code"] == 4


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


def _replace_token(receipt: Path) -> None:
    from gitlease.model.record import new_token

    text = receipt.read_text()
    receipt.write_text(text.replace(json.loads(text)["token"], new_token()))


@pytest.mark.parametrize(
    "args",
    [
        ["check", R],
        ["check"],
        ["check", "--receipt", "RECEIPT"],
        ["replace-file", "TARGET", R, "--expect-absent", "--from", "SOURCE"],
        [
            "replace-file",
            "TARGET",
            R,
            "--expect-absent",
            "--from",
            "SOURCE",
            "--receipt",
            "RECEIPT",
        ],
        ["bind", R, "--receipt", "RECEIPT"],
    ],
    ids=["check R", "check", "check --receipt", "replace-file", "replace-file --receipt", "bind"],
)
def test_a_replaced_token_is_lost_for_the_reads_too(cli, repo: Path, args: list[str]) -> None:
    """The binding's object id names the record, not who may act on it: a receipt whose token
    was replaced is LOST for `check`, `replace-file` and `bind` as for `heartbeat` (the
    shortcut was taken for them, and `check` said the claim was held while `heartbeat` said
    LOST). The binding keeps a one-way digest of the token that wrote it, never the token."""
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    receipt = receipt_of(doc)
    token = json.loads(receipt.read_text())["token"]
    assert token not in binding_of(repo).read_text(), "no token in the binding"
    _replace_token(receipt)
    target, source = repo / "target.txt", repo / "source.txt"
    source.write_text("new\n")
    names = {"RECEIPT": str(receipt), "TARGET": str(target), "SOURCE": str(source)}
    got = cli(*[names.get(a, a) for a in args], "--json")
    assert got.code == 4, got
    assert not target.exists(), "nothing replaced"
    assert cli("heartbeat", R).code == 4, "(as a write says)"


def test_the_commit_hook_refuses_a_receipt_whose_token_was_replaced(cli, repo: Path) -> None:
    """The hooks judge the bound claim through its receipt: one whose token no longer signs the
    record is LOST there as for `check` (the binding's id is not taken for it)."""
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    _replace_token(receipt_of(doc))
    assert cli("check", R).code == 4
    got = probe(repo, "hook")
    assert got["problems"], got


def test_a_binding_without_a_token_digest_is_checked_in_full(cli, repo: Path) -> None:
    """A binding written before the digest existed: the hook and `check` verify in full; the
    next heartbeat adds the digest, and the shortcut serves again."""
    cli("acquire", R, "--ttl", "5m", "--json")
    doc = json.loads(binding_of(repo).read_text())
    del doc["token_digest"]
    binding_of(repo).write_text(json.dumps(doc))
    got = probe(repo, "cli", "check", R)
    assert got["code"] == 0 and got["crypto"], got
    got = probe(repo, "hook")
    assert got["problems"] == [] and got["crypto"], got
    assert cli("heartbeat", R).code == 0
    assert "token_digest" in json.loads(binding_of(repo).read_text())
    assert probe(repo, "hook") == {"problems": [], "crypto": []}
    assert probe(repo, "cli", "check", R) == {"code": 0, "crypto": []}
