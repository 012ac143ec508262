"""A Jepsen-style history harness: random clients, a nemesis, and a checker run afterwards.

``run()`` starts client processes (``harness_client.py``; every other one writes through
``git update-ref`` as the CLI does, the rest through libgit2) over a few resources
with a short TTL while a nemesis SIGKILLs them, pauses them with SIGSTOP for
longer than the TTL, and runs ``git gc`` and ``git pack-refs --all`` alongside.
``check()`` then reads the clients' logs and the store's own history and
counts violations of four properties:

1. per resource, no two claims active at once in the store's history;
2. revisions strictly increase per resource;
3. a ``check`` (or acquire, heartbeat, release) that returned OK names a claim
   that the store's history shows active during that call;
4. the fenced sink (written only through ``replace-file``) never receives a
   write from a claim that was no longer current: its revisions never go back.

The unfenced control sink (written after a plain ``check``) is judged by the
same rule as 4 and its violations are reported, not failed on: they are the
lost updates that fencing prevents.

Used by ``tests/system/test_history.py`` (bounded) and ``scripts/soak`` (as long as you like).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass
class Stats:
    ops: int = 0
    ok: int = 0
    failed: int = 0
    unknown: int = 0
    kills: int = 0
    pauses: int = 0
    gcs: int = 0
    by_op: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    violations: dict[str, list[str]] = field(
        default_factory=lambda: {
            p: []
            for p in (
                "no-two-holders",
                "revisions-increase",
                "ok-means-held",
                "fenced-sink",
                "control-sink (expected)",
            )
        }
    )

    def summary(self) -> str:
        lines = [
            f"operations {self.ops} (ok {self.ok}, failed {self.failed}, unknown {self.unknown})",
            "by op: " + ", ".join(f"{k} {v}" for k, v in sorted(self.by_op.items())),
            f"nemesis: kills {self.kills}, pauses {self.pauses}, gc/pack-refs {self.gcs}",
        ]
        lines += [f"violations {k}: {len(v)}" for k, v in self.violations.items()]
        return "\n".join(lines)


def _spawn(
    repo: Path, name: str, log_dir: Path, ttl: float, resources: list[str], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "harness_client.py"), name, str(log_dir), str(ttl), *resources],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run(
    repo: Path,
    log_dir: Path,
    *,
    seconds: float,
    clients: int = 8,
    resources: int = 4,
    ttl: float = 1.0,
    seed: int = 1,
    env: dict[str, str] | None = None,
    hosts: list[tuple[Path, dict[str, str]]] | None = None,
    boot_offsets: dict[str, int] | None = None,
    until: Callable[[Stats], bool] | None = None,
) -> Stats:
    """Run clients and the nemesis for ``seconds``, then check the history.

    With ``until`` the run ends as soon as ``until(stats)`` is true (asked about once a
    second, with the nemesis's counts so far: see :func:`enough` and :func:`caught`), and
    ``seconds`` only bounds a run that never gets there: the events end it, not the time,
    however loaded the machine.

    With ``hosts`` (a clone and its environment each, see ``hosts.py``) the
    clients are dealt round-robin to the hosts, and ``repo`` is the remote
    they share, whose records the checker reads; ``boot_offsets`` puts every
    host's boot clock back on this machine's.
    """
    rng = random.Random(seed)
    names = [f"res/{i}" for i in range(resources)]
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), **(env or {})}
    places = hosts or [(repo, {})]

    def spawn(i: int) -> subprocess.Popen[bytes]:
        cwd, host_env = places[i % len(places)]
        extra = {"HARNESS_HOST": f"h{i % len(places)}"} if hosts else {}
        return _spawn(cwd, f"c{i}", log_dir, ttl, names, {**env, **host_env, **extra})

    procs = {f"c{i}": spawn(i) for i in range(clients)}
    stats = Stats()
    stop = threading.Event()

    # git works on every store while the clients do: the remote and each host's own store
    # (hosts.py), or the shared store of the single repository (docs/reference/store.md)
    stores = [repo, *(p / ".git" for p, _ in places)] if hosts else [_store_of(repo)]

    def collector() -> None:
        while not stop.wait(rng.uniform(0.5, 2.0)):
            for git_dir in stores:
                for args in (["gc", "--quiet"], ["pack-refs", "--all"]):
                    subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True)
                    stats.gcs += 1

    gc_thread = threading.Thread(target=collector, daemon=True)
    gc_thread.start()
    deadline = time.monotonic() + seconds
    time.sleep(min(1.0, seconds / 4))  # let the clients import
    asked = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if until is not None and time.monotonic() - asked >= 1.0:
                if until(stats):
                    break
                asked = time.monotonic()
            time.sleep(rng.uniform(0.1, 0.5))
            name = rng.choice(sorted(procs))
            if rng.random() < 0.6:
                procs[name].send_signal(signal.SIGKILL)
                procs[name].wait()
                procs[name] = spawn(int(name[1:]))
                stats.kills += 1
            else:
                procs[name].send_signal(signal.SIGSTOP)
                time.sleep(ttl * rng.uniform(1.1, 1.6))
                procs[name].send_signal(signal.SIGCONT)
                stats.pauses += 1
    finally:
        stop.set()
        for proc in procs.values():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        gc_thread.join()
    check(repo, log_dir, names, stats, boot_offsets, remote=bool(hosts))
    return stats


#: The four properties checked (the control sink's violations are expected: not one of them).
PROPERTIES = ("no-two-holders", "revisions-increase", "ok-means-held", "fenced-sink")
#: Every kind of operation the clients make (harness_client.py), but the control sink's.
OPERATIONS = ("acquire", "heartbeat", "check", "release", "bundle", "exec", "replace")


def enough(log_dir: Path, *, kills: int, pauses: int, gcs: int, ok: int) -> Callable[[Stats], bool]:
    """An ``until`` for :func:`run`: the nemesis made ``kills`` SIGKILLs, ``pauses`` stalls past
    the TTL and ``gcs`` gc/pack-refs runs, and the clients' logs show more than ``ok``
    operations that succeeded and every one of :data:`OPERATIONS` tried."""

    def reached(stats: Stats) -> bool:
        if stats.kills < kills or stats.pauses < pauses or stats.gcs < gcs:
            return False
        ops = _operations(log_dir)
        done = sum(1 for op in ops if op["outcome"] == "ok")
        return done > ok and set(OPERATIONS) <= {op["op"] for op in ops}

    return reached


def caught(
    repo: Path,
    log_dir: Path,
    resources: int,
    boot_offsets: dict[str, int] | None = None,
    *,
    remote: bool = False,
) -> Callable[[Stats], bool]:
    """An ``until`` for :func:`run`: the checker (run on the history so far) has found a
    violation of one of the :data:`PROPERTIES` (for a broken build, which it must catch)."""
    names = [f"res/{i}" for i in range(resources)]

    def found(_stats: Stats) -> bool:
        so_far = check(repo, log_dir, names, Stats(), boot_offsets, remote=remote)
        return any(so_far.violations[p] for p in PROPERTIES)

    return found


def _store_of(repo: Path) -> Path:
    from gitlease.store.location import ensure_exists, locate

    location = locate(cwd=repo)
    ensure_exists(location)
    return location.git_dir


def _operations(log_dir: Path) -> list[dict]:
    ops: dict[tuple[str, int], dict] = {}
    for path in sorted(log_dir.glob("client-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by SIGKILL
            key = (entry["client"] + path.name, entry["seq"])
            if entry["phase"] == "invoke":
                # a restarted client starts its numbering again: keep each run apart
                while key in ops:
                    key = (key[0] + "'", key[1])
                ops[key] = {**entry, "invoke": entry["t"], "outcome": "unknown"}
            else:
                while (key[0] + "'", key[1]) in ops:
                    key = (key[0] + "'", key[1])
                if key in ops:
                    ops[key].update(entry, complete=entry["t"])
    return list(ops.values())


def check(
    repo: Path,
    log_dir: Path,
    resources: list[str],
    stats: Stats,
    boot_offsets: dict[str, int] | None = None,
    *,
    remote: bool = False,
) -> Stats:
    """Count violations of the four properties (see the module docstring).

    ``repo``: the remote the hosts share (``remote``), or the repository whose store the
    clients used.
    """
    import history

    from gitlease.api.history import log
    from gitlease.store.location import open_store

    # the clients' logs before the records: read during a run (:func:`caught`), every
    # operation read as done is then in the history read (read the other way round, one that
    # ended in between would look like a claim the store never had)
    operations = _operations(log_dir)
    # the records themselves, not a host's view of them
    store = open_store(repo, remote="") if remote else open_store(cwd=repo, remote="")
    intervals: dict[str, dict[str, tuple[int, int, int]]] = {}
    v = stats.violations
    for resource in resources:
        chain = log(store, resource)
        spans = history.claim_intervals(chain, boot_offsets)
        intervals[resource] = {cid: (rev, start, end) for cid, rev, start, end in spans}
        for (a, ra, _sa, ea), (b, rb, sb, _eb) in itertools.pairwise(spans):
            if rb <= ra:
                v["revisions-increase"].append(f"{resource}: {a} rev {ra} then {b} rev {rb}")
            if sb < ea:
                v["no-two-holders"].append(
                    f"{resource}: {b} (rev {rb}) began {ea - sb} ms before {a} (rev {ra}) ended"
                )

    for op in operations:
        stats.ops += 1
        stats.by_op[op["op"]] += 1
        if op["outcome"] == "unknown":
            stats.unknown += 1
            continue
        if op["outcome"] != "ok":
            stats.failed += 1
            continue
        stats.ok += 1
        if op["op"] in ("acquire", "heartbeat", "check", "release", "replace"):
            span = intervals[op["resource"]].get(op.get("claim_id"))
            invoke_ms, complete_ms = op["invoke"] // 1_000_000, op["complete"] // 1_000_000 + 1
            if span is None:
                v["ok-means-held"].append(
                    f"{op['client']} {op['op']} {op['resource']}: claim "
                    f"{op.get('claim_id')} is not in the store's history"
                )
            elif op["op"] != "release" and not (span[1] <= complete_ms and span[2] >= invoke_ms):
                v["ok-means-held"].append(
                    f"{op['client']} {op['op']} {op['resource']}: claim {op['claim_id']} held "
                    f"{span[1]}..{span[2]}, call {invoke_ms}..{complete_ms}"
                )

    for i, resource in enumerate(resources):
        for kind, key in (("fenced", "fenced-sink"), ("control", "control-sink (expected)")):
            # one sink per host: replace-file fences the files of its own host only
            for sink in sorted(log_dir.glob(f"{kind}-{i}.txt")) + sorted(
                log_dir.glob(f"{kind}-h*-{i}.txt")
            ):
                best = 0
                for line in sink.read_text().splitlines():
                    claim_id, revision = line.split()[:2]
                    rev = int(revision) if revision.isdigit() else -1
                    if rev < best:
                        v[key].append(
                            f"{resource} ({sink.name}): revision {rev} ({claim_id}) "
                            f"written after {best}"
                        )
                    best = max(best, rev)
    return stats
