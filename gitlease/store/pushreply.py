"""What a ``git push`` or ``git fetch`` to the coordinating remote answered, read from git's
output: the status of each ref, why a ref was refused (a race, the server's policy, no
verdict), whether git says the push ended before any pack was sent, and the server's own
``remote:`` lines for a message. :class:`~gitlease.store.remote.RemoteStore` decides from these.
"""

from __future__ import annotations

import re
import subprocess

from .._util import lazy
from .._util.text import printable_lines
from ..gitio.gitread import stderr_text

#: ``git push --porcelain`` reasons for a refused ref. A race: the ref was not what we
#: expected, or a racer held its lock (receive-pack: "atomic transaction failed"); decide
#: again from a fresh fetch. A sibling: refused only because another ref of the same atomic
#: push was. No verdict: the server did not say (settle by looking). Anything else is the
#: server's policy (a hook, a hidden or protected ref).
_RACE_REASONS = ("stale info", "fetch first", "atomic transaction failed", "failed to update",
                 "failed to lock", "cannot lock")  # fmt: skip
_SIBLING_REASONS = ("atomic push failed", "atomic push failure")
_NO_VERDICT = ("remote failure", "remote failed to report")
#: git's own words (never the server's ``remote:`` lines) when a push ended before any pack
#: was sent: it could not read the remote's first answer, or that answer was a refusal.
_BEFORE_PACK = lazy(
    "|".join(
        [
            r"Could not read from remote repository",  # ssh, file: connect.c die_initial_contact
            r"does not appear to be a git repository",
            r"unable to connect to",  # git://
            r"unable to access '",  # http(s): the first request failed (403, no connection)
            r"Authentication failed for '",  # http(s): the first request, 401 with credentials
            r"repository '.*' not found",  # http(s): the first request, 404
            r"could not read (Username|Password) for",  # a 401, and no credentials to retry with
            r"Could not resolve host",
        ]
    )
)
#: ... unless git also says the pack went out (an HTTP POST that was answered with an error).
_PACK_SENT = lazy(r"RPC failed|send-pack: ")
#: An answer to the POST that carried the pack, by which the server refused to process it.
_HTTP_REFUSED = lazy(r"RPC failed; HTTP (4\d\d)\b")
#: Of those refusals, the ones that say nothing answered there: the network, or no repository.
_UNREACHABLE = lazy(
    "|".join(
        [
            r"Could not resolve host",
            r"Connection refused",
            r"Couldn't connect to server",
            r"Failed to connect to",
            r"[Tt]imed out",
            r"No route to host",
            r"Network is unreachable",
            r"Connection reset",
            r"Connection closed",
            r"kex_exchange_identification",
            r"unable to connect to",
            r"does not appear to be a git repository",
            r"repository '.*' not found",
            r"returned error: 5\d\d",
        ]
    )
)


#: The transport itself failed before the server's first answer (not the server, not the
#: network's refusal): the connection was reset or closed during the ssh handshake, or the
#: ssh process died on this host.
_TRANSPORT = lazy(
    "|".join(
        [
            r"died of signal",  # git: the ssh command was killed
            r"Killed by signal",  # ssh, on SIGTERM/SIGINT
            r"kex_exchange_identification",
            r"ssh_exchange_identification",
            r"Connection reset by",
            r"Connection closed by",
            r"closed by remote host",
            r"Broken pipe",
            r"banner exchange",
            r"ssh_dispatch_run_fatal",
        ]
    )
)
#: git's own lines that say nothing of why (the hint after "Could not read from remote").
_HINT = ("Please make sure you have the correct access rights", "and the repository exists.")


def _silent_end(own: str) -> bool:
    """git could not read the remote's first answer, and nothing else said why: the
    connection's program ended without a word (an ssh killed with SIGKILL, under a shell)."""
    lines = [line.strip() for line in own.splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(_HINT)]
    return said == ["fatal: Could not read from remote repository."]


def _own_lines(result: subprocess.CompletedProcess[bytes]) -> str:
    """git's own lines of stderr, without the server's ``remote:`` lines."""
    text = result.stderr.decode("utf-8", "replace")
    return "\n".join(line for line in text.splitlines() if not line.startswith("remote:"))


def before_pack(result: subprocess.CompletedProcess[bytes] | None) -> str | None:
    """ "transport", "unreachable" or "refused" when git itself says the push ended before
    any pack was sent, and exited on its own (nothing can land); None when it does not say
    so. "transport": the connection failed on the way (reset or closed during the ssh
    handshake, the ssh process killed here), which is neither the server's refusal nor a
    remote that cannot be reached at all."""
    if result is None or result.returncode <= 0:
        return None
    own = _own_lines(result)
    if not _BEFORE_PACK.search(own) or _PACK_SENT.search(own):
        return None
    if _TRANSPORT.search(own) or _silent_end(own):
        return "transport"
    return "unreachable" if _UNREACHABLE.search(own) else "refused"


#: git's own words when the server did not advertise a capability the push asked for; git
#: stops before it sends anything.
_MISSING_CAPABILITY = lazy(r"the receiving end does not support (--[a-z-]+)")
#: What the server lacks, said in its own settings' words.
_CAPABILITY = {
    "--atomic": "atomic push (git's `receive.advertiseAtomic` is off there, or the server "
    "does not offer it at all)",
    "--force-with-lease": "leased push",
}


def missing_capability(result: subprocess.CompletedProcess[bytes] | None) -> str | None:
    """The capability the server lacks when git refused to push for want of it (nothing was
    sent: git checks the server's advertised capabilities before it builds the pack)."""
    if result is None or result.returncode <= 0:
        return None
    found = _MISSING_CAPABILITY.search(_own_lines(result))
    if found is None:
        return None
    return _CAPABILITY.get(found.group(1), f"the {found.group(1)} option of git push")


def http_refusal(result: subprocess.CompletedProcess[bytes] | None) -> str | None:
    """The HTTP status (4xx) that refused the request carrying the pack, if git says so."""
    if result is None or result.returncode <= 0:
        return None
    own = _own_lines(result)
    found = _HTTP_REFUSED.search(own)
    if found:
        return found.group(1)
    if re.search(r"could not read (Username|Password) for", own):
        return "401"  # the POST was answered 401, and there are no credentials to retry with
    return None


def checked_before_sending(reason: str) -> bool:
    """A refusal by git's own check against the refs the server showed (``[rejected]
    (stale info)``, and the atomic siblings): no pack was sent. The server's own
    refusals read ``[remote rejected] (...)``."""
    return "[remote " not in reason


def server_said(result: subprocess.CompletedProcess[bytes] | None) -> str:
    """The server's ``remote:`` lines (a hook's reason, gitolite's DENIED), for a message."""
    if result is None:
        return ""
    lines: list[str] = []
    for line in result.stderr.decode("utf-8", "replace").splitlines():
        line = printable_lines(line.rstrip())
        if line.startswith("remote:") and line[7:].strip() and line not in lines:
            lines.append(line[:300])
    return "".join(f"\n{line}" for line in lines[:8])


def classify(reason: str) -> str:
    """What one refused ref's reason means: unknown (no verdict), sibling, race or policy."""
    if any(words in reason for words in _NO_VERDICT):
        return "unknown"
    if any(words in reason for words in _SIBLING_REASONS):
        return "sibling"
    if any(words in reason for words in _RACE_REASONS):
        return "race"
    return "policy"


def rejection(reasons: list[str]) -> str | None:
    """One verdict for an atomic push's refused refs: race, policy, unknown, or None."""
    kinds = {classify(r) for r in reasons}
    for verdict in ("unknown", "race", "policy"):
        if verdict in kinds:
            return verdict
    return "race" if kinds else None  # only siblings: nothing was written


def push_statuses(out: bytes) -> dict[str, tuple[str, str]]:
    """``git push --porcelain`` lines: destination ref -> (flag, summary)."""
    statuses = {}
    for line in out.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0] in ("*", "+", "-", "=", "!", " "):
            statuses[parts[1].rpartition(":")[2]] = (parts[0], parts[2])
    return statuses


def network_error(result: subprocess.CompletedProcess[bytes] | None) -> str:
    """The store's wording, plus the two ways a network call can end without git's own."""
    if result is None:
        return "no answer in time"
    if result.returncode < 0:
        text = result.stderr.decode("utf-8", "replace").strip()
        text = printable_lines(text)
        return f"git was killed by signal {-result.returncode}" + (f": {text}" if text else "")
    return printable_lines(stderr_text(result))
