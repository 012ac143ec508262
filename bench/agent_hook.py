#!/usr/bin/env python3
"""The agents' pre-edit check against the commit hook's check and `python -c pass`, one run.

Each harness runs `python -I -m gitlease.agents.hook HARNESS` before every file edit (see
docs/howto/agent-harnesses.md), so it must cost what the commit check costs
(`python -m gitlease.hookcheck pre-commit`), which runs on every commit. All with a live
claim bound to the worktree (the common case: the check reads, says nothing); the edit check
also on a lapsed claim (it denies) and a session start. Whole processes, taking turns round by
round, so that the machine's noise hits every case alike.

    python bench/agent_hook.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from common import ENV, GITLEASE, PYTHON, load_line, make_repo, report, time_interleaved


def piped(args: list[str], cwd: Path, data: bytes, expect: Callable[[bytes], bool]):
    def call() -> object:
        result = subprocess.run(args, cwd=cwd, env=ENV, input=data, capture_output=True)
        if result.returncode != 0 or not expect(result.stdout):
            raise SystemExit(f"{args}: exit {result.returncode}, {result.stdout[:300]!r}")
        return result

    return call


def edit_payload(worktree: Path) -> bytes:
    doc = {
        "session_id": "bench",
        "transcript_path": "/dev/null",
        "cwd": str(worktree),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": str(worktree / "f"), "old_string": "x", "new_string": "y"},
        "tool_use_id": "toolu_bench",
    }
    return json.dumps(doc).encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()

    live = make_repo()
    subprocess.run(
        [*GITLEASE, "acquire", "bench/live", "--ttl", "1h"], cwd=live, env=ENV, check=True
    )
    lapsed = live.parent / "lapsed"
    subprocess.run(["git", "worktree", "add", "-q", str(lapsed)], cwd=live, env=ENV, check=True)
    subprocess.run(
        [*GITLEASE, "acquire", "bench/lapsed", "--ttl", "1s"], cwd=lapsed, env=ENV, check=True
    )
    while True:  # wait for the lapse through the store, not a sleep margin
        shown = subprocess.run(
            [*GITLEASE, "show", "bench/lapsed", "--json"], cwd=live, env=ENV, capture_output=True
        )
        if json.loads(shown.stdout)["state"] == "expired":
            break
        time.sleep(0.1)

    hook = [PYTHON, "-I", "-m", "gitlease.agents.hook", "claude-code"]
    session = json.dumps({"hook_event_name": "SessionStart", "cwd": str(live), "source": "startup"})
    cases = {
        "python -c pass": piped([PYTHON, "-c", "pass"], live, b"", lambda out: True),
        "commit check (hookcheck pre-commit)": piped(
            [PYTHON, "-m", "gitlease.hookcheck", "pre-commit"], live, b"", lambda out: out == b""
        ),
        "edit check, live claim (silent)": piped(
            hook, live, edit_payload(live), lambda out: out == b""
        ),
        "edit check, lapsed claim (deny)": piped(
            hook, lapsed, edit_payload(lapsed), lambda out: b'"deny"' in out
        ),
        "session start context": piped(
            hook, live, session.encode(), lambda out: b"additionalContext" in out
        ),
    }
    print("The agents' edit check, whole process;", load_line())
    times = time_interleaved(cases, args.repeat)
    bare, commit = times["python -c pass"], times["commit check (hookcheck pre-commit)"]
    report("python -c pass", bare)
    report("commit check (hookcheck pre-commit)", commit, bare, "python -c pass")
    for name in ("edit check, live claim (silent)", "edit check, lapsed claim (deny)",
                 "session start context"):  # fmt: skip
        report(name, times[name], bare, "python -c pass")
        report("  the same", times[name], commit, "the commit check")


if __name__ == "__main__":
    main()
