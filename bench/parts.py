#!/usr/bin/env python3
"""Run one gitlease command (or the commit check) in this process and say where its time went.

    python bench/parts.py OUT.json gitlease ARGS...      # the CLI
    python bench/parts.py OUT.json hookcheck HOOK         # the commit check the hooks run

Writes ``{"total", "imports", "git", "git_calls", "writes"}`` in seconds to OUT.json: the
wall time from the start of this script's own code to the command's end, the time spent
importing modules (outermost imports only, so nothing counts twice), the time spent waiting
for ``git`` processes and how many ran, and the time inside the store's writes (blob writes
and the reference transaction, libgit2's or the files and the wait around ``git update-ref``,
less the git processes and imports inside, counted as theirs), and for a keepalive the wait
for the keeper (``keeper``). The interpreter's own start is measured apart, as ``python -c
pass``. The rest of ``total`` is gitlease's own code.

And the same in CPU time (user + system), where a busy machine's waiting would blur the
wall time: ``cpu_start`` (this process's CPU before its own code: the interpreter's start),
``cpu_imports``, ``cpu`` (this process's CPU in all), ``cpu_push`` and ``pushes`` (``git
push``, with the processes it ran), ``cpu_git`` (every other git process).
"""

from __future__ import annotations

import time

START = time.perf_counter()
CPU_START = time.process_time()

import builtins  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402

spent = {"imports": 0.0, "git": 0.0, "git_calls": 0, "writes": 0.0, "keeper": 0.0}
spent.update(cpu_start=CPU_START, cpu_imports=0.0, cpu_push=0.0, pushes=0, cpu_git=0.0)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_depth = [0]


def _timed_import(real):  # type: ignore[no-untyped-def]
    def call(*args, **kwargs):  # type: ignore[no-untyped-def]
        if _depth[0]:
            return real(*args, **kwargs)
        _depth[0] += 1
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            spent["imports"] += time.perf_counter() - started
            spent["cpu_imports"] += time.process_time() - cpu
            _depth[0] -= 1
            _patch_when_imported()

    return call


builtins.__import__ = _timed_import(builtins.__import__)
importlib.import_module = _timed_import(importlib.import_module)


def _time_git_processes(subprocess) -> None:  # type: ignore[no-untyped-def]
    """Every ``git`` process, however started (``run`` and streaming ``Popen`` alike: a
    listing reads ``git for-each-ref`` as it writes), from its start to the wait that
    reaps it. Patched once gitlease imports ``subprocess``, so that its import still
    counts as an import of the command's own."""

    class TimedPopen(subprocess.Popen):  # type: ignore[misc,name-defined]
        def __init__(self, args, *rest, **kwargs):  # type: ignore[no-untyped-def]
            self._bench = (time.perf_counter(), _children_cpu())
            self._bench_git = bool(args) and args[0] == "git"
            self._bench_push = self._bench_git and "push" in args[:2]
            super().__init__(args, *rest, **kwargs)

        def wait(self, timeout=None):  # type: ignore[no-untyped-def]
            code = super().wait(timeout)
            if self._bench_git and self._bench is not None:
                started, cpu = self._bench
                self._bench = None
                spent["git"] += time.perf_counter() - started
                spent["git_calls"] += 1
                key = "cpu_push" if self._bench_push else "cpu_git"
                spent[key] += _children_cpu() - cpu
                spent["pushes"] += self._bench_push
            return code

    subprocess.Popen = TimedPopen


def _patch_when_imported() -> None:
    module = sys.modules.get("subprocess")
    if module is not None and not getattr(module, "_bench_patched", False):
        module._bench_patched = True
        _time_git_processes(module)


def _timed_write() -> None:
    from gitlease.store.local import LocalStore

    real = LocalStore.compare_and_swap_many

    def call(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        started, inner = time.perf_counter(), spent["git"] + spent["imports"]
        try:
            return real(self, *args, **kwargs)
        finally:
            elapsed = time.perf_counter() - started
            spent["writes"] += elapsed - (spent["git"] + spent["imports"] - inner)

    LocalStore.compare_and_swap_many = call  # type: ignore[method-assign]


def _timed_keeper() -> None:
    """The time a keepalive waits for the keeper (the hand-over: connect, its work, answer)."""
    from gitlease.state import keeperlink

    real = keeperlink.request

    def call(*args, **kwargs):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent["keeper"] += time.perf_counter() - started

    keeperlink.request = call  # type: ignore[assignment]


def main() -> None:
    out, what, *args = sys.argv[1:]
    if what == "gitlease":
        import gitlease.cli

        if any(a in args for a in ("acquire", "heartbeat", "release")):
            _timed_write()
        if "keepalive" in args or "--keepalive" in args:
            _timed_keeper()
        sys.argv = ["gitlease", *args]
        code = gitlease.cli.main()
    else:
        from gitlease.hooks import check as hookcheck

        code = hookcheck.main(args)
    spent["total"] = time.perf_counter() - START
    spent["cpu"] = time.process_time()
    spent["code"] = code
    with open(out, "w") as f:
        json.dump(spent, f)
    end = getattr(gitlease.cli, "_exit", None) if what == "gitlease" else None
    if end is not None:
        end(code)  # as the console script ends (when it can: see there)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
