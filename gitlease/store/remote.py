"""A store whose coordinator is a git remote, for agents on several hosts (docs/remote.md).

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
has seen it unchanged for a whole TTL (see :func:`gitlease.model.claim.observed_lifetime_ms`).
The holder's TTL started before the record was visible to anyone, so the holder's
own clock always runs out first.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

from .._util.files import flocked, is_stale, lock_age
from ..errors import (
    CompareAndSwapFailed,
    GitleaseError,
    StoreError,
    UsageError,
    WriteOutcomeUnknown,
)
from ..gitio import layout
from ..gitio.gitread import Snapshot, git_env, with_settings
from ..model.clock import Now
from ..model.refname import LEAF_SUFFIX, PREFIX, SCOPES_INDEX_REF
from ..model.sightings import Sightings
from .local import Store
from .pushreply import (
    before_pack,
    checked_before_sending,
    classify,
    http_refusal,
    missing_capability,
    network_error,
    push_statuses,
    rejection,
    server_said,
)

if TYPE_CHECKING:
    from .location import Location

#: A fetch or push that takes longer is stopped (a push's outcome is then settled).
NETWORK_TIMEOUT_SECONDS = float(os.environ.get("GITLEASE_REMOTE_TIMEOUT") or 60)
#: A write that renews or releases this host's live claim waits for the push no longer
#: than the claim has left; settling a push that got no answer then takes at most this
#: much more (or what the claim still has, if more): the answer comes when the claim's
#: time is known to be up, not a minute later.
SETTLE_SECONDS = 2.0
#: Every fetch of the remote's claims: quiet, nothing else fetched or run.
_FETCH = (
    "fetch",
    "--quiet",
    "--no-tags",
    "--no-write-fetch-head",
    "--no-recurse-submodules",
    "--no-auto-maintenance",
)
_REFSPEC = f"+{PREFIX}*:{PREFIX}*"
#: At most this many records of a chain are fetched one by one to settle a push (each is a
#: round trip); a longer chain is left ambiguous.
_CHAIN_FETCHES = 64
PRUNE_REFUSED = (
    "prune is not available with a remote store: the tombstones are what keep revisions "
    "increasing for every host"
)
#: Transports on which git sends each push exactly once (git's HTTP client may send its
#: POST again; so may a remote helper, for all we know).
_SENT_ONCE = ("ssh://", "git+ssh://", "ssh+git://", "git://", "file://")


def redact(remote: str) -> str:
    """The remote for messages: a password or token in a URL is never shown.

    ``user:password@`` becomes ``user:***@``. A user name without a password is
    kept (``ssh://git@host``), unless it looks like a token itself (GitHub and
    GitLab accept one in its place): long, or with a known token prefix.
    """
    scheme, sep, rest = remote.partition("://")
    if not sep:
        return remote
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return remote
    userinfo, _, host = authority.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    if colon:
        shown = f"{user}:***"
    elif len(user) > 24 or user.lower().startswith(_TOKEN_PREFIXES):
        shown = "***"
    else:
        shown = user
    return f"{scheme}://{shown}@{host}{slash}{path}"


_TOKEN_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "glt_")


class RemoteStore(Store):
    """The local store as this host's mirror and workspace; the remote as the coordinator."""

    remote: str
    #: Each look of a waiter first in line fetches: at most one every second.
    wait_poll_seconds = 1.0

    def __init__(self, location: Location, remote: str, reason: str) -> None:
        super().__init__(location)
        self.remote = remote
        self.remote_reason = reason
        self.shown = redact(remote)  # for messages
        self.sightings = Sightings(layout.sightings(self.git_dir))
        #: The repository's own settings for reaching remotes (ssh command, credential
        #: helpers, http.*): git in the store would not see them otherwise.
        self.access = location.config.access if location.config is not None else ()
        self._deadline: float | None = None  # see within()
        self._url: str | None = None  # the push URL, once asked (see _may_replay)
        #: when a refused push was settled by a fetch: the retry that follows needs no other
        self._fetched_after_refusal: float | None = None

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
        """Fetch the remote's claims into the mirror (one fetch at a time on this host).

        Within a second of a refused push settled by a fetch (and before the next
        push), the retry and its answer come from that fetch: it is as fresh as any,
        and the compare-and-swap still checks whatever is decided from it.
        """
        settled = self._fetched_after_refusal
        if settled is not None and time.monotonic() - settled < 1.0:
            return
        self._fetched_after_refusal = None
        with self._mirror_lock():
            for attempt in range(5):
                result = self._network(
                    *_FETCH,
                    "--prune",
                    self.remote,
                    _REFSPEC,
                )
                if result is not None and result.returncode == 0:
                    return
                why = network_error(result)
                locked = "cannot lock ref" in why or ".lock': File exists" in why
                if locked and attempt < 4:  # a killed fetch's lock, or git gc's for a moment
                    self._clear_stale_mirror_locks()
                    time.sleep(0.05 * 2**attempt)
                    continue
                raise StoreError(f"cannot fetch claims from the remote {self.shown}: {why}")

    def read(self, ref: str) -> Snapshot:
        """The mirror's value of ``ref``, stamped with when this host first saw it."""
        return self.sightings.stamp([super().read(ref)], Now.read(), complete=False)[0]

    def read_many(self, refs: Sequence[str]) -> list[Snapshot]:
        """The mirror's values of ``refs``, stamped with first sightings."""
        return self.sightings.stamp(super().read_many(refs), Now.read(), complete=False)

    def read_all(self, prefix: str = PREFIX) -> list[Snapshot]:
        """Every mirrored ref under ``prefix``, stamped with first sightings."""
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
        args += [f"--force-with-lease={ref}:{expected or ''}" for ref, expected, _ in planned]
        args += [f"{new}:{ref}" for ref, _, new in planned]
        self._push(args, planned, self._claim_left(updates))
        self._mirror_compare_and_swap(planned, message)
        return [new for _, _, new in planned]

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        """Never: deleting a ref here would delete only this host's mirror of it."""
        self.ensure_prunable()

    # ------------------------------------------------------ what differs for callers

    def recheck_refusal(self) -> bool:
        """The mirror may be behind the remote: refuse only on a fresh look. (A write from
        a stale look is safe anyway: the push's lease refuses it.)"""
        self.refresh()
        return True

    def outcome_readable(self, error: BaseException) -> bool:
        """A refused push (or a store error) left the mirror as the remote has it; an
        interrupted one did not, and only settling with ``show`` can tell."""
        return isinstance(error, (CompareAndSwapFailed, StoreError))

    def begin_command(self) -> None:
        """A new command looks afresh: a refusal settled by an earlier command's fetch
        answers no read of this one (see :meth:`refresh`)."""
        self._fetched_after_refusal = None

    def child_env(self) -> dict[str, str]:
        """The command's own gitlease calls use the same coordinator."""
        return {"GITLEASE_REMOTE": self.remote}

    def ensure_prunable(self) -> None:
        """The tombstones are what keep revisions increasing for every host."""
        raise UsageError(PRUNE_REFUSED)

    def repair_refusal(self, *, parsed: bool) -> str | None:
        """An unparseable record's revision is unknown, and this host may not have seen
        every earlier one: a tombstone written from here could reuse a revision."""
        if parsed:
            return None
        return (
            "cannot be repaired through a remote (its revision is unknown, and this host may "
            "not have seen every earlier one): fix or delete the ref at the remote by hand"
        )

    def _claim_left(self, updates: list[tuple[str, str | None, bytes]]) -> float | None:
        """Seconds the live claims of this boot that these updates replace have left on
        this host's clock (the least of them), or None when none is replaced (an acquire
        of a free or expired resource): a heartbeat or release must not wait for the
        remote past the moment its claim ends."""
        from ..model.record import RELEASED, parse

        now = Now.read()
        lefts: list[int] = []
        for _ref, expected, _data in updates:
            if expected is None:
                continue
            data, _problem = self.read_blob(expected)
            if data is None:
                continue
            try:
                record = parse(data)
            except StoreError:
                continue
            if record.boot_id == now.boot and record.state != RELEASED:
                lefts.append(record.boot_expires_ms - now.boot_ms)
        if not lefts or min(lefts) <= 0:
            return None
        return min(lefts) / 1000

    def _push(
        self,
        args: list[str],
        planned: list[tuple[str, str | None, str]],
        claim_left: float | None = None,
    ) -> None:
        """Run the push and decide what it did: return if every record landed, else raise.

        A refusal is believed only once it cannot hide a landed write: a refusal
        by the server (not git's own check before sending) is settled by looking
        first, since on HTTP it may answer a second copy of a push that landed.
        ``claim_left``: the push waits no longer (see :meth:`_claim_left`); settling
        it then gets :data:`SETTLE_SECONDS` more at most.
        """
        self._fetched_after_refusal = None
        ends = None if claim_left is None else time.monotonic() + max(claim_left, 0.1)
        with self._until(ends):
            result = self._network(*args)
        settle_by = None if ends is None else max(ends, time.monotonic() + SETTLE_SECONDS)
        with self._until(settle_by):
            self._decide(planned, result, ends)

    @contextmanager
    def _until(self, ends: float | None) -> Iterator[None]:
        """Network calls inside end by the monotonic time ``ends`` (None: no new bound)."""
        if ends is None:
            yield
            return
        with self.within(ends - time.monotonic()):
            yield

    def _decide(
        self,
        planned: list[tuple[str, str | None, str]],
        result: subprocess.CompletedProcess[bytes] | None,
        claim_ends: float | None,
    ) -> None:
        """What the push did, from git's answer, and a fetch where that does not tell."""
        statuses = push_statuses(result.stdout if result is not None else b"")
        ours = [statuses.get(ref) for ref, _, _ in planned]
        if (
            result is not None
            and result.returncode == 0
            and all(s is not None and s[0] in "*+=" for s in ours)
        ):
            return  # "=": the ref already holds our new record (a retried push that had landed)
        reasons = [s[1] for s in ours if s is not None and s[0] == "!"]
        verdict = rejection(reasons)
        why = network_error(result)
        if result is None and claim_ends is not None and time.monotonic() >= claim_ends:
            why = (
                "no answer within the time the claim had left on this host's clock; unless "
                "this write landed, the claim has run out"
            )
        if verdict == "race":
            refused = "; ".join(sorted(set(reasons)))
            if all(checked_before_sending(r) for r in reasons):
                raise CompareAndSwapFailed(
                    f"the remote {self.shown} refused the update ({refused}): a claim changed "
                    "there meanwhile"
                )  # git's own check against the remote's refs: nothing was sent
            if self._settle_refusal(planned, f"refused the update ({refused})"):
                return
            raise CompareAndSwapFailed(
                f"the remote {self.shown} refused the update ({refused}): a claim changed "
                "there meanwhile"
            )
        if verdict == "policy":
            policy = "; ".join(sorted({r for r in reasons if classify(r) == "policy"}))
            said = server_said(result)
            if self._may_replay() and self._settle_refusal(planned, policy, policy=True):
                return
            raise StoreError(f"the remote {self.shown} refused the update: {policy}{said}")
        if not statuses:
            lacking = missing_capability(result)
            if lacking is not None:
                raise StoreError(
                    f"the remote {self.shown} does not support {lacking}: nothing was sent. "
                    "gitlease needs it to write every claim's refs in one compare-and-swap; "
                    "use a server that offers it (see docs/remote.md, which servers work)"
                )
            before = before_pack(result)
            if before == "transport":
                self._settle_unsent(planned, why)
                return
            if before == "unreachable":
                raise StoreError(f"cannot reach the remote {self.shown}: {why}")
            if before == "refused":
                raise StoreError(
                    f"the remote {self.shown} refused the push before anything was sent: {why}"
                )
        self._settle(planned, why, http_refusal(result))

    def _settle_refusal(
        self, planned: list[tuple[str, str | None, str]], what: str, *, policy: bool = False
    ) -> bool:
        """A refusal by the server: True if our records are at the remote all the same
        (an earlier copy of this push landed), False if the refusal stands;
        WriteOutcomeUnknown if they may still land.

        git's HTTP client sends a POST again when its connection died before any byte
        of the answer came (libcurl, on a reused connection); the server then refuses
        the copy because the first one landed. Where pushes are sent once, a refusal
        is final. A refusal by the server's ``policy`` would have met the first copy
        too: only one that landed all the same overturns it.
        """
        replay = self._may_replay()
        waits = 4 if replay and not policy else 1
        for attempt in range(waits):
            if attempt:
                time.sleep(0.25 * attempt)  # a first copy still being applied, or a racer's
            try:
                self.refresh()
            except StoreError as exc:
                if not replay or policy:
                    return False  # nothing of it can land
                raise WriteOutcomeUnknown(
                    f"the remote {self.shown} {what}, but an earlier copy of this push may "
                    f"have landed and the remote cannot be read to tell ({exc}); compare "
                    "`gitlease show` with your receipt once it can"
                ) from None
            found = set(self._outcomes(planned))
            if found == {"landed"}:
                return True
            if found == {"not landed"} or not replay or policy:
                self._fetched_after_refusal = time.monotonic()  # the retry decides from it
                return False
        raise WriteOutcomeUnknown(
            f"the remote {self.shown} {what}, and an earlier copy of this push (git's HTTP "
            "client sends one again when an answer is lost) may still land. Compare "
            "`gitlease show` with your receipt, then retry"
        )

    def _settle_unsent(self, planned: list[tuple[str, str | None, str]], why: str) -> None:
        """The transport failed before git read the server's first answer: no pack went out.
        Look all the same (a fetch), and say what happened: the connection failed, the
        server refused nothing."""
        what = (
            f"the push to {self.shown} did not reach the server: the transport failed before "
            f"git read the server's first answer, so nothing was sent ({why})"
        )
        try:
            self.refresh()
        except StoreError as exc:
            raise StoreError(
                f"{what}; nothing of this write is at the remote, and none can land (the "
                f"remote cannot be read now either: {exc})"
            ) from None
        found = set(self._outcomes(planned))
        if found == {"landed"}:
            return
        if found <= {"pending", "not landed"}:
            raise StoreError(f"{what}; a fetch shows nothing of this write is at the remote")
        raise WriteOutcomeUnknown(
            f"{what}, yet a fetch cannot tell whether this write is at the remote. Compare "
            "`gitlease show` with your receipt, then retry"
        )

    def _settle(
        self, planned: list[tuple[str, str | None, str]], why: str, refused: str | None = None
    ) -> None:
        """The push ended without a verdict: fetch and look for our own new records.

        ``refused``: the HTTP status by which the server refused the request that
        carried the pack (401, 403, 404...): if nothing of it is there, it is STORE.
        """
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
        found = self._outcomes(planned)
        if all(f == "landed" for f in found):
            return
        if all(f == "not landed" for f in found):
            raise CompareAndSwapFailed(
                f"the push to {self.shown} was interrupted ({why}) and the remote has moved "
                "on from the record it was based on: this write did not land and never can"
            )
        if refused is not None and all(f in ("pending", "not landed") for f in found):
            raise StoreError(f"the remote {self.shown} refused the push (HTTP {refused}): {why}")
        raise WriteOutcomeUnknown(
            f"the push to {self.shown} was interrupted ({why}); its records are not at the "
            "remote now, but a server that received them may still apply them. Compare "
            "`gitlease show` with your receipt, then retry"
        )

    def _may_replay(self) -> bool:
        """Whether git may have sent this push more than once (see _settle_refusal)."""
        url = self._push_url().lower()
        if url.startswith(_SENT_ONCE):
            return False
        return "://" in url or "::" in url  # http(s), or a remote helper; not a path or host:path

    def _push_url(self) -> str:
        if self._url is None:
            self._url = self.remote
            if "://" not in self.remote and "::" not in self.remote:
                result = self._local_git("remote", "get-url", "--push", self.remote)
                if result is not None and result.returncode == 0:  # a configured remote's URL
                    self._url = result.stdout.decode("utf-8", "replace").strip() or self.remote
        return self._url

    def _local_git(self, *args: str) -> subprocess.CompletedProcess[bytes] | None:
        try:
            return subprocess.run(
                ["git", "--git-dir", str(self.git_dir), *args],
                capture_output=True,
                stdin=subprocess.DEVNULL,
            )
        except OSError:
            return None

    def _outcomes(self, planned: list[tuple[str, str | None, str]]) -> list[str]:
        """:meth:`_push_outcome` of each record the push carried. A ref that holds no record
        (the scope index riding on an acquire, :data:`SCOPES_INDEX_REF`) has no chain to
        follow, and needs none: the push was atomic, so the records tell for it. Once it
        holds neither what the push expected nor what it wrote, the push can never land
        (its lease cannot match again): records still "pending" are then "not landed"."""
        found = []
        closed = False
        for ref, expected, new in planned:
            if ref.endswith(LEAF_SUFFIX):
                found.append(self._push_outcome(ref, expected, new))
            else:
                closed |= Store.read(self, ref).oid not in (expected, new)
        return ["not landed" if closed and f == "pending" else f for f in found]

    def _push_outcome(self, ref: str, expected: str | None, new: str) -> str:
        """Whether ``new`` is in the ref's history at the remote: "landed", "not landed"
        (the history passes from ``expected`` to another record), or "pending" (the ref
        is unchanged: the write may still be applied) or "unknown".

        Another host may have written after us before we looked (a release, then an
        acquire), so the current record's chain of ``previous`` ids is followed back.
        Records of that chain this host never fetched (they came and went at the remote
        meanwhile) are fetched by their ids: the server still has them until its ``git
        gc``, and protocol v2 serves any object asked for. Without them a write that
        provably did not land would read as ambiguous.
        """
        from ..model.record import parse

        oid = Store.read(self, ref).oid
        if oid == expected:
            return "pending"
        fetched = 0
        for _ in range(1000):
            if oid == new:
                return "landed"
            if oid == expected or oid is None:
                return "not landed"
            data, _problem = self.read_blob(oid)
            if data is None and fetched < _CHAIN_FETCHES and self._fetch_object(oid):
                fetched += 1
                data, _problem = self.read_blob(oid)
            if data is None:
                return "unknown"  # a record this host never saw, and the remote would not give
            try:
                oid = parse(data).previous
            except StoreError:
                return "unknown"
        return "unknown"

    def _fetch_object(self, oid: str) -> bool:
        """Fetch one record by its id into the local objects (no ref moves): True if it came."""
        result = self._network(*_FETCH, self.remote, oid)
        return result is not None and result.returncode == 0

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
                if ref != SCOPES_INDEX_REF:  # (its history is no claim's: no reflog)
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
        env = with_settings(git_env(self.git_dir, GIT_TERMINAL_PROMPT="0"), self.access)
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
        path = layout.mirror_lock(self.git_dir)

        def busy() -> StoreError:
            return StoreError(f"{path} stayed locked: is a fetch hung?")

        with flocked(path, wait=self._seconds_left(NETWORK_TIMEOUT_SECONDS + 5), busy=busy):
            yield

    def _clear_stale_mirror_locks(self) -> None:
        """Under the mirror lock: lock files of the mirror's refs left by a killed fetch.

        (``packed-refs.lock`` is never touched: a slow ``git pack-refs`` may hold it.)
        """
        root = self.git_dir / PREFIX.rstrip("/")
        for lock in root.rglob("*.lock") if root.is_dir() else []:
            age = lock_age(lock)
            if age is not None and is_stale(age):
                with suppress(OSError):
                    lock.unlink()
