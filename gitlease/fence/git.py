"""What the fence reads from git, with git itself: the push's updates, the commits it brings
with their ``Gitlease-Claim`` trailers, and the claim records (see docs/fencing.md).

Plain ``git`` processes, one per question (a ``git log``, a ``git cat-file --batch``), so the
hooks that run this on every push and commit stay lean: no pygit2, no click.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Sequence

from .._util import lazy
from .._util.text import printable_strict
from .._util.value import Value
from ..errors import StoreError, UsageError
from ..model.refname import PREFIX

TRAILER = "Gitlease-Claim"
TRAILERS_CONFIG = "gitlease.trailers"
REQUIRE_CONFIG = "gitlease.requireClaim"
PROTECT_CONFIG = "gitlease.protect"

_OID = lazy(r"[0-9a-f]{40}|[0-9a-f]{64}")
_LOG_FORMAT = f"%H%x00%S%x00%(trailers:key={TRAILER},valueonly,unfold,separator=%x01)%x00"
#: ``git log`` options: no commit reachable from a ref here (the claims point at blobs: skip).
NEW_TO_THE_REPOSITORY = ("--not", f"--exclude={PREFIX}*", "--all", "--not")


class Git:
    """Runs git in one repository: ``git_dir``, or git's own discovery (a hook's GIT_DIR)."""

    def __init__(self, git_dir: str | os.PathLike[str] | None = None) -> None:
        self.git_dir = None if git_dir is None else str(git_dir)

    def run(
        self, *args: str, input: bytes | None = None, ok: Sequence[int] = (0,)
    ) -> subprocess.CompletedProcess[bytes]:
        """``git ARGS``; :class:`StoreError` if it cannot run or exits with a code not in ``ok``."""
        prefix = ["git"] if self.git_dir is None else ["git", "--git-dir", self.git_dir]
        try:
            result = subprocess.run([*prefix, *args], input=input, capture_output=True)
        except OSError as exc:
            raise StoreError(f"cannot run git: {exc}") from None
        if result.returncode not in ok:
            why = result.stderr.decode("utf-8", "replace").strip()
            raise StoreError(f"git {args[0]} failed: {why or f'exit {result.returncode}'}")
        return result

    def config_bool(self, key: str) -> bool:
        """A boolean git config value; unset is false."""
        result = self.run("config", "--type=bool", "--get", key, ok=(0, 1))
        return result.stdout.strip() == b"true"

    def config_all(self, key: str) -> list[str]:
        """Every value of a multi-valued git config key, in git's order; none if unset."""
        result = self.run("config", "--get-all", key, ok=(0, 1))
        return result.stdout.decode("utf-8", "replace").splitlines()


class Update(Value):
    """One line of pre-receive's input: ``old new ref``."""

    __slots__ = ("old", "new", "ref")
    old: str  # the ref's object id before the push (all zeros: the push creates it)
    new: str  # after it (all zeros: the push deletes it)
    ref: str

    @property
    def deletes(self) -> bool:
        """The push deletes the ref (its new value is all zeros)."""
        return set(self.new) == {"0"}

    @property
    def of_claims(self) -> bool:
        """A claim ref (``refs/worklease/*``): how claims move, never judged as work."""
        return self.ref.startswith(PREFIX)


def parse_updates(text: str) -> list[Update]:
    """pre-receive's lines; :class:`UsageError` on a line that is not ``old new ref``."""
    updates = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(" ")
        if len(parts) != 3 or not all(_OID.fullmatch(p) for p in parts[:2]) or not parts[2]:
            raise UsageError(
                f"line {number} is not `OLD-OID NEW-OID REF`: {printable_strict(line)!r}"
            )
        updates.append(Update(*parts))
    return updates


class Commit(Value):
    """A commit to judge: its id, the tip it was listed from, its raw trailer values."""

    __slots__ = ("oid", "source", "trailers")
    oid: str
    source: str
    trailers: tuple[str, ...]


def list_commits(
    git: Git,
    stdin_revs: Iterable[str] = (),
    *,
    options: Sequence[str] = (),
    revisions: Sequence[str] = (),
) -> list[Commit]:
    """One ``git log``: the commits of ``stdin_revs`` (ids, ``^id``) and ``revisions`` (never
    read as options), with their ``Gitlease-Claim`` trailers as git itself finds them (in the
    message's last paragraph).

    ``--stdin`` comes after ``options`` and after an even number of ``--not``: its revisions
    are positive however a git version applies the command line's ``--not`` to them.
    """
    revs = "".join(f"{rev}\n" for rev in stdin_revs).encode("ascii")
    args = ["log", f"--format={_LOG_FORMAT}", *options, "--stdin", "--end-of-options", *revisions]
    result = git.run(*args, input=revs)
    commits = []
    for entry in result.stdout.split(b"\x00\n"):
        if not entry:
            continue
        fields = entry.split(b"\x00")
        if len(fields) != 3:
            raise StoreError("git log printed something unexpected")
        oid, source, trailers = (f.decode("utf-8", "replace") for f in fields)
        values = tuple(v.strip() for v in trailers.split("\x01")) if trailers else ()
        commits.append(Commit(oid.lstrip("\n"), source, values))
    return commits


def read_blobs(git: Git, names: Sequence[str]) -> dict[str, tuple[bytes | None, str | None]]:
    """One ``git cat-file --batch``: name -> (blob bytes, None), (None, None) if it names
    nothing, or (None, why) if it names something other than a blob."""
    if not names:
        return {}
    out = git.run("cat-file", "--batch", input="".join(f"{n}\n" for n in names).encode()).stdout
    found: dict[str, tuple[bytes | None, str | None]] = {}
    pos = 0
    for name in names:
        end = out.index(b"\n", pos)
        parts = out[pos:end].split(b" ")
        pos = end + 1
        if len(parts) != 3 or not parts[2].isdigit():
            found[name] = (None, None)  # "<name> missing" (or ambiguous: nothing to trust)
            continue
        size = int(parts[2])
        data = out[pos : pos + size]
        pos += size + 1
        kind = parts[1].decode("ascii", "replace")
        found[name] = (data, None) if kind == "blob" else (None, f"the ref points at a {kind}")
    return found
