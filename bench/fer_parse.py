#!/usr/bin/env python3
"""The floor of a listing, for bench/listing.py: one plain ``git for-each-ref`` of every
record under ``refs/worklease/`` and a parse of its output in Python, each record split into
its fields (no signature checked, nothing judged, nothing printed).

    python bench/fer_parse.py GIT_DIR
"""

from __future__ import annotations

import subprocess
import sys


def main() -> None:
    out = subprocess.run(
        ["git", "--git-dir", sys.argv[1], "for-each-ref",
         "--format=%(refname) %(objectname) %(raw:size)%0a%(raw)", "refs/worklease/"],
        capture_output=True,
        check=True,
    ).stdout  # fmt: skip
    records = 0
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        ref, oid, size = out[pos:end].split(b" ")
        start = end + 1
        stop = start + int(size)
        lines = out[start:stop].decode("utf-8").split("\n")
        fields = dict(line.split(" ", 1) for line in lines[1:-1])
        records += bool(fields) and bool(ref) and bool(oid)
        pos = stop + 1
    print(records)


if __name__ == "__main__":
    main()
