"""The fence check: a push or a range of commits, judged against the claims' records.

List the commits with one ``git log`` (their trailers parsed by git itself), read each
distinct claim's record once with one ``git cat-file --batch``, verify it, and judge: a
trailer passes only when its claim is the resource's current claim and still held there.
An expired claim that nobody replaced passes: no other host's clock is ever judged. See
docs/fencing.md.

It runs on every push: no pygit2, no click, and cryptography only when a record is verified.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from .._util.text import printable_strict
from ..errors import CorruptRecordError, StoreError, UsageError
from ..model.refname import PREFIX
from .git import (
    NEW_TO_THE_REPOSITORY,
    PROTECT_CONFIG,
    REQUIRE_CONFIG,
    Commit,
    Git,
    Update,
    list_commits,
    read_blobs,
)
from .report import ACCEPTED, Finding, Report, Unclaimed
from .trailer import Trailer, parse_trailer

if TYPE_CHECKING:
    from ..model.record import Record

#: What ``gitlease.requireClaim`` protects when ``gitlease.protect`` is not set.
DEFAULT_PROTECT = ("refs/heads/*",)
#: Commits named in a message per finding; the count says how many there were.
SHOWN_COMMITS = 3

#: A record read at the server: its bytes, or None and why not (None: the ref names nothing).
Blob = tuple[bytes | None, str | None]
#: (verdict, detail for people, the current claim as a document or None).
Verdict = tuple[str, str, Any]


def judge(trailer: Trailer, blob: Blob) -> Verdict:
    """(verdict, detail, current claim) for a trailer against a record read at the server.

    Accepted only when the record verifies, names the resource, holds the trailer's claim
    and revision, and is not released. Expiry is not judged: an expired claim that nobody
    replaced is still the current one, and the server never reads another host's clock.
    """
    found = _trusted_record(trailer, blob)
    if isinstance(found, tuple):
        return found
    return _against(trailer, found)


def _trusted_record(trailer: Trailer, blob: Blob) -> Record | Verdict:
    """The server's record of the trailer's resource, or the verdict where there is none to
    trust: no record (unknown), or one that cannot be read, does not verify, or names another
    resource (invalid)."""
    from ..model.record import parse, verify

    data, problem = blob
    r = trailer.resource
    if data is None and problem is None:
        return (
            "unknown",
            f"the server has no claim on {printable_strict(r)}: claim {trailer.claim_id} is "
            "unknown here",
            None,
        )
    if data is None:
        return (
            "invalid",
            f"the server's record of {printable_strict(r)} cannot be read: {problem}",
            None,
        )
    try:
        record = parse(data)
        verify(record)
    except CorruptRecordError as exc:
        return (
            "invalid",
            f"the server's record of {printable_strict(r)} does not verify "
            f"({printable_strict(str(exc))}): it is not trusted",
            None,
        )
    if record.resource != r:
        return (
            "invalid",
            f"the server's ref of {printable_strict(r)} holds a record for "
            f"{printable_strict(record.resource)}: it is not trusted",
            None,
        )
    return record


def _against(trailer: Trailer, record: Record) -> Verdict:
    """The trailer's claim against the server's trusted record: current, released, replaced
    by a later claim, or unknown to the server."""
    r = printable_strict(trailer.resource)
    current = {
        "claim_id": record.claim_id,
        "owner": record.owner,
        "revision": record.revision,
        "state": record.state,
    }
    mine = _mine(trailer)
    if record.claim_id == trailer.claim_id and record.revision == trailer.revision:
        if record.held:
            return ACCEPTED, f"{mine} is the current claim on {r}", current
        return (
            "released",
            f"{mine} on {r} is released at the server (its holder, "
            f"{printable_strict(record.owner)}, released it): work done under it can no longer "
            "land",
            current,
        )
    now = (
        f"claim {record.claim_id} by {printable_strict(record.owner)}, revision "
        f"{record.revision}, {record.state}"
    )
    if record.revision > trailer.revision and record.claim_id != trailer.claim_id:
        return (
            "replaced",
            f"the current claim on {r} is {now}: it replaced {mine}, the claim in the commits",
            current,
        )
    return "unknown", f"the current claim on {r} is {now}: the server does not know {mine}", current


def _mine(trailer: Trailer) -> str:
    """The trailer's claim, as a refusal names it."""
    return f"claim {trailer.claim_id} (revision {trailer.revision})"


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
        if verdict == ACCEPTED and trailer.ref in after:
            moved = after[trailer.ref]
            blob = (None, None) if set(moved) == {"0"} else blobs[moved]
            verdict, detail, current = _judge_after(trailer, blob, current)
        findings.append(
            Finding(value, trailer, verdict, detail, current, len(commits), shown, tuple(tips))
        )
    order = {"invalid": 0, "malformed": 1, "replaced": 2, "released": 3, "unknown": 4}
    return sorted(findings, key=lambda f: (order.get(f.verdict, 9), f.value))


def _judge_after(trailer: Trailer, blob: Blob, before: Any) -> Verdict:
    """The same push also moves the trailer's claim ref: the claim must hold after it too."""
    verdict, _, current = judge(trailer, blob)
    mine = _mine(trailer)
    if verdict == ACCEPTED:
        return (
            verdict,
            f"{mine} is the current claim on {printable_strict(trailer.resource)}",
            current,
        )
    if blob == (None, None):
        change = "deletes it"
    elif verdict == "released":
        change = f"releases {mine}"
    elif verdict == "invalid":
        change = "writes a record there that does not verify"
    elif current is not None:
        change = (
            f"gives it to claim {current['claim_id']} by {printable_strict(current['owner'])}, "
            f"revision {current['revision']}"
        )
    else:
        change = "changes it"
    detail = (
        f"{mine} is current on {printable_strict(trailer.resource)}, but this push also moves "
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
            raise UsageError(
                f"{printable_strict(rev)!r} is not a revision range (options are not passed on)"
            )
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
                f"bad {PROTECT_CONFIG} pattern {printable_strict(pattern)!r}: it must be a full "
                "ref name or pattern, such as refs/heads/main or refs/heads/*"
            )
    return patterns or DEFAULT_PROTECT
