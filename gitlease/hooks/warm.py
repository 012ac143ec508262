"""The git half of ``acquire``'s look at the commit hooks (which folder git runs them from),
kept warm in a resident process while the git configuration that chose it is unchanged
(:mod:`gitlease.api.warm` watches it): a command line asks four git processes every run.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..api.warm import Kept, Stamp, Watch, config_files, where_now
from ..errors import UsageError
from . import dirs as hookdirs
from . import install as githooks


class WarmHooks:
    """The git half of ``acquire``'s look at the commit hooks (which folder git runs them
    from: ``core.hooksPath``, the repository's common dir), kept while the configuration
    is unchanged; what the folder holds is looked at on every call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[Stamp, Kept] = {}
        #: How many times git was asked (a test counts them).
        self.looked = 0

    def commit_check(self, cwd: Path | None) -> githooks.WorktreeReport | None:
        """:func:`gitlease.hooks.install.commit_check` for ``cwd``."""
        now, git_dir = where_now()
        key = (str(cwd), now)
        with self._lock:
            entry = self._kept.get(key)
        if entry is not None and entry.watch.holds():
            repo, loc = entry.value
            return githooks.assess(repo, loc)
        with self._lock:
            self.looked += 1
        seen = Watch(config_files(git_dir))  # (before git is asked)
        try:
            repo = hookdirs.repository(cwd)
        except UsageError:
            return None
        if repo.current is None:
            return None
        loc = hookdirs.location(repo, repo.current)
        watch = Watch(config_files(git_dir))
        # (a folder inside a worktree depends on its ignore files and on the worktrees there
        # are: it is looked up afresh every time)
        if (
            loc.checkout is None
            and _inside(loc.path, repo.common_dir)
            and watch.agrees(seen)  # (nothing changed while git was asked)
            and watch.watchable([git_dir])
        ):
            with self._lock:
                self._kept = {key: Kept(key, watch, (repo, loc))}
        return githooks.assess(repo, loc)


def _inside(path: Path, top: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(top))
