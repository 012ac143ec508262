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
