"""``prune --older-than`` removes only tombstones old enough, keeps active claims, and revisions
keep increasing after it.
"""

from __future__ import annotations

import time
from pathlib import Path

R = "github/acme/api/42"


def test_prune_keeps_revisions_increasing(cli, repo: Path) -> None:
    for _ in range(3):
        cli("acquire", R)
        cli("release", R)
    cli("acquire", "keep/1")
    assert cli("prune", "--older-than", "1h", "--json").json["pruned"] == []
    time.sleep(1.1)
    assert cli("prune", "--older-than", "1s", "--json").json["pruned"] == [R]
    assert cli("show", R, "--json").json["state"] == "free"
    assert cli("show", "keep/1", "--json").json["state"] == "active", "active claims stay"
    assert cli("acquire", R, "--json").json["revision"] == 4
