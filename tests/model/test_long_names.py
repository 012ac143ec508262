"""Resource names up to 512 bytes are acquirable (a long escaped ref is written compact), longer
ones are USAGE, never STORE, and a corrupt record's message names its resource once
(docs/reference/store.md, ref names).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from forged import forge, put, text
from observe import ref_of, refs


@pytest.mark.parametrize(
    "resource",
    ["L" * 512, "é" * 256, "\U0001f600" * 128, "A/" * 255 + "A", "Jira/" + "ABC-" * 126 + "1"],
    ids=["upper-case", "accented", "emoji", "many-segments", "mixed"],
)
def test_every_resource_within_512_bytes_is_acquirable(cli, resource: str) -> None:
    assert len(resource.encode()) <= 512
    got = cli("acquire", "--no-bind", "--json", "--", resource)
    assert got.code == 0, got
    assert got.json["resource"] == resource
    assert [c["resource"] for c in cli("list", "--json").json["claims"]] == [resource]
    assert cli("heartbeat", "--", resource).code == 0
    assert cli("release", "--", resource).code == 0
    assert cli("verify").code == 0


@pytest.mark.parametrize("resource", ["L" * 513, "é" * 257, "\U0001f600" * 128 + "x"])
def test_a_resource_over_512_bytes_is_usage_never_store(cli, repo: Path, resource: str) -> None:
    got = cli("acquire", "--json", "--", resource)
    assert got.code == 2 and got.json["error"]["code"] == "USAGE", got
    assert refs(repo) == ""


def test_a_corrupt_record_is_reported_with_its_name_once(cli, repo: Path) -> None:
    resource = "long/" + "/".join(["n" * 90] * 3)
    tampered = forge(resource, owner=text("a")).replace(b'owner "a"', b'owner "b"')
    put(repo, ref_of(resource), tampered)
    got = cli("acquire", resource)
    assert got.code == 7, got
    assert got.err.count(resource) == 1, got.err
