"""A store whose coordinator is a git remote, for agents on several hosts (SPEC §11).

The local repository keeps what is local to this host: the record blobs it
writes, a *mirror* of the remote's ``refs/worklease/*`` (what ``git
for-each-ref``, ``show`` and the commit hooks read), the guards, the receipts
and the sightings below. The remote decides ownership. Every write is one

    git push --atomic --porcelain REMOTE --force-with-lease=REF:EXPECTED BLOB:REF ...

and the server compares each ref with EXPECTED under its own ref locks before
it moves any of them (an empty EXPECTED: the ref must not exist), so that push
is the compare-and-swap. Reads first fetch ``refs/worklease/*`` into the mirror.

Expiry cannot trust another host's clocks, so a record written by another host
(another boot id) is judged by *sightings*: this host remembers, on its own boot
clock, when it first saw each record, and counts the record as expired once it
has seen it unchanged for a whole TTL (see :func:`gitlease.lease.observed_lifetime_ms`).
The holder's TTL started before the record was visible to anyone, so the holder's
own clock always runs out first.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .clock import Now
from .errors import StoreError, UsageError
from .refname import PREFIX
from .store import (
    BROKEN_FOR_TESTS,
    STALE_LOCK_SECONDS,
    CompareAndSwapFailed,
    Location,
    Snapshot,
    Store,
    WriteOutcomeUnknown,
)

REMOTE_ENV = "GITLEASE_REMOTE"
CONFIG_KEY = "gitlease.remote"
#: A fetch or push that takes longer is stopped (a push's outcome is then settled).
NETWORK_TIMEOUT_SECONDS = float(os.environ.get("GITLEASE_REMOTE_TIMEOUT") or 60)
_REFSPEC = f"+{PREFIX}*:{PREFIX}*"
#: Rejections that mean "the ref was not what you expected" (or a racer held its lock):
#: nothing was written, decide again from a fresh fetch.
_RACE_REASONS = ("stale info", "fetch first", "atomic", "failed to update", "lock", "expected")
PRUNE_REFUSED = (
    "prune is not available with a remote store: the tombstones are what keep revisions "
    "increasing for every host"
)
#: git's words when it could not even read the remote's first answer: nothing was sent.
_NO_CONTACT = (
    "Could not read from remote repository",  # connect.c die_initial_contact (ssh, file)
    "does not appear to be a git repository",
    "unable to connect to",  # git://
    "unable to access",  # http(s), the first request
    "Could not resolve host",
)
_MIRROR = threading.local()  # whether this thread holds the mirror lock


def resolve(location: Location, explicit: str | None) -> tuple[str, str] | None:
    """(remote, why) for ``--remote``, ``GITLEASE_REMOTE`` or ``git config gitlease.remote``.

    An empty value turns the remote off (``--remote ''`` over a configured one).
    """
    if explicit is not None:
        return (explicit, "--remote") if explicit else None
    env = os.environ.get(REMOTE_ENV)
    if env is not None:
        return (env, REMOTE_ENV) if env else None
    configured = _configured_remote(location.git_dir)
    return (configured, f"git config {CONFIG_KEY}") if configured else None


def _configured_remote(git_dir: Path) -> str | None:
    """Run ``git config`` only when a config file mentions gitlease (most never do)."""
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    for path in (git_dir / "config", home / ".gitconfig", xdg / "git" / "config"):
        try:
            if b"gitlease" in path.read_bytes().lower():
                break
        except OSError:
            continue
    else:
        return None
    result = subprocess.run(
        ["git", "--git-dir", str(git_dir), "config", "--get", CONFIG_KEY],
        capture_output=True,
        text=True,
    )
    return result.stdout.strip() or None


class RemoteStore(Store):
    """The local store as this host's mirror and workspace; the remote as the coordinator."""

    def __init__(self, location: Location, remote: str, reason: str) -> None:
        super().__init__(location)
        self.remote = remote
        self.remote_reason = reason
        self.sightings = Sightings(self.git_dir / "worklease" / "sightings")

    # ----------------------------------------------------------------- reads

    def refresh(self) -> None:
        """Fetch the remote's claims into the mirror (one fetch at a time on this host)."""
        with self._mirror_lock():
            for attempt in range(5):
                result = self._network(
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "--no-write-fetch-head",
                    "--no-recurse-submodules",
                    "--no-auto-maintenance",
                    "--prune",
                    self.remote,
                    _REFSPEC,
                )
                if result is not None and result.returncode == 0:
                    return
                why = _stderr(result)
                if "lock" in why and attempt < 4:  # a killed fetch's lock, or git gc's
                    self._clear_stale_mirror_locks()
                    time.sleep(0.05 * 2**attempt)
                    continue
                raise StoreError(f"cannot fetch claims from the remote {self.remote}: {why}")

    def read(self, ref: str) -> Snapshot:
        return self.sightings.stamp([super().read(ref)], Now.read(), complete=False)[0]

    def read_all(self, prefix: str = PREFIX) -> list[Snapshot]:
        snaps = super().read_all(prefix)
        return self.sightings.stamp(snaps, Now.read(), complete=prefix == PREFIX)

    # ---------------------------------------------------------------- writes

    def compare_and_swap_many(
        self, updates: list[tuple[str, str | None, bytes]], message: str
    ) -> list[str]:
        """One atomic push with a lease per ref: all land or none; then mirror them here."""
        planned = [(ref, expected, self.write_blob(data)) for ref, expected, data in updates]
        args = ["push", "--atomic", "--porcelain", "--no-verify", "--no-recurse-submodules"]
        args.append(self.remote)
        if BROKEN_FOR_TESTS:  # the history tests' deliberately broken build: no compare at all
            args += [f"+{new}:{ref}" for ref, _, new in planned]
        else:
            args += [f"--force-with-lease={ref}:{expected or ''}" for ref, expected, _ in planned]
            args += [f"{new}:{ref}" for ref, _, new in planned]
        self._push(args, planned)
        self._mirror_unconditionally([(ref, new) for ref, _, new in planned], message)
        return [new for _, _, new in planned]

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        raise UsageError(PRUNE_REFUSED)

    def _push(self, args: list[str], planned: list[tuple[str, str | None, str]]) -> None:
        result = self._network(*args)
        statuses = _push_statuses(result.stdout if result is not None else b"")
        ours = [statuses.get(ref) for ref, _, _ in planned]
        if (
            result is not None
            and result.returncode == 0
            and all(s is not None and s[0] in "*+=" for s in ours)
        ):
            return  # "=": the ref already holds our new record (a retried push that had landed)
        rejected = [s for s in ours if s is not None and s[0] == "!"]
        if rejected:
            reasons = "; ".join(sorted({s[1] for s in rejected}))
            if any(word in reasons for word in _RACE_REASONS):
                raise CompareAndSwapFailed(
                    f"the remote {self.remote} refused the update ({reasons}): "
                    "a claim changed there meanwhile"
                )
            raise StoreError(f"the remote {self.remote} refused the update: {reasons}")
        why = _stderr(result)
        if not statuses and any(words in why for words in _NO_CONTACT):
            raise StoreError(f"cannot reach the remote {self.remote}: {why}")
        self._settle(planned, why)

    def _settle(self, planned: list[tuple[str, str | None, str]], why: str) -> None:
        """The push ended without a verdict: fetch and look for our own new records."""
        for attempt in range(3):
            try:
                self.refresh()
                break
            except StoreError as exc:
                if attempt == 2:
                    raise WriteOutcomeUnknown(
                        f"the push to {self.remote} was interrupted ({why}) and the remote "
                        f"cannot be read to settle it ({exc}); compare `gitlease show` with "
                        "your receipt once it can"
                    ) from None
                time.sleep(0.5)
        current = {ref: Store.read(self, ref).oid for ref, _, _ in planned}
        landed = [current[ref] == new for ref, _, new in planned]
        if all(landed):
            return
        moved = [ref for ref, expected, _ in planned if current[ref] != expected]
        if moved and not any(landed):
            raise CompareAndSwapFailed(
                f"the push to {self.remote} was interrupted ({why}) and {moved[0]} has "
                "moved on since: this write did not land and never can"
            )
        raise WriteOutcomeUnknown(
            f"the push to {self.remote} was interrupted ({why}); its records are not at the "
            "remote now, but a server that received them may still apply them. Compare "
            "`gitlease show` with your receipt, then retry"
        )

    def _mirror_unconditionally(self, pairs: list[tuple[str, str]], message: str) -> None:
        """Point the mirror at what the remote now holds, so the commit hooks see it at once.

        Best effort: the remote already holds the records, and the next fetch
        corrects the mirror; failing here must not report a landed write as failed.
        """
        import pygit2

        with suppress(StoreError), self._mirror_lock():
            for ref, _ in pairs:
                self._ensure_reflog(ref)
            try:
                with self.repo.transaction() as tx:
                    for ref, _ in sorted(pairs):
                        self._lock_ref(tx, ref)
                    for ref, oid in pairs:
                        tx.set_target(ref, oid, message=message)
            except (pygit2.GitError, OSError):
                pass

    # ----------------------------------------------------------------- plumbing

    def _network(self, *args: str) -> subprocess.CompletedProcess[bytes] | None:
        """Run a git command that talks to the remote; None if it had to be stopped."""
        env = dict(os.environ, GIT_DIR=str(self.git_dir), GIT_TERMINAL_PROMPT="0")
        for name in ("GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE"):
            env.pop(name, None)
        try:
            return subprocess.run(
                ["git", *args],
                capture_output=True,
                env=env,
                stdin=subprocess.DEVNULL,
                timeout=NETWORK_TIMEOUT_SECONDS,
            )
        except subprocess.TimeoutExpired:
            return None
        except OSError as exc:
            raise StoreError(f"cannot run git: {exc}") from None

    @contextmanager
    def _mirror_lock(self) -> Iterator[None]:
        """One writer of the mirror at a time on this host (fetches and post-push updates)."""
        if getattr(_MIRROR, "held", False):
            yield
            return
        path = self.git_dir / "worklease" / "mirror.lock"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open {path}: {exc.strerror}") from None
        try:
            deadline = time.monotonic() + NETWORK_TIMEOUT_SECONDS + 5
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise StoreError(f"{path} stayed locked: is a fetch hung?") from None
                    time.sleep(0.005)
            _MIRROR.held = True
            yield
        finally:
            _MIRROR.held = False
            os.close(fd)

    def _clear_stale_mirror_locks(self) -> None:
        """Under the mirror lock: lock files of the mirror's refs left by a killed fetch."""
        root = self.git_dir / PREFIX.rstrip("/")
        candidates = list(root.rglob("*.lock")) if root.is_dir() else []
        candidates.append(self.git_dir / "packed-refs.lock")
        for lock in candidates:
            with suppress(OSError):
                age = time.time() - lock.stat().st_mtime
                if age > STALE_LOCK_SECONDS or age < -1.0:
                    lock.unlink()


def _push_statuses(out: bytes) -> dict[str, tuple[str, str]]:
    """``git push --porcelain`` lines: destination ref -> (flag, summary)."""
    statuses = {}
    for line in out.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0] in ("*", "+", "-", "=", "!", " "):
            statuses[parts[1].rpartition(":")[2]] = (parts[0], parts[2])
    return statuses


def _stderr(result: subprocess.CompletedProcess[bytes] | None) -> str:
    if result is None:
        return f"no answer within {NETWORK_TIMEOUT_SECONDS:g}s"
    text = result.stderr.decode("utf-8", "replace").strip()
    if result.returncode < 0:
        return f"git was killed by signal {-result.returncode}" + (f": {text}" if text else "")
    return text or f"git exited {result.returncode}"


class Sightings:
    """When this host first saw each record, on its own boot clock (``first_seen_ms``).

    One small text file per store (``ref oid boot first_seen_ms`` a line), changed
    under an ``flock`` and replaced atomically. Losing it only makes this host
    wait a whole TTL again before taking over another host's record.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def stamp(self, snaps: list[Snapshot], now: Now, *, complete: bool) -> list[Snapshot]:
        """The snapshots with ``first_seen_ms``; remember new sightings (and, when the list
        is ``complete``, forget refs that are gone)."""
        if not any(s.oid for s in snaps) and not complete:
            return snaps
        with self._locked():
            known = self._load()
            changed = False
            out = []
            for snap in snaps:
                if snap.oid is None:
                    changed |= known.pop(snap.ref, None) is not None
                    out.append(snap)
                    continue
                entry = known.get(snap.ref)
                if entry is None or entry[0] != snap.oid or entry[1] != now.boot:
                    entry = (snap.oid, now.boot, now.boot_ms)
                    known[snap.ref] = entry
                    changed = True
                out.append(snap.replace(first_seen_ms=entry[2]))
            if complete:
                present = {s.ref for s in snaps}
                for ref in [r for r in known if r not in present]:
                    del known[ref]
                    changed = True
            if changed:
                self._save(known)
        return out

    def _load(self) -> dict[str, tuple[str, str, int]]:
        known = {}
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror}") from None
        for line in text.splitlines():
            parts = line.split(" ")
            if len(parts) == 4 and parts[3].lstrip("-").isdigit():
                known[parts[0]] = (parts[1], parts[2], int(parts[3]))
        return known

    def _save(self, known: dict[str, tuple[str, str, int]]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(f"{ref} {oid} {boot} {ms}\n" for ref, (oid, boot, ms) in known.items())
            os.replace(tmp, self.path)
        except OSError as exc:
            with suppress(OSError):
                tmp.unlink()
            raise StoreError(f"cannot write {self.path}: {exc.strerror}") from None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open {lock}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
