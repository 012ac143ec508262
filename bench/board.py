#!/usr/bin/env python3
"""The board's page data for 1,000 claims over a warm store, beside `gitlease list --json`.

Each claim has a history of three records (acquired, renewed twice), written straight into
the store as signed records chained by their ``previous`` ids (what three commands a claim
would leave). "Warm": the verified-records cache and the file system's cache as a previous
read left them. Figures, interleaved so that noise hits them alike:

- ``list --json``: the command, a process (the baseline);
- ``/api/claims, built``: the same document in the board's process (reads.list_document);
- ``page data, a new board``: the page's document as the server sends it (its JSON bytes:
  claims, waiters, keepers, timelines) from a board that has read nothing yet (goal: under
  100 ms); its timelines hold what this build read (docs/board.md);
- ``a new board, every timeline read``: the same, built again until every timeline holds
  its whole kept history (the polls that follow the first);
- ``page data, after one write``: one claim written meanwhile, so one new record to read;
- ``page data, idle poll``: nothing changed: the fingerprint of the store's refs only;
- ``GET /api/board, idle`` and ``GET /api/claims``: through the real HTTP server.

The two goal figures and the whole history are printed again as CPU time (this process and
its git children), which a loaded machine blurs less than wall time.

    python bench/board.py [--claims 1000] [--repeat 10]
    PYTHONPATH=/tmp/gitlease-main python bench/board.py   # the same of another tree
"""

from __future__ import annotations

import argparse
import http.client
import json
import resource
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from common import ENV, GITLEASE, load_line, make_repo, report, run_process, store_of

GOAL_MS = 100.0


def populate_history(repo: Path, count: int, records: int = 3) -> list[tuple[str, str]]:
    """``count`` active claims of ``records`` records each; (ref, head oid) of each."""
    import pygit2

    from gitlease.model.clock import Now, rfc3339
    from gitlease.model.record import GUARDED, HELD, Record, SigningKey, new_claim_id, new_token
    from gitlease.model.refname import encode

    git_dir = store_of(repo)
    raw = pygit2.Repository(str(git_dir))
    key = SigningKey(new_token())
    now = Now.read()
    ttl = 7_200_000
    lines, heads = [], []
    for i in range(count):
        resource = f"board/{i}"
        claim_id, previous, oid = new_claim_id(), None, None
        for revision in range(1, records + 1):
            at = now.wall_ms - (records - revision) * 60_000
            record = Record(
                resource=resource, state=HELD, claim_id=claim_id, owner=f"agent-{i % 7}",
                revision=revision, bundle_id=None, mode=GUARDED,
                acquired_at=rfc3339(now.wall_ms - (records - 1) * 60_000),
                renewed_at=rfc3339(at), released_at=None, expires_at=rfc3339(at + ttl),
                renew_by=rfc3339(at + ttl // 2), ttl_ms=ttl, boot_id=now.boot,
                boot_expires_ms=now.boot_ms + ttl, note=None, checkpoint=None,
                public_key=key.public_hex, previous=previous,
            ).signed(key)  # fmt: skip
            oid = str(raw.create_blob(record.raw))
            previous = oid
        lines.append(f"update {encode(resource)} {oid}\n")
        heads.append((encode(resource), str(oid)))
    subprocess.run(
        ["git", "--git-dir", str(git_dir), "update-ref", "--stdin"],
        input="".join(lines).encode(),
        env=ENV,
        check=True,
    )
    return heads


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cpu() -> float:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claims", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    repo = make_repo()
    started = time.perf_counter()
    populate_history(repo, args.claims)
    print(
        f"board: {args.claims} claims of 3 records each, written in "
        f"{time.perf_counter() - started:.1f}s; {load_line()}"
    )
    import os

    os.chdir(repo)
    from gitlease.api.reads import list_document
    from gitlease.board.data import Board
    from gitlease.board.server import make_server
    from gitlease.store.location import open_store

    listing = run_process([*GITLEASE, "list", "--json"], repo, True)
    listing()  # warm: the verified-records cache, the file system's cache
    store = open_store()
    lived = Board(store)
    lived.page()
    while getattr(lived, "history_pending", False):  # (a board that has been open a while)
        lived.page()
    counter = iter(range(10**9))

    def write_one() -> None:  # untimed: one new record, as a heartbeat would leave
        subprocess.run(
            [*GITLEASE, "acquire", f"fresh/{next(counter)}", "--no-bind"],
            cwd=repo,
            env=ENV,
            capture_output=True,
            check=True,
        )

    server = make_server(Board(store))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(path: str, headers: dict[str, str]) -> None:
        conn.request("GET", path, headers=headers)
        conn.getresponse().read()

    def new_board() -> None:
        Board(store).page()

    first = json.loads(Board(store).page()[0])  # (what the figure measures, checked once)
    assert len(first["claims"]) >= args.claims and len(first["timelines"]) >= args.claims

    def new_board_whole() -> None:
        board = Board(store)
        board.page()
        while getattr(board, "history_pending", False):  # (an older tree reads it all at once)
            board.page()

    cases: dict[str, Callable[[], object]] = {
        "list --json (process)": listing,
        "/api/claims, built": lambda: list_document(store),
        "page data, a new board": new_board,
        "a new board, every timeline read": new_board_whole,
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for name in (
        "page data, after one write",
        "page data, idle poll",
        "GET /api/board, idle (304)",
        "GET /api/claims",
    ):
        samples[name] = []
    cpu: dict[str, list[float]] = {
        "page data, a new board": [],
        "a new board, every timeline read": [],
        "page data, after one write": [],
    }
    for _ in range(args.repeat):
        for name, fn in cases.items():
            before = _cpu()
            samples[name].append(_time(fn))
            if name in cpu:
                cpu[name].append(_cpu() - before)
        write_one()
        before = _cpu()
        samples["page data, after one write"].append(_time(lived.page))
        cpu["page data, after one write"].append(_cpu() - before)
        samples["page data, idle poll"].append(_time(lived.page))
        conn.request("GET", "/api/board")  # (untimed: the server's board reads the write)
        answer = conn.getresponse()
        answer.read()
        etag = answer.getheader("ETag") or ""
        samples["GET /api/board, idle (304)"].append(
            _time(lambda: get("/api/board", {"If-None-Match": etag}))  # noqa: B023
        )
        samples["GET /api/claims"].append(_time(lambda: get("/api/claims", {})))
    base = samples["list --json (process)"]
    print(f"-- {args.claims} claims; ratios against `gitlease list --json` in this run")
    for name, values in samples.items():
        report(name, values, base, "list --json")
    for name, values in cpu.items():
        report(f"  CPU: {name}", values)
    for name in ("page data, a new board", "page data, after one write"):
        got = statistics.median(samples[name]) * 1000
        verdict = "met" if got < GOAL_MS else "NOT met"
        print(f"goal: {name} under {GOAL_MS:.0f} ms: {verdict} ({got:.1f} ms)")
    server.shutdown()


if __name__ == "__main__":
    main()
