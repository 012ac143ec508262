"""``python -m gitlease.hookcheck HOOK [ARGS]``: the commit check's stable entry point.

Installed git hooks (0.2.0's among them) and hook managers' configurations call this path, so
it stays; the check itself lives in :mod:`gitlease.hooks.check`.
"""

from __future__ import annotations

import sys

from .hooks.check import main, problems, run

__all__ = ["main", "problems", "run"]

if __name__ == "__main__":
    sys.exit(main())
