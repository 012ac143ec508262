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
from .errors import GitleaseError, StoreError, UsageError
from .refname import PREFIX
from .store import (
    BROKEN_FOR_TESTS,
    STALE_LOCK_SECONDS,
    CompareAndSwapFailed,
    Location,
    Snapshot,
    Store,
    WriteOutcomeUnknown,
    flock_polling,
    open_lock_file,
    stderr_text,
)

REMOTE_ENV = "GITLEASE_REMOTE"
CONFIG_KEY = "gitlease.remote"
#: A fetch or push that takes longer is stopped (a push's outcome is then settled).
NETWORK_TIMEOUT_SECONDS = float(os.environ.get("GITLEASE_REMOTE_TIMEOUT") or 60)
_REFSPEC = f"+{PREFIX}*:{PREFIX}*"
#: ``git push --porcelain`` reasons for a refused ref. A race: the ref was not what we
#: expected, or a racer held its lock (receive-pack: "atomic transaction failed"); decide
#: again from a fresh fetch. A sibling: refused only because another ref of the same atomic
#: push was. No verdict: the server did not say (settle by looking). Anything else is the
#: server's policy (a hook, a hidden or protected ref).
_RACE_REASONS = ("stale info", "fetch first", "atomic transaction failed", "failed to update",
                 "failed to lock", "cannot lock")  # fmt: skip
_SIBLING_REASONS = ("atomic push failed", "atomic push failure")
_NO_VERDICT = ("remote failure", "remote failed to report")
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
_MIRROR = threading.local()  # the stores whose mirror lock this thread holds


def resolve(location: Location, explicit: str | None) -> tuple[str, str] | None:
    """(remote, why) for ``--remote``, ``GITLEASE_REMOTE`` or ``git config gitlease.remote``.

    An empty value turns the remote off (``--remote ''`` over a configured one).
    """
    if explicit is not None:
        chosen = (explicit, "--remote")
    elif os.environ.get(REMOTE_ENV) is not None:
        chosen = (os.environ[REMOTE_ENV], REMOTE_ENV)
    else:
        chosen = (_configured_remote(location.git_dir), f"git config {CONFIG_KEY}")
    if not chosen[0]:
        return None
    if chosen[0].startswith("-"):  # it is passed to git fetch and git push as an argument
        raise UsageError(f"bad remote {chosen[0]!r} (from {chosen[1]}): it cannot start with -")
    return _absolute_if_path(chosen[0]), chosen[1]


def _configured_remote(git_dir: Path) -> str:
    """``git config gitlease.remote`` as git resolves it (every file, includes, environment).

    Always asked (a few milliseconds): a store that missed its remote would decide
    alone, and judge other hosts' records by the rules of a single host.
    """
    try:
        result = subprocess.run(
            ["git", "--git-dir", str(git_dir), "config", "--get", CONFIG_KEY],
            capture_output=True,
            text=True,
        )
    except OSError as exc:
        raise StoreError(f"cannot run git: {exc}") from None
    if result.returncode not in (0, 1):  # 1: not set
        raise StoreError(f"cannot read git config {CONFIG_KEY}: {result.stderr.strip()}")
    return result.stdout.strip()


def _absolute_if_path(remote: str) -> str:
    """A relative path names the same repository for every process (``exec``'s command too)."""
    if "://" in remote or os.path.isabs(remote) or not os.path.exists(remote):
        return remote
    return os.path.abspath(remote)


def redact(remote: str) -> str:
    """The remote for messages: a password or token in a URL is never shown."""
    scheme, sep, rest = remote.partition("://")
    if not sep:
        return remote
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return remote
    user = authority.rpartition("@")[0].partition(":")[0]
    return f"{scheme}://{user}:***@{authority.rpartition('@')[2]}{slash}{path}"


class RemoteStore(Store):
    """The local store as this host's mirror and workspace; the remote as the coordinator."""

    def __init__(self, location: Location, remote: str, reason: str) -> None:
        super().__init__(location)
        self.remote = remote
        self.remote_reason = reason
        self.shown = redact(remote)  # for messages
        self.sightings = Sightings(self.git_dir / "worklease" / "sightings")
        self._deadline: float | None = None  # see within()

    @contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Network calls made inside (fetch, push, settling) end by then, or count as
        unanswered: exec's heartbeat must not outlast the claim it renews."""
        outer = self._deadline
        self._deadline = time.monotonic() + seconds
        if outer is not None:
            self._deadline = min(self._deadline, outer)
        try:
            yield
        finally:
            self._deadline = outer

    def _seconds_left(self, limit: float) -> float:
        if self._deadline is None:
            return limit
        return min(limit, self._deadline - time.monotonic())

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
                locked = "cannot lock ref" in why or ".lock': File exists" in why
                if locked and attempt < 4:  # a killed fetch's lock, or git gc's for a moment
                    self._clear_stale_mirror_locks()
                    time.sleep(0.05 * 2**attempt)
                    continue
                raise StoreError(f"cannot fetch claims from the remote {self.shown}: {why}")

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
        self._mirror_compare_and_swap(planned, message)
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
        reasons = [s[1] for s in ours if s is not None and s[0] == "!"]
        verdict = _rejection(reasons)
        if verdict == "race":
            raise CompareAndSwapFailed(
                f"the remote {self.shown} refused the update ({'; '.join(sorted(set(reasons)))})"
                ": a claim changed there meanwhile"
            )
        if verdict == "policy":
            policy = sorted({r for r in reasons if _classify(r) == "policy"})
            raise StoreError(f"the remote {self.shown} refused the update: {'; '.join(policy)}")
        why = _stderr(result)
        if not statuses and _no_contact(result):
            raise StoreError(f"cannot reach the remote {self.shown}: {why}")
        self._settle(planned, why)

    def _settle(self, planned: list[tuple[str, str | None, str]], why: str) -> None:
        """The push ended without a verdict: fetch and look for our own new records."""
        for attempt in range(3):
            try:
                self.refresh()
                break
            except StoreError as exc:
                if attempt == 2 or self._seconds_left(1.0) < 1.0:
                    raise WriteOutcomeUnknown(
                        f"the push to {self.shown} was interrupted ({why}) and the remote "
                        f"cannot be read to settle it ({exc}); compare `gitlease show` with "
                        "your receipt once it can"
                    ) from None
                time.sleep(0.5)
        found = [self._push_outcome(ref, expected, new) for ref, expected, new in planned]
        if all(f == "landed" for f in found):
            return
        if all(f == "not landed" for f in found):
            raise CompareAndSwapFailed(
                f"the push to {self.shown} was interrupted ({why}) and the remote has moved "
                "on from the record it was based on: this write did not land and never can"
            )
        raise WriteOutcomeUnknown(
            f"the push to {self.shown} was interrupted ({why}); its records are not at the "
            "remote now, but a server that received them may still apply them. Compare "
            "`gitlease show` with your receipt, then retry"
        )

    def _push_outcome(self, ref: str, expected: str | None, new: str) -> str:
        """Whether ``new`` is in the ref's history at the remote: "landed", "not landed"
        (the history passes from ``expected`` to another record), or "pending" (the ref
        is unchanged: the write may still be applied) or "unknown".

        Another host may have written after us before we looked (a release, then an
        acquire), so the current record's chain of ``previous`` ids is followed back.
        """
        from .record import parse

        oid = Store.read(self, ref).oid
        if oid == expected:
            return "pending"
        for _ in range(1000):
            if oid == new:
                return "landed"
            if oid == expected or oid is None:
                return "not landed"
            data, _problem = self.read_blob(oid)
            if data is None:
                return "unknown"  # a record this host never fetched
            try:
                oid = parse(data).previous
            except StoreError:
                return "unknown"
        return "unknown"

    def _mirror_compare_and_swap(
        self, pairs: list[tuple[str, str | None, str]], message: str
    ) -> None:
        """Point the mirror at what the remote now holds, so the commit hooks see it at once:
        each ref that still shows the record the push replaced (a fetch in between may
        already have brought something newer, which is left alone).

        Best effort: the remote already holds the records, and the next fetch
        corrects the mirror; failing here must not report a landed write as failed.
        """
        import pygit2

        with suppress(GitleaseError), self._mirror_lock():  # e.g. a young lock that stays
            for ref, _, _ in pairs:
                self._ensure_reflog(ref)
            try:
                with self.repo.transaction() as tx:
                    for ref, _, _ in sorted(pairs):
                        self._lock_ref(tx, ref)
                    for ref, expected, new in pairs:
                        if self._read_pygit2(ref).oid == expected:
                            tx.set_target(ref, new, message=message)
            except (pygit2.GitError, OSError):
                pass

    # ----------------------------------------------------------------- plumbing

    def _network(self, *args: str) -> subprocess.CompletedProcess[bytes] | None:
        """Run a git command that talks to the remote; None if it had to be stopped."""
        timeout = self._seconds_left(NETWORK_TIMEOUT_SECONDS)
        if timeout <= 0:
            return None
        env = dict(os.environ, GIT_DIR=str(self.git_dir), GIT_TERMINAL_PROMPT="0")
        for name in ("GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE"):
            env.pop(name, None)
        try:
            return subprocess.run(
                ["git", *args],
                capture_output=True,
                env=env,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return None
        except OSError as exc:
            raise StoreError(f"cannot run git: {exc}") from None

    @contextmanager
    def _mirror_lock(self) -> Iterator[None]:
        """One writer of the mirror at a time on this host (fetches and post-push updates)."""
        held: set[str] = _MIRROR.__dict__.setdefault("held", set())
        if str(self.git_dir) in held:
            yield
            return
        path = self.git_dir / "worklease" / "mirror.lock"
        fd = open_lock_file(path)
        try:
            if not flock_polling(
                fd, time.monotonic() + self._seconds_left(NETWORK_TIMEOUT_SECONDS + 5)
            ):
                raise StoreError(f"{path} stayed locked: is a fetch hung?")
            held.add(str(self.git_dir))
            yield
        finally:
            held.discard(str(self.git_dir))
            os.close(fd)

    def _clear_stale_mirror_locks(self) -> None:
        """Under the mirror lock: lock files of the mirror's refs left by a killed fetch.

        (``packed-refs.lock`` is never touched: a slow ``git pack-refs`` may hold it.)
        """
        root = self.git_dir / PREFIX.rstrip("/")
        for lock in root.rglob("*.lock") if root.is_dir() else []:
            with suppress(OSError):
                age = time.time() - lock.stat().st_mtime
                if age > STALE_LOCK_SECONDS or age < -1.0:
                    lock.unlink()


def _no_contact(result: subprocess.CompletedProcess[bytes] | None) -> bool:
    """git itself (not the server's ``remote:`` lines) said it never got the remote's
    first answer, and exited on its own: nothing was sent."""
    if result is None or result.returncode <= 0:
        return False
    text = result.stderr.decode("utf-8", "replace")
    own = "\n".join(line for line in text.splitlines() if not line.startswith("remote:"))
    return any(words in own for words in _NO_CONTACT)


def _classify(reason: str) -> str:
    if any(words in reason for words in _NO_VERDICT):
        return "unknown"
    if any(words in reason for words in _SIBLING_REASONS):
        return "sibling"
    if any(words in reason for words in _RACE_REASONS):
        return "race"
    return "policy"


def _rejection(reasons: list[str]) -> str | None:
    """One verdict for an atomic push's refused refs: race, policy, unknown, or None."""
    kinds = {_classify(r) for r in reasons}
    for verdict in ("unknown", "race", "policy"):
        if verdict in kinds:
            return verdict
    return "race" if kinds else None  # only siblings: nothing was written


def _push_statuses(out: bytes) -> dict[str, tuple[str, str]]:
    """``git push --porcelain`` lines: destination ref -> (flag, summary)."""
    statuses = {}
    for line in out.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0] in ("*", "+", "-", "=", "!", " "):
            statuses[parts[1].rpartition(":")[2]] = (parts[0], parts[2])
    return statuses


def _stderr(result: subprocess.CompletedProcess[bytes] | None) -> str:
    """The store's wording, plus the two ways a network call can end without git's own."""
    if result is None:
        return "no answer in time"
    if result.returncode < 0:
        text = result.stderr.decode("utf-8", "replace").strip()
        return f"git was killed by signal {-result.returncode}" + (f": {text}" if text else "")
    return stderr_text(result)


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
        fd = open_lock_file(self.path.with_name(self.path.name + ".lock"))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
