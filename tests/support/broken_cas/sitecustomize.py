"""The deliberately broken build of gitlease, for the history tests only.

Put on ``PYTHONPATH`` (``conftest.BREAK_CAS``), this module is loaded by Python at start-up
(:mod:`site` imports ``sitecustomize``) and replaces the stores' compare-and-swap with a
read-then-write that takes no guard and no ref lock, and the remote's leased push with a
forced one, so that racers can slip in between. tests/system/test_history.py runs it to show that
the history checker catches what such a build lets through. Nothing of this ships: the
package's write path has no switch to break it (docs/design.md, the map).

Processes that gitlease starts (the automatic prune, ``exec``'s command) run the real build:
this folder is taken off ``PYTHONPATH`` before anything else runs.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if p and os.path.abspath(p) != _HERE
)

from gitlease.errors import CompareAndSwapFailed  # noqa: E402
from gitlease.store import base, local, remote  # noqa: E402
from gitlease.store.settle import Push  # noqa: E402

sys.stderr.write("gitlease: WARNING: the broken test build is loaded: NO LOCKING\n")


@contextmanager
def _no_guard(self: Any, ref: str, *, wait: float = 0.0, owned: bool = False) -> Iterator[int]:
    yield -1


def _unlocked_compare_and_swap_many(
    self: Any, updates: list[tuple[str, str | None, bytes]], message: str
) -> list[str]:
    """Compare, then set without the lock: a racer can write in between. (Whichever writer
    the store has, libgit2's or ``git update-ref``'s: this one sets the refs by force.)"""
    import pygit2

    writer = self.writer
    repo = pygit2.Repository(str(self.git_dir))
    new_oids = [writer.write_blob(data) for _, _, data in updates]
    ordered = sorted(zip(updates, new_oids, strict=True), key=lambda item: item[0][0])
    for (ref, _, _), _ in ordered:
        writer.ensure_reflog(ref)
    for (ref, expected, _), _ in ordered:
        if self.read(ref).oid != expected:
            raise CompareAndSwapFailed(f"{ref} changed")
    time.sleep(0.01)  # widen the window a racer needs
    for (ref, _, _), new_oid in ordered:
        repo.references.create(ref, new_oid, force=True)
    return new_oids


def _forced_push(
    self: Any, updates: list[tuple[str, str | None, bytes]], message: str
) -> list[str]:
    """One forced push: no lease at all."""
    planned = [(ref, expected, self.write_blob(data)) for ref, expected, data in updates]
    args = ["push", "--atomic", "--porcelain", "--no-verify", "--no-recurse-submodules"]
    args.append(self.remote)
    args += [f"+{new}:{ref}" for ref, _, new in planned]
    Push(self.link, self.mirror, planned).run(args)
    self.follow(planned, message)
    return [new for _, _, new in planned]


base.Store.guard = _no_guard  # type: ignore[method-assign,assignment]
local.LocalStore.compare_and_swap_many = _unlocked_compare_and_swap_many  # type: ignore[method-assign]
remote.RemoteStore.compare_and_swap_many = _forced_push  # type: ignore[method-assign]
