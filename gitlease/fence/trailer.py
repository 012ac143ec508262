"""The ``Gitlease-Claim`` trailer: what it says, and how a commit gets it (docs/fencing.md).

``Gitlease-Claim: <key> <claim-id> r<revision>``, where ``<key>`` is the resource as its ref
spells it, between ``refs/worklease/`` and ``.lease`` (lower-case ASCII without spaces;
:mod:`gitlease.model.refname` decodes it back exactly). No secret.

The prepare-commit-msg step (:func:`add_trailers`): with ``git config gitlease.trailers
true``, the commit hook names every claim bound to the worktree, through ``git
interpret-trailers``. It runs on every commit: no pygit2, no click.
"""

from __future__ import annotations

import re
from pathlib import Path

from .._util import lazy
from .._util.text import printable_strict
from .._util.value import Value
from ..errors import StoreError, UsageError
from ..model.refname import LEAF_SUFFIX, PREFIX, decode, encode
from ..receipts import bindings as bindings_mod
from .git import TRAILER, TRAILERS_CONFIG, Git

_CLAIM_ID = lazy(r"c-[0-9a-f]{16}")
_REVISION = lazy(r"r(?:0|[1-9][0-9]{0,17})")


class Trailer(Value):
    """One claim named by a commit: the resource, the claim id and its revision."""

    __slots__ = ("resource", "claim_id", "revision")
    resource: str
    claim_id: str
    revision: int  # the fencing token: the claim's revision when the commit was made

    @property
    def ref(self) -> str:
        """The claim's ref, where the server's record of it is read."""
        return encode(self.resource)

    def value(self) -> str:
        """The trailer's value, ``<key> <claim-id> r<revision>``."""
        return f"{resource_key(self.resource)} {self.claim_id} r{self.revision}"

    def line(self) -> str:
        """The whole trailer line, as a commit message carries it."""
        return f"{TRAILER}: {self.value()}"


def resource_key(resource: str) -> str:
    """The resource as its ref spells it, without ``refs/worklease/`` and ``.lease``."""
    return encode(resource)[len(PREFIX) : -len(LEAF_SUFFIX)]


def parse_trailer(value: str) -> Trailer:
    """The claim a trailer value names; :class:`UsageError` saying why it cannot be read."""
    parts = value.split(" ")
    if len(parts) != 3:
        raise UsageError("it must be `<resource key> <claim id> r<revision>`")
    key, claim_id, revision = parts
    try:
        resource = decode(PREFIX + key + LEAF_SUFFIX)
    except UsageError:
        raise UsageError(f"{printable_strict(key)!r} is not the key of any resource") from None
    if not _CLAIM_ID.fullmatch(claim_id):
        raise UsageError(f"{printable_strict(claim_id)!r} is not a claim id (c- and 16 hex digits)")
    if not _REVISION.fullmatch(revision):
        raise UsageError(f"{printable_strict(revision)!r} is not a revision (r and a number)")
    return Trailer(resource, claim_id, int(revision[1:]))


def add_trailers(message: Path, git: Git | None = None) -> list[str]:
    """Name every claim bound to this worktree in the commit message being prepared.

    Each bound claim gets one trailer, added with ``git interpret-trailers`` only if the
    same one is not there yet (an ``--amend`` adds none). A trailer naming an earlier claim
    on a resource bound here now is replaced: the rewritten commit (amend, rebase,
    cherry-pick) is made under the claim held now. Trailers of other resources stay.
    Returns the trailer lines the message carries for the bound claims.
    """
    git = git or Git()
    found = git.run(
        "config", "--get-regexp", r"^(gitlease\.trailers|core\.commentchar)$", ok=(0, 1)
    )
    config = {}
    for line in found.stdout.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        config[key] = value if _ else None  # no value at all: a boolean true
    if not _boolean(config.get(TRAILERS_CONFIG.lower(), "false"), TRAILERS_CONFIG):
        return []
    git_dir = Path(git.run("rev-parse", "--absolute-git-dir").stdout.decode().strip())
    wanted = sorted(_bound_trailers(git_dir), key=lambda t: t.resource)
    if not wanted:
        return []
    try:
        text = message.read_bytes()
    except OSError as exc:
        raise StoreError(f"cannot read the commit message {message}: {exc.strerror}") from None
    char = (config.get("core.commentchar") or "").encode()
    comment = char if char and char != b"auto" else b"#"
    if _is_blank(text, comment):
        # Nothing written yet (the editor opens next): leave a line for the subject above
        # the trailers, so that a subject typed on the first line stays its own paragraph.
        trailers = "".join(f"{t.line()}\n" for t in wanted).encode()
        _write(message, b"\n\n" + trailers + b"\n" + text.lstrip(b"\n"))
        return [t.line() for t in wanted]
    if b"gitlease-claim" in text.lower():
        stale = _stale_values(git, message, wanted)
        if stale:
            _write(message, _without(text, stale, comment))
    args = ["interpret-trailers", "--in-place", "--no-divider", "--where", "end"]
    args += ["--if-exists", "addIfDifferent", "--if-missing", "add"]
    for t in wanted:
        args += ["--trailer", t.line()]
    git.run(*args, str(message))
    return [t.line() for t in wanted]


def _bound_trailers(git_dir: Path) -> list[Trailer]:
    """The trailer of every claim bound to the worktree of ``git_dir``, from its receipts."""
    out = []
    for binding in bindings_mod.bindings(git_dir):
        if isinstance(binding, Path):
            raise UsageError(bindings_mod.unreadable(binding))
        _receipt, claim = bindings_mod.bound_claim(binding)
        out.append(Trailer(binding.resource, claim.claim_id, claim.revision))
    return out


def _stale_values(git: Git, message: Path, wanted: list[Trailer]) -> set[str]:
    """Trailer values in the message's trailer block that name a bound resource's earlier claim."""
    parsed = git.run("interpret-trailers", "--parse", "--no-divider", str(message)).stdout
    keys = {resource_key(t.resource): t.value() for t in wanted}
    stale = set()
    for line in parsed.decode("utf-8", "replace").splitlines():
        name, sep, value = line.partition(":")
        value = value.strip()
        if sep and name.strip().lower() == TRAILER.lower():
            key = value.split(" ", 1)[0]
            if key in keys and value != keys[key]:
                stale.add(value)
    return stale


def _without(text: bytes, stale: set[str], comment: bytes) -> bytes:
    """``text`` without the trailer lines whose value is in ``stale`` (above any scissors)."""
    pattern = re.compile(rb"(?i)" + re.escape(TRAILER.encode()) + rb"[ \t]*:[ \t]*(.*?)[ \t]*")
    out = []
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(comment) and b" >8 " in line:
            out.extend(lines[i:])
            break
        found = pattern.fullmatch(line.rstrip(b"\r\n"))
        if found and found[1].decode("utf-8", "replace") in stale:
            continue
        out.append(line)
    return b"".join(out)


def _boolean(value: str | None, key: str) -> bool:
    """A git config boolean, as git reads it (a key without a value is true)."""
    text = "true" if value is None else value.strip().lower()
    if text in ("true", "yes", "on"):
        return True
    if text in ("false", "no", "off", ""):
        return False
    if re.fullmatch(r"[+-]?[0-9]+", text):
        return int(text) != 0
    raise UsageError(f"bad boolean value {printable_strict(text)!r} for {key} in git config")


def _is_blank(text: bytes, comment: bytes) -> bool:
    """Nothing but comments (and what follows the scissors line): no message written yet."""
    for line in text.splitlines():
        if line.startswith(comment) and b" >8 " in line:
            return True
        if line.strip() and not line.startswith(comment):
            return False
    return True


def _write(path: Path, data: bytes) -> None:
    """Rewrite the message in place, as git and editors do (git reads it back by name)."""
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise StoreError(f"cannot write the commit message {path}: {exc.strerror}") from None
