"""``gitlease key`` and ``--key`` end to end: keys compose with ``free`` and ``acquire``, bad
references write nothing, and a provider from an entry point works like a built-in one.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import store_git

R = "github/acme/api/42"


def test_keys_compose_with_free_and_acquire(cli, repo: Path) -> None:
    keys = cli("key", "github", "acme/api#42", "https://github.com/ACME/API/pull/42", "--json")
    assert {k["resource"] for k in keys.json["keys"]} == {R}
    assert cli("acquire", "--key", "github", "https://github.com/acme/api/issues/42").code == 0
    listed = cli("key", "beads", "-", input="bd-a1\nbd-b2\n\nbd-c3\n").out
    assert listed.split() == ["beads/bd-a1", "beads/bd-b2", "beads/bd-c3"]
    assert cli("acquire", "beads/bd-b2").code == 0
    free = cli("free", "-", input=listed).out.split()
    assert free == ["beads/bd-a1", "beads/bd-c3"]
    bad = cli("key", "github", "not a reference", "--json")
    assert bad.code == 2 and "accepts" in bad.json["error"]["message"]
    before = store_git("for-each-ref", "refs/worklease/", cwd=repo).stdout
    for provider in ("github", "gitlab", "jira", "linear", "beads", "taskmaster", "path"):
        refused = cli("acquire", "--key", provider, "../../outside?#", "--json")
        assert refused.code == 2, (provider, refused)
    assert store_git("for-each-ref", "refs/worklease/", cwd=repo).stdout == before, (
        "nothing written"
    )
    assert cli("key", "taskmaster", "3.2", "--tag", "feature").out.strip() == (
        "taskmaster/feature/3.2"
    )
    assert cli("show", "--key", "github", "acme/api#42", "--json").json["state"] == "active"


def test_entry_point_provider_end_to_end(cli, repo: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "gl_tickets-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "gl_tickets.py").write_text(
        textwrap.dedent("""
        def key(item, *, options, cwd):
            if not item.startswith("T-"):
                raise ValueError("not a ticket")
            return "tickets/" + item[2:]
    """)
    )
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gl_tickets\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[gitlease.providers]\ntickets = gl_tickets:key\n")
    env = {"PYTHONPATH": str(site)}
    assert cli("key", "tickets", "T-9", env=env).out.strip() == "tickets/9"
    assert cli("acquire", "--key", "tickets", "T-9", env=env).code == 0
    assert cli("key", "tickets", "X-9", env=env).code == 2
