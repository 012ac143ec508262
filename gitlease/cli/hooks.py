"""`gitlease hooks ...`: put the commit check in place, take it away, say whether it runs.

The exit code answers "are commits checked?": ``status`` exits 0 only when commits from this
worktree run the check, and ``install`` only when every worktree's do; otherwise 6
(PRECONDITION), with what is wrong and the fix, in words and in the JSON document.
"""

from __future__ import annotations

import contextlib
from typing import Any

import click

from ..errors import PreconditionError
from .app import Options, cli, command, emit, open_store, shared_options

_LEAD = {"help_option_names": ["-h", "--help"]}
_SERVER = click.option(
    "--server",
    is_flag=True,
    help="The server's pre-receive hook, which refuses pushes of work done under a claim "
    "that is not current there (run it in the repository that holds the claims).",
)


@cli.group("hooks", context_settings=_LEAD)
@shared_options
def hooks() -> None:
    """Install, remove or inspect the commit hooks that refuse commits without a live claim."""


def _hook_line(h: Any) -> str:
    extra = f"  (keeps the earlier hook {h.kept})" if h.kept else ""
    detail = f"  {h.detail}" if h.detail and h.state not in ("installed", "missing") else ""
    return f"{h.name:<20} {h.state:<10} {h.path}{extra}{detail}"


def _text(report: Any) -> str:
    here = report.here
    where = here.worktree or here.location.path
    verdict = "checked" if here.in_effect else "NOT checked"
    loc = here.location
    lines = [f"commits in {where} are {verdict}"]
    origin = f" (core.hooksPath {loc.configured}, {loc.scope})" if loc.configured else ""
    lines.append(f"hooks folder {loc.path}{origin}")
    lines += [_hook_line(h) for h in here.hooks]
    lines += [f"problem: {p}" for p in here.problems]
    if here.fix:
        lines.append(f"fix: {here.fix}")
    others = [w for w in report.worktrees if w is not here]
    for w in others:
        state = "checked" if w.in_effect else f"NOT checked: {w.fix or '; '.join(w.problems)}"
        lines.append(f"worktree {w.worktree}: {state}")
    # Writing gitlease's own hook shows in the listing above; anything else done is said here.
    lines += [c for c in report.changed if not c.startswith(("installed ", "updated "))]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


def _finish(opts: Options, report: Any, ok: bool) -> int:
    if ok:
        emit(opts, report.to_dict(), _text(report))
        return 0
    if opts.json:
        emit(opts, report.to_dict(), None)
    else:
        click.echo(_text(report), err=True)
    return PreconditionError.exit_code


def _server(opts: Options, name: str) -> int:
    from ..fence import server as serverhook

    states = getattr(serverhook, name)()
    lines = [
        f"{s.name:<20} {s.state:<10} {s.path}" + ("  (keeps the earlier hook)" if s.chained else "")
        for s in states
    ]
    emit(opts, {"hooks": [s.to_dict() for s in states]}, "\n".join(lines))
    return 0


@command(hooks, "install")
@_SERVER
def install(opts: Options, server: bool) -> int:
    """Put the check into the hooks of every worktree (exit 6 where it cannot).

    Installs pre-commit, prepare-commit-msg, pre-merge-commit, applypatch-msg and
    pre-applypatch. A hook already there keeps running first; a folder that is part of a
    checkout (a committed .githooks) is left alone, and the line to add is printed instead.
    With --server: the pre-receive hook.
    """
    if server:
        return _server(opts, "install")
    from ..hooks import install as githooks

    report = githooks.install()
    return _finish(opts, report, report.everywhere)


@command(hooks, "uninstall")
@_SERVER
def uninstall(opts: Options, server: bool) -> int:
    """Remove gitlease's hooks everywhere and restore the hooks they kept."""
    if server:
        return _server(opts, "uninstall")
    from ..hooks import install as githooks

    report = githooks.uninstall()
    here = report.here
    still = "still checked (by hooks that call gitlease-hook)" if here.in_effect else "not checked"
    lines = list(report.changed) or ["nothing of gitlease's was installed"]
    lines.append(f"commits in {here.worktree or here.location.path} are {still}")
    lines += [f"note: {n}" for n in report.notes]
    emit(opts, report.to_dict(), "\n".join(lines))
    return 0


@command(hooks, "status")
@_SERVER
def status(opts: Options, server: bool) -> int:
    """Say whether commits from this worktree run the check: exit 0 if so, 6 if not.

    With --server: which state the pre-receive hook is in (exit 0).
    """
    if server:
        return _server(opts, "status")
    from ..hooks import install as githooks

    report = githooks.status()
    listed = _bindings(opts)
    if listed is None:
        return _finish(opts, report, report.in_effect)
    doc, lines = report.to_dict(), [_text(report), *listed[1]]
    doc["bindings"] = listed[0]
    if report.in_effect:
        emit(opts, doc, "\n".join(lines))
        return 0
    if opts.json:
        emit(opts, doc, None)
    else:
        click.echo("\n".join(lines), err=True)
    return PreconditionError.exit_code


def _bindings(opts: Options) -> tuple[dict[str, Any], list[str]] | None:
    """This worktree's bindings for ``hooks status``: active and stale, and their lines."""
    from ..api.output import printable
    from ..api.stale import current_and_stale

    try:
        live, stale = current_and_stale(open_store(opts))
    except Exception:  # (the hooks' state is the answer; the bindings only add to it)
        return None
    doc = {
        "active": [{"resource": b.resource, "claim_id": b.claim_id} for b in live],
        "stale": [s.to_dict() for s in stale],
    }
    lines = [f"bound to {printable(b.resource)} (claim {b.claim_id})" for b in live]
    lines += [f"STALE binding to {printable(s.resource)} (claim {s.claim_id}): {s.why}"
              for s in stale]  # fmt: skip
    return doc, lines


def commit_check_warning(opts: Options, doc: dict[str, Any], worktree: Any) -> None:
    """After a claim was bound: warn when commits from this worktree would not be checked.

    The JSON document gains ``commit_check`` ({in_effect, problems, fix}) either way.
    """
    if not doc.get("bound"):
        return
    from ..hooks import install as githooks
    from . import app

    look = githooks.commit_check if app.resident is None else app.resident.commit_check
    try:
        found = look(worktree)
    except Exception as exc:  # the claim is taken: a failed look at the hooks must not hide it
        doc["commit_check"] = {"in_effect": None, "problems": [str(exc)], "fix": None}
        return
    if found is None:
        return
    doc["commit_check"] = {
        "in_effect": found.in_effect,
        "problems": list(found.problems),
        "fix": found.fix,
    }
    if not found.in_effect:
        lines = ["gitlease: warning: commits from this worktree are NOT checked against the claim"]
        lines += [f"  - {p}" for p in found.problems]
        if found.fix:
            lines.append(f"  fix: {found.fix}")
        with contextlib.suppress(OSError):  # the claim is taken: a closed stderr must not fail it
            click.echo("\n".join(lines), err=True)


def stale_binding_warnings(opts: Options, doc: dict[str, Any], store: Any, refs: Any) -> None:
    """After ``acquire`` or ``bind``: say which other bindings of this worktree are stale
    (on stderr, and as ``warnings`` in JSON), dropping those lapsed and replaced by someone
    else's claim (:mod:`gitlease.api.stale`). ``refs``: the refs just bound."""
    from ..api.stale import review

    try:
        stale = review(store, keep=set(refs))
    except Exception:  # the claim is taken: a failed look at old bindings must not hide it
        return
    doc["warnings"] = [s.to_dict() for s in stale]
    if stale:
        with contextlib.suppress(OSError):  # (a closed stderr must not fail the acquire)
            click.echo("\n".join(s.message() for s in stale), err=True)
