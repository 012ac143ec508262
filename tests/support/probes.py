"""Counting, never timing: a process in the worktree that says what it answered and whether
it loaded the cryptography library; and other bytes put under an object's name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

# Runs in a subprocess in the worktree; prints what it answered and whether it loaded crypto.
_PROBE = """
import json, sys
from pathlib import Path
what = sys.argv[1]
out = {}
if what == "hook":
    from gitlease.hooks import check as hookcheck
    out["problems"] = hookcheck.problems()
elif what == "cli":
    import gitlease.cli
    from gitlease.cli import run
    gitlease.cli._exit = sys.exit  # (the CLI's own exit ends the process before this reports)
    sys.argv = ["gitlease", *sys.argv[2:]]
    try:
        run()
    except SystemExit as exc:
        out["code"] = exc.code
out["crypto"] = sorted(m for m in sys.modules if m.startswith("cryptography"))
sys.stderr.write("PROBE " + json.dumps(out) + "\\n")
"""


def probe(cwd: Path, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True
    )
    line = next(x for x in proc.stderr.splitlines() if x.startswith("PROBE "))
    return json.loads(line[len("PROBE ") :])


def receipt_of(doc: dict) -> Path:
    return Path(doc["receipt"])


def replace_object(git_dir: Path, oid: str, data: bytes) -> None:
    """Put other bytes under the name ``oid`` in the store (git does not hash what it reads)."""
    path = git_dir / "objects" / oid[:2] / oid[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob %d\0" % len(data) + data))
