"""Fenced pushes: commits name the claims they were made under, and the server refuses work
whose claim is no longer the resource's current claim (see docs/fencing.md).

Three parts, one module:

* **The trailer.** ``Gitlease-Claim: <key> <claim-id> r<revision>``, where ``<key>`` is the
  resource as its ref spells it, between ``refs/worklease/`` and ``.lease`` (lower-case
  ASCII without spaces; :mod:`gitlease.refname` decodes it back exactly). No secret.
* **The check.** Given a push (pre-receive's ``old new ref`` lines) or a range of commits,
  list the commits with one ``git log`` (their trailers parsed by git itself), read each
  distinct claim's record once with one ``git cat-file --batch``, verify it, and judge: a
  trailer passes only when its claim is the resource's current claim and still held there.
  An expired claim that nobody replaced passes: no other host's clock is ever judged.
* **The prepare-commit-msg step.** With ``git config gitlease.trailers true``, the commit
  hook names every claim bound to the worktree, through ``git interpret-trailers``.

This module runs inside git hooks on every push and commit, so it stays lean: no pygit2, no
click, and cryptography only when a record is verified. Entry points::

    python -m gitlease.fence pre-receive                         # stdin: old new ref lines
    python -m gitlease.fence prepare-commit-msg FILE [SOURCE [SHA]]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, ClassVar

from . import bindings as bindings_mod
from . import receipts as receipts_mod
from .errors import CorruptRecordError, GitleaseError, StoreError, UsageError
from .refname import LEAF_SUFFIX, PREFIX, decode, encode
from .value import Value

TRAILER = "Gitlease-Claim"
TRAILERS_CONFIG = "gitlease.trailers"
REQUIRE_CONFIG = "gitlease.requireClaim"
PROTECT_CONFIG = "gitlease.protect"
#: What ``gitlease.requireClaim`` protects when ``gitlease.protect`` is not set.
DEFAULT_PROTECT = ("refs/heads/*",)
#: Commits named in a message per finding; the count says how many there were.
SHOWN_COMMITS = 3

_CLAIM_ID = re.compile(r"c-[0-9a-f]{16}")
_REVISION = re.compile(r"r(?:0|[1-9][0-9]{0,17})")
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_LOG_FORMAT = f"%H%x00%S%x00%(trailers:key={TRAILER},valueonly,unfold,separator=%x01)%x00"
_ACCEPTED = "current"
#: ``git log`` options: no commit reachable from a ref here (the claims point at blobs: skip).
NEW_TO_THE_REPOSITORY = ("--not", f"--exclude={PREFIX}*", "--all", "--not")


# ------------------------------------------------------------------ the trailer


class Trailer(Value):
    """One claim named by a commit: the resource, the claim id and its revision."""

    __slots__ = ("resource", "claim_id", "revision")
    resource: str
    claim_id: str
    revision: int

    @property
    def ref(self) -> str:
        return encode(self.resource)

    def value(self) -> str:
        """The trailer's value, ``<key> <claim-id> r<revision>``."""
        return f"{resource_key(self.resource)} {self.claim_id} r{self.revision}"

    def line(self) -> str:
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
        raise UsageError(f"{_shown(key)!r} is not the key of any resource") from None
    if not _CLAIM_ID.fullmatch(claim_id):
        raise UsageError(f"{_shown(claim_id)!r} is not a claim id (c- and 16 hex digits)")
    if not _REVISION.fullmatch(revision):
        raise UsageError(f"{_shown(revision)!r} is not a revision (r and a number)")
    return Trailer(resource, claim_id, int(revision[1:]))


# ------------------------------------------------------------------ git, plainly


class Git:
    """Runs git in one repository: ``git_dir``, or git's own discovery (a hook's GIT_DIR)."""

    def __init__(self, git_dir: str | os.PathLike[str] | None = None) -> None:
        self.git_dir = None if git_dir is None else str(git_dir)

    def run(
        self, *args: str, input: bytes | None = None, ok: Sequence[int] = (0,)
    ) -> subprocess.CompletedProcess[bytes]:
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
        result = self.run("config", "--type=bool", "--get", key, ok=(0, 1))
        return result.stdout.strip() == b"true"

    def config_all(self, key: str) -> list[str]:
        result = self.run("config", "--get-all", key, ok=(0, 1))
        return result.stdout.decode("utf-8", "replace").splitlines()


# ------------------------------------------------------------------ what a push brings


class Update(Value):
    """One line of pre-receive's input: ``old new ref``."""

    __slots__ = ("old", "new", "ref")
    old: str
    new: str
    ref: str

    @property
    def deletes(self) -> bool:
        return set(self.new) == {"0"}

    @property
    def creates(self) -> bool:
        return set(self.old) == {"0"}

    @property
    def of_claims(self) -> bool:
        return self.ref.startswith(PREFIX)


def parse_updates(text: str) -> list[Update]:
    """pre-receive's lines; :class:`UsageError` on a line that is not ``old new ref``."""
    updates = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(" ")
        if len(parts) != 3 or not all(_OID.fullmatch(p) for p in parts[:2]) or not parts[2]:
            raise UsageError(f"line {number} is not `OLD-OID NEW-OID REF`: {_shown(line)!r}")
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


# ------------------------------------------------------------------ judging


class Finding(Value):
    """One distinct trailer value in the commits, and what the server's records say of it.

    ``verdict``: current (accepted), replaced, released, unknown, invalid (the record at
    the server cannot be trusted) or malformed (the trailer cannot be read).
    """

    __slots__ = ("value", "trailer", "verdict", "detail", "current", "count", "commits", "refs")
    _defaults: ClassVar[dict[str, Any]] = {"current": None}
    value: str
    trailer: Trailer | None
    verdict: str
    detail: str
    current: dict[str, Any] | None
    count: int
    commits: tuple[str, ...]
    refs: tuple[str, ...]

    @property
    def accepted(self) -> bool:
        return self.verdict == _ACCEPTED

    def to_dict(self) -> dict[str, Any]:
        t = self.trailer
        return {
            "trailer": self.value,
            "resource": t.resource if t else None,
            "claim_id": t.claim_id if t else None,
            "revision": t.revision if t else None,
            "verdict": self.verdict,
            "accepted": self.accepted,
            "detail": self.detail,
            "current": self.current,
            "commits": self.count,
            "first_commits": list(self.commits),
            "refs": list(self.refs),
        }


class Unclaimed(Value):
    """Commits without any trailer that a protected ref would receive."""

    __slots__ = ("ref", "count", "commits")
    ref: str
    count: int
    commits: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "commits": self.count, "first_commits": list(self.commits)}


class Report(Value):
    """The verdict on a push or a range: accepted only if every finding is, and nothing is
    unclaimed."""

    __slots__ = ("commits", "findings", "unclaimed", "require_claim", "protect")
    commits: int
    findings: tuple[Finding, ...]
    unclaimed: tuple[Unclaimed, ...]
    require_claim: bool
    protect: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return all(f.accepted for f in self.findings) and not self.unclaimed

    @property
    def untrusted(self) -> bool:
        """A record at the server could not be trusted (a store problem, exit 7)."""
        return any(f.verdict == "invalid" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "commits": self.commits,
            "claims": [f.to_dict() for f in self.findings],
            "unclaimed": [u.to_dict() for u in self.unclaimed],
            "require_claim": self.require_claim,
            "protect": list(self.protect),
        }

    def summary(self) -> str:
        claims = len([f for f in self.findings if f.trailer is not None])
        head = f"{_plural(self.commits, 'commit')}, {_plural(claims, 'claim')}"
        if self.ok:
            return f"{head}: every claim is current"
        problems = []
        refused = [f for f in self.findings if not f.accepted]
        if refused:
            problems.append(f"{_plural(len(refused), 'trailer')} refused")
        bare = sum(u.count for u in self.unclaimed)
        if bare:
            problems.append(f"{_plural(bare, 'commit')} without a claim on a protected ref")
        return f"{head}: {', '.join(problems)}"

    def explain(self, what: str) -> str:
        """The refusal for people: each problem, then what to do."""
        refused = [f for f in self.findings if not f.accepted]
        lines = [f"{what} refused: {self.summary()}.", ""]
        for f in refused:
            lines.append(
                f"{', '.join(_shown(r) for r in f.refs) or 'the range'}: "
                f"{_plural(f.count, 'commit')} ({_commits(f.commits, f.count)}) "
                + ("carries" if f.count == 1 else "carry")
            )
            lines.append(f"    {TRAILER}: {_shown(f.value)[:200]}")
            lines += _wrapped(f.detail, "  ")
        for u in self.unclaimed:
            lines += _wrapped(
                f"{_shown(u.ref)}: {_plural(u.count, 'commit')} ({_commits(u.commits, u.count)}) "
                + ("carries" if u.count == 1 else "carry")
                + f" no {TRAILER} trailer, and this repository requires a claim for "
                f"{_shown(u.ref)} ({REQUIRE_CONFIG}; protected: {', '.join(self.protect)})",
                "",
            )
        lines.append("")
        advice: list[str] = []
        verdicts = {f.verdict for f in refused}
        if verdicts & {"replaced", "released", "unknown", "malformed"}:
            advice.append(
                "What to do: fetch (`git fetch`; `gitlease show RESOURCE` shows the claim now), "
                "re-acquire the resource (`gitlease acquire RESOURCE`), rebase the work onto the "
                "durable state (`git rebase --force-rebase origin/BRANCH`: the rebased commits "
                "carry the new claim), and push again. Where the claim was replaced, another "
                "holder worked on the unit meanwhile: check that your work still fits theirs."
            )
        if "invalid" in verdicts:
            advice.append(
                "The server's record cannot be trusted: nothing is accepted under it until it "
                "is fixed at the server (`gitlease --store REPO.git --remote '' verify`)."
            )
        if self.unclaimed:
            advice.append(
                "Commits on a protected ref must be made under a claim: acquire one "
                "(`gitlease acquire RESOURCE`), turn trailers on "
                f"(`git config {TRAILERS_CONFIG} true`), re-create the commits "
                "(`git commit --amend`, or `git rebase --force-rebase` for several), and push "
                "again."
            )
        for paragraph in advice:
            lines += _wrapped(paragraph, "")
        return "\n".join(lines).rstrip() + "\n"


def judge(trailer: Trailer, blob: tuple[bytes | None, str | None]) -> tuple[str, str, Any]:
    """(verdict, detail, current claim) for a trailer against a record read at the server.

    Accepted only when the record verifies, names the resource, holds the trailer's claim
    and revision, and is not released. Expiry is not judged: an expired claim that nobody
    replaced is still the current one, and the server never reads another host's clock.
    """
    from .record import parse, verify

    data, problem = blob
    r = trailer.resource
    if data is None and problem is None:
        return (
            "unknown",
            f"the server has no claim on {_shown(r)}: claim {trailer.claim_id} is unknown here",
            None,
        )
    if data is None:
        return "invalid", f"the server's record of {_shown(r)} cannot be read: {problem}", None
    try:
        record = parse(data)
        verify(record)
    except CorruptRecordError as exc:
        return (
            "invalid",
            f"the server's record of {_shown(r)} does not verify ({_shown(str(exc))}): it is "
            "not trusted",
            None,
        )
    if record.resource != r:
        return (
            "invalid",
            f"the server's ref of {_shown(r)} holds a record for {_shown(record.resource)}: "
            "it is not trusted",
            None,
        )
    current = {
        "claim_id": record.claim_id,
        "owner": record.owner,
        "revision": record.revision,
        "state": record.state,
    }
    now = (
        f"claim {record.claim_id} by {_shown(record.owner)}, revision {record.revision}, "
        f"{record.state}"
    )
    mine = f"claim {trailer.claim_id} (revision {trailer.revision})"
    if record.claim_id == trailer.claim_id and record.revision == trailer.revision:
        if record.held:
            return _ACCEPTED, f"{mine} is the current claim on {_shown(r)}", current
        return (
            "released",
            f"{mine} on {_shown(r)} is released at the server (its holder, "
            f"{_shown(record.owner)}, released it): work done under it can no longer land",
            current,
        )
    if record.revision > trailer.revision and record.claim_id != trailer.claim_id:
        return (
            "replaced",
            f"the current claim on {_shown(r)} is {now}: it replaced {mine}, the claim in the "
            "commits",
            current,
        )
    return (
        "unknown",
        f"the current claim on {_shown(r)} is {now}: the server does not know {mine}",
        current,
    )


def judge_commits(
    claims: Git,
    new: list[Commit],
    *,
    sources: dict[str, tuple[str, ...]] | None = None,
    after: dict[str, str] | None = None,
) -> list[Finding]:
    """Judge every distinct trailer value of ``new`` once, against the records of ``claims``.

    ``after``: claim refs that the same push moves (ref -> new id; zeros: deleted). Such a
    trailer must hold both before the push and after it.
    """
    sources = sources or {}
    after = after or {}
    by_value: dict[str, list[Commit]] = {}
    for commit in new:
        for value in commit.trailers:
            by_value.setdefault(value, []).append(commit)
    parsed: dict[str, Trailer | str] = {}
    for value in by_value:
        try:
            parsed[value] = parse_trailer(value)
        except UsageError as exc:
            parsed[value] = str(exc)
    refs = sorted({t.ref for t in parsed.values() if isinstance(t, Trailer)})
    later = sorted({after[ref] for ref in refs if ref in after and set(after[ref]) != {"0"}})
    blobs = read_blobs(claims, [*refs, *later])
    findings = []
    for value, commits in by_value.items():
        trailer = parsed[value]
        tips = sorted({name for c in commits for name in sources.get(c.source, (c.source,))})
        shown = tuple(c.oid for c in commits[:SHOWN_COMMITS])
        if not isinstance(trailer, Trailer):
            detail = f"the trailer cannot be read: {trailer}"
            findings.append(Finding(value, None, "malformed", detail, None, len(commits), shown,
                                    tuple(tips)))  # fmt: skip
            continue
        verdict, detail, current = judge(trailer, blobs[trailer.ref])
        if verdict == _ACCEPTED and trailer.ref in after:
            moved = after[trailer.ref]
            blob = (None, None) if set(moved) == {"0"} else blobs[moved]
            verdict, detail, current = _judge_after(trailer, blob, current)
        findings.append(
            Finding(value, trailer, verdict, detail, current, len(commits), shown, tuple(tips))
        )
    order = {"invalid": 0, "malformed": 1, "replaced": 2, "released": 3, "unknown": 4}
    return sorted(findings, key=lambda f: (order.get(f.verdict, 9), f.value))


def _judge_after(
    trailer: Trailer, blob: tuple[bytes | None, str | None], before: Any
) -> tuple[str, str, Any]:
    """The same push also moves the trailer's claim ref: the claim must hold after it too."""
    verdict, _, current = judge(trailer, blob)
    mine = f"claim {trailer.claim_id} (revision {trailer.revision})"
    if verdict == _ACCEPTED:
        return verdict, f"{mine} is the current claim on {_shown(trailer.resource)}", current
    if blob == (None, None):
        change = "deletes it"
    elif verdict == "released":
        change = f"releases {mine}"
    elif verdict == "invalid":
        change = "writes a record there that does not verify"
    elif current is not None:
        change = (
            f"gives it to claim {current['claim_id']} by {_shown(current['owner'])}, "
            f"revision {current['revision']}"
        )
    else:
        change = "changes it"
    detail = (
        f"{mine} is current on {_shown(trailer.resource)}, but this push also moves "
        f"{trailer.ref} and {change}: push the work first, then release or hand over the claim"
    )
    return verdict, detail, current if current is not None else before


def check_push(
    updates: list[Update],
    *,
    commits: Git,
    claims: Git,
    require_claim: bool | None = None,
    protect: Sequence[str] | None = None,
) -> Report:
    """pre-receive's view: judge the commits that the push brings and no ref here has yet.

    Updates of ``refs/worklease/*`` always pass (they are how claims move); deletions bring
    no commits. With ``require_claim`` (default: ``git config gitlease.requireClaim``),
    commits that a protected ref receives (reachable from its new value and from no
    protected ref here) must carry a trailer too.
    """
    require = commits.config_bool(REQUIRE_CONFIG) if require_claim is None else require_claim
    patterns = protect_patterns(commits, protect) if require else ()
    moved = [u for u in updates if not u.of_claims and not u.deletes]
    after = {u.ref: u.new for u in updates if u.of_claims}
    if not moved:
        return Report(0, (), (), require, patterns)
    sources: dict[str, tuple[str, ...]] = {}
    for u in moved:
        sources[u.new] = (*sources.get(u.new, ()), u.ref)
    new = list_commits(commits, dict.fromkeys(u.new for u in moved), options=NEW_TO_THE_REPOSITORY)
    findings = judge_commits(claims, new, sources=sources, after=after)
    unclaimed: list[Unclaimed] = []
    guarded = [u for u in moved if any(fnmatchcase(u.ref, p) for p in patterns)]
    if guarded:
        unclaimed = _unclaimed(commits, guarded, patterns)
    return Report(len(new), tuple(findings), tuple(unclaimed), require, patterns)


def _unclaimed(commits: Git, guarded: list[Update], patterns: Sequence[str]) -> list[Unclaimed]:
    """Commits without a trailer that the protected refs in ``guarded`` would receive: those
    reachable from a new value and from no protected ref here (whatever the other refs hold:
    a commit pushed elsewhere first still needs a claim to reach a protected ref)."""
    listing = commits.run("for-each-ref", "--format=%(objectname) %(refname)").stdout
    here = []
    for line in listing.decode("utf-8", "replace").splitlines():
        oid, _, ref = line.partition(" ")
        if not ref.startswith(PREFIX) and any(fnmatchcase(ref, p) for p in patterns):
            here.append(oid)
    tips = dict.fromkeys(u.new for u in guarded)
    received = list_commits(commits, [*tips, *(f"^{oid}" for oid in dict.fromkeys(here))])
    out = []
    for u in guarded:
        bare = [c.oid for c in received if not c.trailers and c.source == u.new]
        if bare:
            out.append(Unclaimed(u.ref, len(bare), tuple(bare[:SHOWN_COMMITS])))
    return out


def check_range(
    revisions: Sequence[str], *, commits: Git, claims: Git, require_claim: bool | None = None
) -> Report:
    """The commits of a range (``git log`` arguments such as ``BASE..HEAD``), judged like a
    push; with ``require_claim``, every one of them must carry a trailer."""
    for rev in revisions:
        if not rev or rev.startswith("-"):
            raise UsageError(f"{_shown(rev)!r} is not a revision range (options are not passed on)")
    require = commits.config_bool(REQUIRE_CONFIG) if require_claim is None else require_claim
    try:
        new = list_commits(commits, revisions=revisions)
    except StoreError as exc:
        raise UsageError(f"cannot list the commits of {' '.join(revisions)}: {exc}") from None
    findings = judge_commits(claims, new)
    unclaimed = []
    bare = [c.oid for c in new if not c.trailers]
    if require and bare:
        unclaimed = [Unclaimed(" ".join(revisions), len(bare), tuple(bare[:SHOWN_COMMITS]))]
    return Report(len(new), tuple(findings), tuple(unclaimed), require, ())


def protect_patterns(git: Git, given: Sequence[str] | None = None) -> tuple[str, ...]:
    """``gitlease.protect`` (several values), or :data:`DEFAULT_PROTECT`; full ref names,
    where ``*`` matches any characters, ``/`` included."""
    patterns = tuple(given) if given else tuple(p.strip() for p in git.config_all(PROTECT_CONFIG))
    for pattern in patterns:
        if not pattern.startswith("refs/"):
            raise UsageError(
                f"bad {PROTECT_CONFIG} pattern {_shown(pattern)!r}: it must be a full ref name "
                "or pattern, such as refs/heads/main or refs/heads/*"
            )
    return patterns or DEFAULT_PROTECT


# ------------------------------------------------------------------ prepare-commit-msg


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
    out = []
    for binding in bindings_mod.bindings(git_dir):
        if isinstance(binding, Path):
            raise UsageError(f"the binding {binding} is unreadable; run `gitlease unbind`")
        receipt = receipts_mod.read(Path(binding.receipt))
        claim = receipt.claim_for(binding.resource)
        if claim is None or claim.claim_id != binding.claim_id:
            raise UsageError(
                f"receipt {binding.receipt} does not hold claim {binding.claim_id} on "
                f"{binding.resource}"
            )
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
    raise UsageError(f"bad boolean value {_shown(text)!r} for {key} in git config")


def _is_blank(text: bytes, comment: bytes) -> bool:
    for line in text.splitlines():
        if line.startswith(comment) and b" >8 " in line:
            return True
        if line.strip() and not line.startswith(comment):
            return False
    return True


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise StoreError(f"cannot write the commit message {path}: {exc.strerror}") from None


# ------------------------------------------------------------------ small helpers


def _shown(text: str) -> str:
    """Text from a commit or a record, safe to print: control characters escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _wrapped(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, 92, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False)  # fmt: skip


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _commits(shown: tuple[str, ...], count: int) -> str:
    text = ", ".join(oid[:12] for oid in shown)
    return text + (f" and {count - len(shown)} more" if count > len(shown) else "")


# ------------------------------------------------------------------ entry points


def pre_receive(stdin: str) -> int:
    """The server hook: 0 lets the push through; 1 refuses it, saying why on stderr."""
    try:
        report = check_push(parse_updates(stdin), commits=Git(), claims=Git())
    except GitleaseError as exc:
        sys.stderr.write(f"gitlease: push refused: {exc} (fail closed)\n")
        return 1
    except Exception as exc:  # fail closed on anything unexpected
        sys.stderr.write(f"gitlease: push refused: the fence check failed ({exc!r}); fail closed\n")
        return 1
    if report.ok:
        return 0
    sys.stderr.write(report.explain("gitlease: push"))
    return 1


def prepare_commit_msg(args: list[str]) -> int:
    """The commit hook's prepare-commit-msg with trailers on: the claim check, then the
    trailers, in one process. A trailer that cannot be added refuses the commit: a claim is
    bound, and a strict server would refuse the commit without it."""
    from . import hookcheck

    code = hookcheck.main(["prepare-commit-msg", *args])
    if code:
        return code
    if not args:
        sys.stderr.write("gitlease (prepare-commit-msg): no commit message file given\n")
        return 1
    try:
        add_trailers(Path(args[0]))
    except GitleaseError as exc:
        sys.stderr.write(f"gitlease (prepare-commit-msg): commit refused: cannot add the {TRAILER} "
                         f"trailer: {exc}\n")  # fmt: skip
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["pre-receive"]:
        return pre_receive(sys.stdin.buffer.read().decode("utf-8", "surrogateescape"))
    if args[:1] == ["prepare-commit-msg"]:
        return prepare_commit_msg(args[1:])
    sys.stderr.write("usage: python -m gitlease.fence pre-receive | prepare-commit-msg FILE\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
