"""Shared helpers for the benchmarks: hermetic repositories, timing, and the printed figures.

Every figure is printed with its median, min-max and its ratio against a
baseline measured in the same run (these machines are shared and noisy).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PYTHON = sys.executable
GITLEASE = [PYTHON, "-m", "gitlease"]


def hermetic_env() -> dict[str, str]:
    home = Path(tempfile.mkdtemp(prefix="gitlease-bench-home-"))
    (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.invalid\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITLEASE_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure what users run: cached bytecode
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        XDG_STATE_HOME=str(home / "state"),
        GITLEASE_OWNER="bench",
    )
    return env


ENV = hermetic_env()
os.environ.update(ENV)
sys.dont_write_bytecode = False
subprocess.run(
    [PYTHON, "-m", "compileall", "-q", str(Path(__file__).resolve().parent.parent / "gitlease")],
    env=ENV,
    check=True,
)


def make_repo() -> Path:
    path = Path(tempfile.mkdtemp(prefix="gitlease-bench-")) / "repo"
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=ENV)
    (path / "f").write_text("x\n")
    subprocess.run(["git", "add", "f"], cwd=path, check=True, env=ENV)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=path, check=True, env=ENV)
    return path


def time_it(fn: Callable[[], object], repeat: int) -> list[float]:
    """Seconds per call, ``repeat`` calls after one warm-up."""
    fn()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def time_interleaved(cases: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Seconds per call of each case, taking turns so that noise hits every case alike."""
    for fn in cases.values():
        fn()
    out: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - start)
    return out


def run_process(args: list[str], cwd: Path, check: bool = False) -> Callable[[], object]:
    def call() -> object:
        result = subprocess.run(
            args, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if check and result.returncode != 0:
            raise SystemExit(f"{args} exited {result.returncode}")
        return result

    return call


def ms(samples: list[float]) -> str:
    return (
        f"median {statistics.median(samples) * 1000:8.2f} ms  "
        f"(min {min(samples) * 1000:.2f}, max {max(samples) * 1000:.2f}, n={len(samples)})"
    )


def load_line() -> str:
    """The machine's load while measuring (the machines are shared: say how busy it was)."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


PARTS = Path(__file__).resolve().parent / "parts.py"


def parts_process(args: list[str], cwd: Path, out: Path, check: bool = True):
    """A call that runs ``args`` (``gitlease ...`` or ``hookcheck HOOK``) under bench/parts.py,
    which leaves where its time went in ``out``; ``read()`` then returns it."""
    parts_args = [PYTHON, str(PARTS), str(out), *args]
    return run_process(parts_args, cwd, check)


def read_parts(out: Path) -> dict[str, float]:
    import json

    return json.loads(out.read_text())


def report_parts(bare: list[float], runs: list[dict[str, float]], wall: list[float]) -> None:
    """Print a command's wall time as its parts: the interpreter (``python -c pass``), imports,
    git processes, the store's writes, gitlease's own code, and what is left (exit, the shell)."""
    interp = median_ms(bare)
    med = {k: statistics.median(r[k] for r in runs) * 1000 for k in ("imports", "git", "writes")}
    calls = statistics.median(r["git_calls"] for r in runs)
    total = statistics.median(r["total"] for r in runs) * 1000
    keeper = statistics.median(r.get("keeper", 0.0) for r in runs) * 1000
    ours = total - med["imports"] - med["git"] - med["writes"] - keeper
    rest = median_ms(wall) - interp - total
    line = (
        f"    parts: interpreter {interp:.1f} + imports {med['imports']:.1f} + "
        f"git {med['git']:.1f} ({calls:g} calls)"
    )
    if med["writes"]:
        line += f" + writes {med['writes']:.1f}"
    if keeper:
        line += f" + keeper {keeper:.1f}"
    line += f" + gitlease {ours:.1f} + other {rest:.1f} ms"
    print(line, flush=True)


def report(
    name: str,
    samples: list[float],
    baseline: list[float] | None = None,
    baseline_name: str = "",
    goal: float | None = None,
) -> float | None:
    """Print one figure; return its ratio to the baseline's median."""
    line = f"{name:<44} {ms(samples)}"
    ratio = None
    if baseline is not None:
        ratio = statistics.median(samples) / statistics.median(baseline)
        line += f"  {ratio:5.2f}x {baseline_name}"
        if goal is not None:
            line += f" (goal <= {goal}x: {'met' if ratio <= goal else 'NOT met'})"
    print(line, flush=True)
    return ratio


def store_of(repo: Path) -> Path:
    """The git dir of the store gitlease uses from ``repo`` (made if it does not exist yet)."""
    from gitlease.store.location import ensure_exists, locate

    location = locate(cwd=repo)
    ensure_exists(location)
    return location.git_dir


def populate(repo: Path, count: int, prefix: str = "scale/", ttl_ms: int = 7_200_000) -> None:
    """Write ``count`` active, validly signed claims into ``repo``'s store, fast: the records are
    made and signed in this process and the refs set by one ``git update-ref --stdin``. (What
    `list`, `free` and `verify` read is the same as after ``count`` acquires; the acquires
    themselves would take minutes.)"""
    import pygit2

    from gitlease.model.clock import Now, rfc3339
    from gitlease.model.record import GUARDED, HELD, Record, SigningKey, new_claim_id, new_token
    from gitlease.model.refname import encode

    git_dir = store_of(repo)
    raw = pygit2.Repository(str(git_dir))
    key = SigningKey(new_token())
    now = Now.read()
    stamp = rfc3339(now.wall_ms)
    lines = []
    for i in range(count):
        resource = f"{prefix}{i}"
        record = Record(
            resource=resource, state=HELD, claim_id=new_claim_id(), owner="bench", revision=1,
            bundle_id=None, mode=GUARDED, acquired_at=stamp, renewed_at=stamp, released_at=None,
            expires_at=rfc3339(now.wall_ms + ttl_ms), renew_by=rfc3339(now.wall_ms + ttl_ms // 2),
            ttl_ms=ttl_ms, boot_id=now.boot, boot_expires_ms=now.boot_ms + ttl_ms, note=None,
            checkpoint=None, public_key=key.public_hex, previous=None,
        ).signed(key)  # fmt: skip
        oid = raw.create_blob(record.raw)
        lines.append(f"update {encode(resource)} {oid}\n")
    subprocess.run(
        ["git", "--git-dir", str(git_dir), "update-ref", "--stdin"],
        input="".join(lines).encode(),
        env=ENV,
        check=True,
    )
