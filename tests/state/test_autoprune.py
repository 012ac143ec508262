"""When a write starts the daily retention pass (gitlease/state/autoprune.py): a process that
stays up (the library, the MCP server) asks on every write, and looks at the stamp again only
a minute after it found the pass not due; a new stamp is still seen within that minute's end.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gitlease.state import autoprune

DAY = 86_400


def test_a_process_looks_at_the_daily_stamp_again_a_minute_after_it_was_not_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_dir = tmp_path / "store.git"
    (git_dir / "worklease").mkdir(parents=True)
    stamp = git_dir / "worklease" / "last-prune"
    started: list[Path] = []
    monkeypatch.setattr(autoprune, "_spawn", lambda g, remote: started.append(g))
    autoprune.start_if_due(git_dir, None)
    assert stamp.exists() and not started, "a new store: the first pass is due in a day"
    autoprune.start_if_due(git_dir, None)  # not due: remembered for a minute
    two_days_ago = time.time() - 2 * DAY
    os.utime(stamp, (two_days_ago, two_days_ago))
    autoprune.start_if_due(git_dir, None)
    assert not started, "within the minute the stamp is not looked at again"
    later = time.monotonic() + autoprune.LOOK_AGAIN_SECONDS
    monkeypatch.setattr(autoprune.time, "monotonic", lambda: later)
    autoprune.start_if_due(git_dir, None)
    assert started == [git_dir], "a minute on, the pass that became due starts"
    assert time.time() - stamp.stat().st_mtime < 60, "and the stamp starts the next day"
