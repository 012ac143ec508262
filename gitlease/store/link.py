"""A remote store's connection to its git remote: every git command that talks to it, each
ending in time, and the fetch of the remote's claims into this host's mirror.

Kept apart from :mod:`gitlease.store.remote` (the store) and :mod:`gitlease.store.settle`
(what a push did) because both need it and it needs neither: it knows the remote, the
repository's settings for reaching it, the deadline of the network calls made now, and
the one lock that keeps the mirror's writers (fetches, updates after a push) apart.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .._util.files import flocked, is_stale, lock_age
from ..errors import StoreError
from ..gitio import layout
from ..gitio.gitread import git_env, with_settings
from ..model.refname import PREFIX
from .pushreply import network_error

#: A fetch or push that takes longer is stopped (a push's outcome is then settled).
NETWORK_TIMEOUT_SECONDS = float(os.environ.get("GITLEASE_REMOTE_TIMEOUT") or 60)
#: Every fetch of the remote's claims: quiet, nothing else fetched or run.
FETCH = (
    "fetch",
    "--quiet",
    "--no-tags",
    "--no-write-fetch-head",
    "--no-recurse-submodules",
    "--no-auto-maintenance",
)
_REFSPEC = f"+{PREFIX}*:{PREFIX}*"
#: Transports on which git sends each push exactly once (git's HTTP client may send its
#: POST again; so may a remote helper, for all we know).
_SENT_ONCE = ("ssh://", "git+ssh://", "ssh+git://", "git://", "file://")
_TOKEN_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "glt_")


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


class Link:
    """The remote as this host reaches it (see the module's text)."""

    def __init__(self, git_dir: Path, remote: str, access: tuple[tuple[str, str], ...]) -> None:
        self.git_dir = git_dir
        self.remote = remote
        self.shown = redact(remote)  # for messages
        #: The repository's own settings for reaching remotes (ssh command, credential
        #: helpers, http.*): git in the store would not see them otherwise.
        self.access = access
        self._deadline: float | None = None  # see within()
        self._url: str | None = None  # the push URL, once asked (see may_replay)
        #: when a refused push was settled by a fetch: the retry that follows needs no other
        self.fetched_after_refusal: float | None = None

    # ----------------------------------------------------------------- time

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

    @contextmanager
    def until(self, ends: float | None) -> Iterator[None]:
        """Network calls inside end by the monotonic time ``ends`` (None: no new bound)."""
        if ends is None:
            yield
            return
        with self.within(ends - time.monotonic()):
            yield

    def seconds_left(self, limit: float) -> float:
        if self._deadline is None:
            return limit
        return min(limit, self._deadline - time.monotonic())

    # ----------------------------------------------------------------- fetching

    def fetch(self) -> None:
        """Fetch the remote's claims into the mirror (one fetch at a time on this host).

        Within a second of a refused push settled by a fetch (and before the next
        push), the retry and its answer come from that fetch: it is as fresh as any,
        and the compare-and-swap still checks whatever is decided from it.
        """
        settled = self.fetched_after_refusal
        if settled is not None and time.monotonic() - settled < 1.0:
            return
        self.fetched_after_refusal = None
        with self.mirror_lock():
            for attempt in range(5):
                result = self.network(*FETCH, "--prune", self.remote, _REFSPEC)
                if result is not None and result.returncode == 0:
                    return
                why = network_error(result)
                locked = "cannot lock ref" in why or ".lock': File exists" in why
                if locked and attempt < 4:  # a killed fetch's lock, or git gc's for a moment
                    self._clear_stale_mirror_locks()
                    time.sleep(0.05 * 2**attempt)
                    continue
                raise StoreError(f"cannot fetch claims from the remote {self.shown}: {why}")

    def fetch_object(self, oid: str) -> bool:
        """Fetch one record by its id into the local objects (no ref moves): True if it came."""
        result = self.network(*FETCH, self.remote, oid)
        return result is not None and result.returncode == 0

    # ----------------------------------------------------------------- what git sends

    def may_replay(self) -> bool:
        """Whether git may have sent a push more than once (:mod:`gitlease.store.settle`)."""
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

    # ----------------------------------------------------------------- plumbing

    def network(self, *args: str) -> subprocess.CompletedProcess[bytes] | None:
        """Run a git command that talks to the remote; None if it had to be stopped."""
        timeout = self.seconds_left(NETWORK_TIMEOUT_SECONDS)
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
    def mirror_lock(self) -> Iterator[None]:
        """One writer of the mirror at a time on this host (fetches and post-push updates)."""
        path = layout.mirror_lock(self.git_dir)

        def busy() -> StoreError:
            return StoreError(f"{path} stayed locked: is a fetch hung?")

        with flocked(path, wait=self.seconds_left(NETWORK_TIMEOUT_SECONDS + 5), busy=busy):
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
