"""What the resident server keeps warm from one call to the next (docs/design.md, the MCP
server): the stores its commands open (:mod:`gitlease.api.warm`) and the git half of the
commit-hook look that ``acquire`` takes (:mod:`gitlease.hooks.warm`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..api.warm import WarmStores
from ..hooks.warm import WarmHooks

if TYPE_CHECKING:
    from .. import Store
    from ..hooks.install import WorktreeReport


class Warm:
    """What ``gitlease mcp`` hands the CLI (``gitlease.cli.app.resident``): its stores and
    its look at the commit hooks, kept warm; :meth:`release` after each call."""

    def __init__(self) -> None:
        self.stores = WarmStores()
        self.hooks = WarmHooks()

    def open_store(self, store: str | None, remote: str | None) -> Store:
        return self.stores.open_store(store, remote)

    def commit_check(self, cwd: Path | None) -> WorktreeReport | None:
        return self.hooks.commit_check(cwd)

    def release(self) -> None:
        self.stores.release()
