"""What a caller may ask of an acquire (and of a heartbeat or a check), checked before
anything touches the store.

TTL, owner label, note, mode, ``--wait``, an explicit receipt path: every
argument is validated here (USAGE on anything wrong), so that acquiring
(:mod:`gitlease.claims.acquire`) works from a request that is known to be well formed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from .._util.value import Value
from ..errors import UsageError
from ..model.clock import format_duration
from ..model.durations import duration_ms
from ..model.fields import check_text
from ..model.record import COORDINATION_ONLY, GUARDED
from ..model.refname import encode, validate_resource
from ..model.spelling import check_new_resource
from ..receipts import reservation
from ..scopes.wildmatch import check_patterns

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_TTL_MS = 15 * 60_000
MIN_TTL_MS = 1_000


def resolve_ttl(
    ttl: str | int | None, worktree: Path | None = None, *, git_dir: Path | None = None
) -> int:
    """A TTL in milliseconds (default 15 minutes, at least 1 second, at most
    ``gitlease.maxTtl``: a crashed agent must not block a unit for months). ``git_dir``:
    the worktree's git directory, when the caller knows it (:func:`max_ttl_ms`)."""
    if ttl is None:
        return DEFAULT_TTL_MS
    ms = duration_ms(ttl, name="TTL")
    if ms < MIN_TTL_MS:
        raise UsageError(f"bad TTL {ttl!r}: at least 1s")
    limit, where = max_ttl_ms(worktree, git_dir=git_dir)
    if ms > limit:
        raise UsageError(
            f"bad TTL {ttl!r}: at most {format_duration(limit)} ({where}); a longer piece "
            "of work renews its claim (heartbeat, keepalive) instead"
        )
    return ms


def renewal_ttl(
    ttl: str | int | None, worktree: Path | None = None, *, git_dir: Path | None = None
) -> int | None:
    """A heartbeat's new TTL (:func:`resolve_ttl`), or None: each claim keeps its own."""
    return resolve_ttl(ttl, worktree, git_dir=git_dir) if ttl is not None else None


def min_remaining_ms(min_remaining: str | int | None) -> int:
    """A check's ``min_remaining`` in milliseconds (0: none asked for)."""
    return duration_ms(min_remaining, name="--min-remaining") if min_remaining else 0


#: The longest TTL when ``gitlease.maxTtl`` is not set: a day.
DEFAULT_MAX_TTL_MS = 86_400_000
MAX_TTL_CONFIG = "gitlease.maxTtl"


def max_ttl_ms(worktree: Path | None = None, *, git_dir: Path | None = None) -> tuple[int, str]:
    """The longest TTL allowed, and where it comes from: ``git config gitlease.maxTtl`` (read
    from ``worktree``, any scope), else a day. USAGE for a value that is not a duration.
    ``git_dir``: the worktree's git directory, when the caller knows it (a store's location
    found it): then it is not looked for again.

    In a repository it is read with the rest of the repository's configuration, by the read
    that locates the store and is cached by the identity of every file it depends on
    (:func:`gitlease.store.projects.read_config`): an acquire runs no ``git config`` of its
    own, and a resident process (the MCP server) none a call. Outside one, one ``git
    config`` reads the user's and the system's files."""
    from ..gitio.gitdirs import find_git_dir
    from ..store.projects import read_config

    if git_dir is None:
        found_dir = find_git_dir(worktree or Path.cwd())
        git_dir = found_dir[0] if found_dir is not None else None
    if git_dir is not None:
        found = (read_config(git_dir).max_ttl or "").strip()
    else:
        import subprocess

        cmd = ["git", *(["-C", str(worktree)] if worktree else []), "config", "--get",
               MAX_TTL_CONFIG]  # fmt: skip
        try:
            found = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            found = ""
    if not found:
        return DEFAULT_MAX_TTL_MS, f"the default; set {MAX_TTL_CONFIG} to change it"
    return duration_ms(found, name=MAX_TTL_CONFIG), f"{MAX_TTL_CONFIG} = {found}"


def default_owner(worktree: Path | None = None) -> str:
    """``user@host:<worktree directory name>`` in a worktree (the same for every call made
    from it: the identity gitlease uses), ``user@host:pid`` outside one. (No socket or
    getpass import: ~5 ms on every acquire.)"""
    try:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        user = os.environ.get("USER") or str(os.getuid())
    # a directory's name can hold anything: the label must pass the check it is put to
    where = str(os.getpid())
    if worktree is not None:
        where = "".join(c if c.isprintable() else "?" for c in worktree.name)[:100]
    return f"{user}@{os.uname().nodename}:{where}"


def resolve_owner(owner: str | None, worktree: Path | None = None) -> str:
    """The owner label: given, ``GITLEASE_OWNER``, or :func:`default_owner`."""
    owner = owner or os.environ.get("GITLEASE_OWNER") or default_owner(worktree)
    return check_text(owner, "the owner label", max_chars=200)


class AcquireRequest(Value):
    """A validated acquire of one resource or a bundle, before anything touches the store."""

    __slots__ = ("resources", "refs", "ttl_ms", "owner", "note", "mode", "wait_ms", "receipt",
                 "bind", "bundle", "paths")  # fmt: skip
    _defaults: ClassVar[dict[str, Any]] = {"paths": None}
    resources: tuple[str, ...]
    refs: tuple[str, ...]
    ttl_ms: int
    owner: str
    note: str | None
    mode: str
    wait_ms: int | None  # --wait: retry HELD answers this long
    receipt: Path | None  # an explicit receipt path, or None for this worktree's
    bind: bool  # bind this worktree to the new claims
    bundle: bool  # give the claims a bundle id
    paths: tuple[str, ...] | None  # path scopes (docs/howto/path-scopes.md), or None


class AcquireOptions(TypedDict, total=False):
    """The keyword options of every acquire (``acquire``, ``bundle.acquire_many``, ``exec``)."""

    ttl: str | int | None  #: how long the claim lasts without a heartbeat (default 15m)
    owner: str | None  #: a non-secret label (default ``GITLEASE_OWNER``, else user@host:<worktree>)
    note: str | None  #: shown with the claim
    coordination_only: bool  #: the durable mutation happens elsewhere (recorded as the mode)
    wait: str | int | None  #: retry HELD answers this long
    receipt: str | os.PathLike[str] | None  #: an explicit receipt path
    bind: bool  #: bind this worktree to the claim (default True)
    paths: Iterable[str] | None  #: path scopes the claim reserves (patterns; default none)


#: The most members one bundle may have: the receipt of the largest such bundle (every name
#: of the longest, most escaped kind, the longest paths) stays well under
#: :data:`gitlease.receipts.receipt.MAX_RECEIPT_BYTES`, so it can always be read back.
MAX_BUNDLE_MEMBERS = 256


def acquire_request(
    resources: Iterable[str],
    *,
    bundle: bool = False,
    worktree: Path | None = None,
    git_dir: Path | None = None,
    **options: Unpack[AcquireOptions],
) -> AcquireRequest:
    """Check every argument of an acquire (USAGE on anything wrong; nothing was touched).

    ``worktree``: the caller's worktree, which names the default owner label; ``git_dir``:
    its git directory, if known (where ``gitlease.maxTtl`` is read: :func:`max_ttl_ms`).
    """
    names = tuple(resources)
    if not names:
        raise UsageError("name at least one resource")
    if bundle and len(names) > MAX_BUNDLE_MEMBERS:
        raise UsageError(
            f"a bundle has {len(names)} members; at most {MAX_BUNDLE_MEMBERS} are allowed "
            "(its receipt must stay readable): split the work into smaller bundles"
        )
    for resource in names:
        check_new_resource(validate_resource(resource))
    refs = tuple(encode(r) for r in names)
    if len(set(refs)) != len(refs):
        dupes = sorted({r for r, ref in zip(names, refs, strict=True) if refs.count(ref) > 1})
        raise UsageError(f"duplicate resources in one request: {', '.join(dupes)}")
    note = options.get("note")
    if note is not None:
        check_text(note, "the note")
    ttl_ms = resolve_ttl(options.get("ttl"), worktree, git_dir=git_dir)
    owner = resolve_owner(options.get("owner"), worktree)
    wait = options.get("wait")
    wait_ms = duration_ms(wait, name="--wait") if wait is not None else None
    explicit = reservation.explicit_path(options.get("receipt"))
    if explicit is not None:
        reservation.check_explicit_location(explicit)
    mode = COORDINATION_ONLY if options.get("coordination_only") else GUARDED
    bind = options.get("bind", True)
    paths = check_patterns(options.get("paths"))
    return AcquireRequest(
        names, refs, ttl_ms, owner, note, mode, wait_ms, explicit, bind, bundle, paths
    )


def first_free_request(
    candidates: Iterable[str],
    *,
    worktree: Path | None = None,
    git_dir: Path | None = None,
    **options: Unpack[AcquireOptions],
) -> AcquireRequest:
    """Check an ``acquire --first-free``: the candidates in order (repeats dropped), each a
    valid resource, and the acquire options (USAGE on anything wrong; nothing was touched)."""
    names = tuple(dict.fromkeys(candidates))
    if not names:
        raise UsageError("--first-free: name at least one candidate (`-`: one a line on stdin)")
    for number, resource in enumerate(names, 1):
        try:
            check_new_resource(validate_resource(resource))
        except UsageError as exc:
            raise UsageError(
                f"--first-free: candidate {number}: {exc}; nothing was acquired"
            ) from None
    return acquire_request(names, worktree=worktree, git_dir=git_dir, **options)
