"""Hermetic git for every test: an isolated HOME, no system or global git config.

The environment is set when this module is imported, before anything loads
pygit2 (libgit2 reads HOME once), and every subprocess inherits it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import hypothesis
import pytest

T = TypeVar("T")

# Hypothesis times each example (a 200 ms deadline, a "too slow" health check): on a loaded
# machine (CI's) both fail for nothing the code did. Counts of examples stay as each test says.
hypothesis.settings.register_profile(
    "gitlease", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("gitlease")

_HOME = Path(tempfile.mkdtemp(prefix="gitlease-test-home-"))
(_HOME / ".gitconfig").write_text(
    "[user]\n\tname = Test Agent\n\temail = agent@example.invalid\n"
    "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
)
for _name in list(os.environ):
    if _name.startswith(("GITLEASE_", "GIT_")) or _name in ("NO_COLOR",):
        del os.environ[_name]
(_HOME / "run").mkdir(mode=0o700)  # this session's keepers listen here, never the user's
os.environ.update(
    XDG_RUNTIME_DIR=str(_HOME / "run"),
    HOME=str(_HOME),
    XDG_STATE_HOME=str(_HOME / "state"),
    XDG_CONFIG_HOME=str(_HOME / "config"),
    GIT_CONFIG_NOSYSTEM="1",
    GIT_CONFIG_GLOBAL=str(_HOME / ".gitconfig"),
    GIT_TERMINAL_PROMPT="0",
    GITLEASE_OWNER="test-agent",
    LC_ALL="C.UTF-8",
)

ROOT = Path(__file__).resolve().parent.parent
#: What the tests use and are not tests (tests/README.md): on ``sys.path`` (pyproject.toml).
SUPPORT = ROOT / "tests" / "support"
#: The explicit switch without which gitlease ignores its test-only ``GITLEASE_TESTING_*``
#: variables (gitlease/_testing.py): set with them wherever a test uses them.
TESTING = {"GITLEASE_TESTING": "yes-i-am-a-gitlease-test"}
#: The deliberately broken build (no locking around compare-and-swap), for the history tests:
#: tests/support/broken_cas/sitecustomize.py, loaded through PYTHONPATH. Nothing of it ships.
BREAK_CAS = {"PYTHONPATH": str(SUPPORT / "broken_cas")}


def _build_wall_clock_shim() -> Path | None:
    """``tests/support/wallclock.c`` built once per session: an LD_PRELOAD that moves the wall
    clock and nothing else (why not libfaketime: see the file)."""
    out = _HOME / "libwallclock.so"
    try:
        built = subprocess.run(
            ["cc", "-shared", "-fPIC", "-O2", "-o", str(out), str(SUPPORT / "wallclock.c"),
             "-ldl"],
            capture_output=True,
        )  # fmt: skip
    except OSError:
        return None
    return out if built.returncode == 0 else None


WALL_CLOCK_SHIM = _build_wall_clock_shim()
if WALL_CLOCK_SHIM is None and os.environ.get("GITLEASE_REQUIRE_TOOLS") == "1":
    raise RuntimeError("GITLEASE_REQUIRE_TOOLS=1 (CI): tests/support/wallclock.c would not build")
NEEDS_SHIM = pytest.mark.skipif(
    WALL_CLOCK_SHIM is None, reason="tests/support/wallclock.c needs a C compiler (cc): none found"
)


def wall_clock_moved(seconds: int) -> dict[str, str]:
    """Environment for a process whose wall clock reads ``seconds`` off; its boot clock does not."""
    return {"LD_PRELOAD": str(WALL_CLOCK_SHIM), "WALLCLOCK_OFFSET_SECONDS": str(seconds)}


def clock_ahead(seconds: float, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: none) for a gitlease process whose boot clock, the one that judges
    expiry and times sightings, reads ``seconds`` later than that environment's: what a
    command will decide then, asked now. For a TTL that must have run out, instead of a sleep
    that a loaded machine stretches; only what that process writes is stamped on the moved
    clock. Through the test switch ``GITLEASE_TESTING_BOOT_OFFSET_MS`` (it adds to the one
    ``env`` has, as host B's in tests/hosts.py)."""
    env = dict(env or {})
    offset = int(env.get("GITLEASE_TESTING_BOOT_OFFSET_MS", "0")) + round(seconds * 1000)
    return {**env, **TESTING, "GITLEASE_TESTING_BOOT_OFFSET_MS": str(offset)}


def git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, text=True, capture_output=True, check=check)


def store_path(cwd: Path) -> Path:
    """The git dir of the store gitlease uses from ``cwd`` (made if it does not exist yet).

    In a repository that is the project's shared store under the per-user state directory,
    not the repository's own ``.git`` (docs/reference/store.md).
    """
    from gitlease.store.location import ensure_exists, locate

    location = locate(cwd=cwd)
    ensure_exists(location)
    return location.git_dir


def store_git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``git`` run on the store that gitlease uses from ``cwd``, as a person would inspect it."""
    return git(f"--git-dir={store_path(cwd)}", *args, cwd=cwd, check=check)


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", str(path), cwd=path.parent)
    (path / "README").write_text("backlog\n")
    git("add", "README", cwd=path)
    git("commit", "-qm", "initial", cwd=path)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def worktrees(repo: Path) -> tuple[Path, Path]:
    """Two linked worktrees of one repository (they share one store)."""
    a, b = repo.parent / "wt-a", repo.parent / "wt-b"
    git("worktree", "add", "-q", "-b", "agent-a", str(a), cwd=repo)
    git("worktree", "add", "-q", "-b", "agent-b", str(b), cwd=repo)
    return a, b


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def json(self):
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out[:500]!r}, err={self.err[:500]!r})"


def run_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float = 60,
) -> Result:
    """Run the real CLI in a subprocess, as an agent would."""
    proc = subprocess.run(
        [sys.executable, "-m", "gitlease", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
        input=input,
        timeout=timeout,
    )
    return Result(proc)


@pytest.fixture
def cli(repo: Path):
    """``cli("acquire", "x", cwd=...)``: the CLI in a subprocess, cwd defaulting to the repo."""

    def call(*args: str, cwd: Path | None = None, **kw) -> Result:
        return run_cli(*args, cwd=cwd or repo, **kw)

    return call


@pytest.fixture
def store(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The library's store for ``repo``, with the working directory inside it."""
    from gitlease.store.location import open_store

    monkeypatch.chdir(repo)
    yield open_store()


def wait_for(
    predicate: Callable[[], T | None], timeout: float = 60, what: str = "", every: float = 0.05
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    For a test that waits on an event (a file appearing, a state reported, a process gone)
    rather than on a wall-clock margin: ``timeout`` is generous (tens of seconds) and is never
    reached on a healthy run, however loaded the machine; reaching it fails the test.
    ``every``: the pause between looks (a look that runs a command costs a process start:
    those look less often, see :data:`CLI_POLL`).
    """
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what or predicate!r}: never happened")
        time.sleep(every)


#: The pause between two looks that each run the CLI (a Python process start, some 70 ms of
#: CPU): polled every 50 ms, a wait of a TTL kept more than half a core busy on a shared one.
CLI_POLL = 0.25


def wait_state(cli: Callable[..., Result], resource: str, state: str, timeout: float = 60,
               **kw: object) -> dict:  # fmt: skip
    """Poll ``gitlease show RESOURCE --json`` (through ``cli``, with ``kw``) until the claim is
    in ``state`` (``active``, ``expired``, ``released``, ...); the document shown then."""

    def shown() -> dict | None:
        got = cli("show", resource, "--json", **kw)
        doc = got.json if got.code == 0 else None
        return doc if doc and doc.get("state") == state else None

    return wait_for(shown, timeout, f"{resource} to be {state}", every=CLI_POLL)


def taken_over(acquire: Callable[[], Result]) -> Result:
    """Poll another host's ``acquire`` until it takes the lapsed claim over: HELD (3) until
    that host has seen the record unchanged for a TTL (docs/remote.md), then 0."""

    def took() -> Result | None:
        got = acquire()
        assert got.code in (0, 3), got
        return got if got.code == 0 else None

    return wait_for(took, what="the takeover", every=CLI_POLL)


def wait_renewed(cli: Callable[..., Result], resource: str, since: dict, **kw: object) -> dict:
    """Poll ``gitlease show RESOURCE --json`` until the claim was renewed after ``since`` (a
    document shown or acquired): it ends later than then. The document shown then."""

    def shown() -> dict | None:
        got = cli("show", resource, "--json", **kw)
        doc = got.json if got.code == 0 else None
        return doc if doc and doc["expires_at"] > since["expires_at"] else None

    return wait_for(shown, what=f"{resource} to be renewed", every=CLI_POLL)
