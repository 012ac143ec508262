"""Test-only switches, honoured only inside gitlease's own tests.

gitlease's tests play a second host on one machine (another boot id, a boot
clock set far off) and break compare-and-swap on purpose to show that the
history checker catches it. Each of those is a ``GITLEASE_TESTING_*`` variable,
and each would be dangerous anywhere else: a boot offset makes a one-second
claim live for years, a foreign boot id shows every live claim expired.

So a switch counts only when a second, explicit variable says that this is a
gitlease test (:data:`GATE` set to :data:`GATE_VALUE`); otherwise it is
ignored. Whenever the gate is set, every command says so on stderr
(:func:`warnings`), so that a switch never changes a decision silently.

No pygit2, click or cryptography here: the commit hook's path imports it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: The explicit switch that lets the ``GITLEASE_TESTING_*`` variables count.
GATE = "GITLEASE_TESTING"
GATE_VALUE = "yes-i-am-a-gitlease-test"
#: Every test-only variable starts with this.
PREFIX = "GITLEASE_TESTING_"


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the test switches count in ``environ`` (default: this process's)."""
    env = os.environ if environ is None else environ
    return env.get(GATE) == GATE_VALUE


def switch(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of the test-only variable ``name``, or None when it does not count."""
    env = os.environ if environ is None else environ
    return env.get(name) if enabled(env) else None


def set_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """The test-only variables set in ``environ``, sorted."""
    env = os.environ if environ is None else environ
    return sorted(k for k in env if k.startswith(PREFIX))


def warnings(environ: Mapping[str, str] | None = None) -> list[str]:
    """What a command says on stderr about the test switches (nothing when none is set)."""
    env = os.environ if environ is None else environ
    names = set_names(env)
    if enabled(env):
        what = f"in force: {', '.join(names)}" if names else "none set"
        return [
            f"gitlease: WARNING: {GATE} is set: test-only switches count ({what}). "
            "Never set it outside gitlease's own tests"
        ]
    if env.get(GATE) is not None:
        return [f"gitlease: WARNING: {GATE} has an unknown value: test-only switches are ignored"]
    if names:
        return [f"gitlease: WARNING: ignoring the test-only {', '.join(names)} (not a test)"]
    return []


#: Test-only: the name of a pause point (:func:`pause`) at which a command stops.
PAUSE = "GITLEASE_TESTING_PAUSE"
#: Test-only: the directory where a paused command says so and waits to go on.
PAUSE_DIR = "GITLEASE_TESTING_PAUSE_DIR"
#: How long a paused command waits for its go file before it goes on regardless.
_PAUSE_LIMIT_SECONDS = 300.0


def pause(point: str, environ: Mapping[str, str] | None = None) -> None:
    """At the pause point ``point``, when the tests asked for it: write
    ``<PAUSE_DIR>/<point>.paused`` (holding this pid), then wait for ``<point>.go``.

    This lets a test stop a real process at an exact moment (after a snapshot, after a
    write) and act meanwhile (take a claim, send a signal) without any wall-clock margin.
    Outside a test (the gate unset) it does nothing.
    """
    env = os.environ if environ is None else environ
    if switch(PAUSE, env) != point or not switch(PAUSE_DIR, env):
        return
    import time  # (only on this test-only path)

    directory = env[PAUSE_DIR]
    go = os.path.join(directory, f"{point}.go")
    tmp = os.path.join(directory, f".{point}.paused.{os.getpid()}")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(tmp, os.path.join(directory, f"{point}.paused"))
    deadline = time.monotonic() + _PAUSE_LIMIT_SECONDS
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.01)
