"""Which claims a keeper keeps alive on this host: a small registry in the store.

``<store>/worklease/keepalive.json`` lists what the keepers on this host keep
(:mod:`gitlease.keepalive.process`): one entry per kept claim (or bundle), naming the
keeper process, the claims it renews, the process it watches, its log and the keeper's
socket. One keeper serves every claim of its user, so several entries name one pid. It
sits in the store rather than next to the receipt because a receipt's directory is private
to one worktree, and every agent's ``show`` and ``list`` on this host should see that a
claim is kept alive. Writers rewrite it whole under the ``flock`` of ``keepalive.lock``;
readers take no lock (the file is replaced atomically). An entry names its process by pid
and start time (:mod:`gitlease._util.procs`), so an entry left by a process that died
(``kill -9``) or a pid the kernel gave to another process is never reported, and the next
writer drops it. The registry holds no secret: pids, claim ids, paths.

A remote store's registry is its local mirror's: keepers are a matter of one host.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._util import procs as _procs
from .._util.files import atomic_write, flocked
from .._util.text import masked
from ..errors import HeldError, StoreError, UsageError
from ..gitio import layout
from ..model.keeper import Keeper as Keeper  # (the registry's entries; read from here too)
from ..model.refname import decode

#: How the command line of a keepalive process of gitlease 0.2 (one process per claim) names
#: it: one may still run after an upgrade, and ``release`` still stops it with SIGTERM.
KEEPALIVE_ARGV0 = "gitlease-keepalive"
KEEPALIVE_BOOT_PREFIX = "from gitlease.keepalive.process import serve"
#: How the keeper's command line names it (:mod:`gitlease.keepalive.start` starts it so):
#: never the 0.2 form, so a keeper is never sent a signal by ``release``.
KEEPER_ARGV0 = "gitlease-keeper"
#: How long ``release`` waits for the keepalive processes it stopped to end.
STOP_WAIT_SECONDS = 2.0
_LOCK_WAIT_SECONDS = 5.0


def parse(doc: Any) -> Keeper | None:
    """A registry entry, or None if it is not one (the file can be edited by anyone who can
    write the store: parsed totally, never trusted beyond its shape)."""
    try:
        claims = tuple((str(c[0]), str(c[1]), str(c[2])) for c in doc["claims"] if len(c) == 3)
        ints = [doc[k] for k in ("pid", "start", "watched_pid", "watched_start")]
        texts = [doc[k] for k in ("boot", "watched_name", "started_at", "until", "log")]
        bundle_id = doc["bundle_id"]
        sock = doc.get("socket", "")
    except (KeyError, TypeError, IndexError, AttributeError):
        return None
    if not claims or any(type(i) is not int or i < 0 for i in ints):
        return None
    if any(not isinstance(t, str) for t in texts) or not isinstance(bundle_id, str | None):
        return None
    if not isinstance(sock, str):
        return None
    return Keeper(
        pid=ints[0],
        start=ints[1],
        boot=texts[0],
        claims=claims,
        bundle_id=bundle_id,
        watched_pid=ints[2],
        watched_start=ints[3],
        watched_name=masked(texts[1]),
        started_at=masked(texts[2]),
        until=masked(texts[3]),
        log=texts[4],
        socket=sock,
    )


def _path(git_dir: Path) -> Path:
    return layout.keepalive_registry(git_dir)


def _entries(git_dir: Path) -> list[Keeper]:
    """Every parseable entry, live or not (none if the file is missing or unreadable)."""
    try:
        doc = json.loads(_path(git_dir).read_bytes())
        entries = doc["keepers"]
        if not isinstance(entries, list):
            return []
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [k for k in (parse(e) for e in entries) if k is not None]


def registered(git_dir: Path) -> list[Keeper]:
    """Every entry of the registry, live or not (the board shows a dead keeper as dead)."""
    return _entries(git_dir)


def live(git_dir: Path) -> list[Keeper]:
    """The entries of the store at ``git_dir`` whose keeper still runs."""
    seen: dict[tuple[int, int, str], bool] = {}  # (a keeper has many entries: one look)
    out = []
    for k in _entries(git_dir):
        ident = (k.pid, k.start, k.boot)
        if ident not in seen:
            seen[ident] = k.alive
        if seen[ident]:
            out.append(k)
    return out


def by_claim(git_dir: Path) -> dict[tuple[str, str], Keeper]:
    """``(ref, claim id)`` -> the live keepalive process that renews that claim."""
    return {(ref, cid): k for k in live(git_dir) for _, ref, cid in k.claims}


def _write(git_dir: Path, keepers: list[Keeper]) -> None:
    path = _path(git_dir)
    data = json.dumps({"keepers": [k.entry() for k in keepers]}, indent=2) + "\n"
    try:
        atomic_write(path, data.encode("utf-8"), durable=False, mode=0o644)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None


def _locked(git_dir: Path) -> contextlib.AbstractContextManager[int]:
    lock = layout.keepalive_lock(git_dir)

    def busy() -> StoreError:
        return StoreError(f"{lock} stayed locked for {_LOCK_WAIT_SECONDS:.0f} seconds")

    return flocked(lock, wait=_LOCK_WAIT_SECONDS, busy=busy)


def refuse_second(others: Iterable[Keeper], claims: Iterable[tuple[str, str, str]]) -> None:
    """HELD naming the first process if one of ``others`` already keeps one of ``claims``
    ``(resource, ref, claim id)`` alive: one keepalive per claim."""
    wanted = list(claims)
    for other in others:
        if not provably_ours(other):
            continue  # (a forged entry naming another process must not block a keepalive)
        for resource, ref, claim_id in wanted:
            if other.keeps(ref, claim_id):
                raise HeldError(
                    f"claim {claim_id} on {resource} is already kept alive by the keepalive "
                    f"process {other.pid} (watching pid {other.watched_pid}, "
                    f"{other.watched_name}; log {other.log})"
                )


def register(git_dir: Path, keeper: Keeper) -> None:
    """Add ``keeper``, unless a live process already keeps one of its claims alive (HELD,
    :func:`refuse_second`). Entries of dead processes are dropped."""
    with _locked(git_dir):
        others = live(git_dir)
        refuse_second(others, keeper.claims)
        _write(git_dir, [*others, keeper])


def unregister(
    git_dir: Path, pid: int, start: int, claims: tuple[tuple[str, str, str], ...] | None = None
) -> None:
    """Remove the entries of the process ``(pid, start)``, only the one of ``claims`` when
    given (and those of every dead process)."""
    with _locked(git_dir):
        _write(
            git_dir,
            [
                k
                for k in live(git_dir)
                if (k.pid, k.start) != (pid, start) or (claims is not None and k.claims != claims)
            ],
        )


def replace(git_dir: Path, old: Keeper, new: Keeper) -> None:
    """Put ``new`` where ``old`` was (a kept bundle lost a member), under one lock."""
    with _locked(git_dir):
        others = [k for k in live(git_dir) if k != old]
        _write(git_dir, [*others, new])


def forget_dead(git_dir: Path) -> int:
    """Drop the entries of processes that no longer run; how many (the retention pass)."""
    if not _path(git_dir).exists():
        return 0
    with _locked(git_dir):
        entries = _entries(git_dir)
        alive = [k for k in entries if k.alive]
        if len(alive) != len(entries):
            _write(git_dir, alive)
        return len(entries) - len(alive)


def _command_line_if_ours(keeper: Keeper) -> list[str] | None:
    """The command line of ``keeper``'s process when it is the one recorded (its start time:
    the pid was not handed on) and runs under this user; None otherwise."""
    if not _procs.alive(keeper.pid, keeper.start):
        return None
    try:
        if os.stat(f"/proc/{keeper.pid}").st_uid != os.geteuid():
            return None
    except OSError:
        return None
    return _procs.cmdline(keeper.pid)


def provably_ours(keeper: Keeper) -> bool:
    """Whether ``keeper``'s process is one of this user's keepers (or a 0.2 keepalive), by
    :func:`_command_line_if_ours`. Anyone who can write the store can add an entry; only
    these count."""
    argv = _command_line_if_ours(keeper)
    return argv is not None and (KEEPER_ARGV0 in argv or KEEPALIVE_ARGV0 in argv)


def provably_keepalive(keeper: Keeper, refs: Iterable[str]) -> bool:
    """Whether ``keeper``'s process is provably a gitlease keepalive of this user that
    renews the claims at ``refs``: its start time is the one recorded (so the pid was not
    handed on), it runs under this user, and its command line is the keepalive's
    (``... -c <boot> gitlease-keepalive RESOURCE...``) naming each of those resources.

    The registry can be edited by anyone who can write the store: without this, an entry
    naming another process made ``release`` SIGTERM it (any process of the releasing user).
    """
    argv = _command_line_if_ours(keeper)
    if argv is None or KEEPALIVE_ARGV0 not in argv:
        return False
    at = argv.index(KEEPALIVE_ARGV0)
    if at < 2 or argv[at - 2] != "-c" or not argv[at - 1].startswith(KEEPALIVE_BOOT_PREFIX):
        return False
    named = set(argv[at + 1 :])
    try:
        return all(decode(ref) in named for ref in refs)
    except UsageError:
        return False


def stop(git_dir: Path, claims: Iterable[tuple[str, str]]) -> list[int]:
    """Stop keeping ``claims`` (``(ref, claim id)`` pairs, just released) alive; the pids
    of the processes that kept them. Best effort: whatever keeps them finds the claim
    released at its next renewal and stops then.

    A keeper is asked over its socket (its own user's process only, and the pid the
    registry names): it answers once it no longer keeps them, and when it then keeps
    nothing it ends, which is waited for (up to :data:`STOP_WAIT_SECONDS`). A keepalive
    process of gitlease 0.2 is sent SIGTERM as before, when it is provably one."""
    wanted = set(claims)
    entries = [k for k in live(git_dir) if any(k.keeps(ref, cid) for ref, cid in wanted)]
    ending: list[Keeper] = []
    asked: set[tuple[int, int]] = set()
    for keeper in entries:
        if not keeper.socket or (keeper.pid, keeper.start) in asked:
            continue
        asked.add((keeper.pid, keeper.start))
        if _ask_to_drop(keeper, git_dir, wanted):
            ending.append(keeper)
    legacy = [
        k
        for k in entries
        if not k.socket and provably_keepalive(k, [ref for ref, cid in wanted if k.keeps(ref, cid)])
    ]
    for keeper in legacy:
        # checked again just before: never signal a pid that moved on
        if keeper.alive and provably_keepalive(keeper, []):
            import signal  # (only here: every read that shows keepalives imports this module)

            with contextlib.suppress(OSError):
                os.kill(keeper.pid, signal.SIGTERM)
    waited = [*ending, *legacy]
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    while any(k.alive for k in waited) and time.monotonic() < deadline:
        time.sleep(0.02)
    return sorted({k.pid for k in entries if k.socket or k in legacy})


def _ask_to_drop(keeper: Keeper, git_dir: Path, claims: set[tuple[str, str]]) -> bool:
    """Ask ``keeper`` to stop keeping ``claims``; whether it said it now ends."""
    from . import keeperlink

    try:
        answer = keeperlink.request(
            keeper.socket,
            {"op": "drop", "store": str(git_dir), "claims": sorted(claims)},
            pid=keeper.pid,
            timeout=STOP_WAIT_SECONDS + 3,
        )
    except (keeperlink.NoKeeper, keeperlink.Dropped, StoreError, OSError):
        return False
    return answer.get("ending") is True
