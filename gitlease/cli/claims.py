"""Commands on single claims: where, key, acquire, heartbeat, release, check, show, list...."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ..api.output import format_duration, printable
from ..errors import GitleaseError, UsageError
from . import output
from .app import (
    Options,
    OutputFailed,
    answering_owned,
    cli,
    command,
    emit,
    emit_taken,
    open_store,
)
from .arguments import acquire_options, key_option, read_items, resolve_resource
from .hooks import commit_check_warning, stale_binding_warnings

if TYPE_CHECKING:
    from .. import Claim


def _mode_note(doc: dict[str, Any]) -> str:
    return f"\n{doc['guarantee']}" if doc.get("mode") == "coordination-only" else ""


@command(cli, "where")
@click.option("--path", "path_only", is_flag=True, help="Print only the store's path.")
def where(opts: Options, path_only: bool) -> None:
    """Print the store in use, why it was chosen, and how to inspect it with git."""
    from ..api.location import where as where_is

    doc = where_is(opts.store, opts.remote)
    store = doc["store"]
    if path_only:
        emit(opts, doc, store)
        return
    made = "" if doc["exists"] else "\n  (not there yet: the first acquire creates it)"
    text = f"{store}\n  ({doc['reason']}){made}\nreceipts {doc['receipts']}"
    if doc["remote"] is not None:
        text += f"\ncoordinated through the remote {doc['remote_url']}\n  ({doc['remote_reason']})"
    text += f"\ninspect with: {doc['inspect']}"
    emit(opts, doc, text)


@command(cli, "key")
@click.argument("provider")
@click.argument("items", nargs=-1, required=True)
@click.option("--tag", help="taskmaster: the tag (default master).")
def key(opts: Options, provider: str, items: tuple[str, ...], tag: str | None) -> None:
    """Print the canonical resource of each ITEM (one a line; `-` reads stdin)."""
    from ..providers import canonical_key

    options = {"tag": tag} if tag else {}
    keys = [
        {"input": i, "resource": canonical_key(provider, i, options=options)}
        for i in read_items(items)
    ]
    emit(opts, {"keys": keys}, "\n".join(k["resource"] for k in keys))


KEEPALIVE_HELP = (
    "Then keep the claim alive while the agent lives, as `gitlease keepalive` does (if that "
    "fails, the claim is released again)."
)


@command(cli, "acquire")
@click.argument("resources", nargs=-1, metavar="RESOURCE|CANDIDATE...")
@click.option(
    "--first-free",
    is_flag=True,
    help="Take exactly one claim: the first of the CANDIDATEs, in order, that can be acquired "
    "(`-`: one a line on stdin; with --key, provider references). Exit 3 (HELD) if none can.",
)
@acquire_options("the claim", KEEPALIVE_HELP)
def acquire(
    opts: Options,
    resources: tuple[str, ...],
    first_free: bool,
    no_bind: bool,
    key_: str | None,
    keepalive: bool,
    **options: Any,
) -> None:
    """Take a claim on RESOURCE: exit 0 with a receipt, or 3 (HELD) if someone holds it.

    With --first-free, take the first of the CANDIDATEs that can be acquired: held ones, and
    invalid records (reported on stderr and in `skipped`), are passed over. Every candidate is
    checked before anything is acquired (exit 2 for a bad one). With --wait, wait until one
    can be taken. A plain `acquire RESOURCE` takes exactly one RESOURCE.
    """
    from ..api import answering as window

    window.arm()  # a signal after the write releases the claims again
    from ..api.answering import undo_acquire

    if first_free:
        candidates = _candidates(read_items(resources), key_)
    elif len(resources) != 1:
        raise UsageError(
            "acquire takes one RESOURCE (for the first free of several: --first-free; "
            "for all of them at once: bundle acquire)"
        )
    else:
        resource = resolve_resource(resources[0], key_)
    store = open_store(opts)
    if keepalive:  # the process to watch, found before acquiring (USAGE if there is none)
        from ..keepalive.start import keep_acquired, watched_process

        watched = watched_process(watch_from=os.getppid())
    status = _WaitLine() if options["wait"] and not opts.json and sys.stderr.isatty() else None
    try:
        if first_free:
            from ..api.lease import acquire_first_free

            result = acquire_first_free(
                store, candidates, bind=not no_bind, on_wait=status, **options
            )
        else:
            from ..api.lease import acquire as do_acquire

            result = do_acquire(store, resource, bind=not no_bind, on_wait=status, **options)
    finally:
        if status:
            status.clear()
    for claim in result.skipped or ():
        with contextlib.suppress(OSError):  # the claim is taken: a closed stderr must not fail it
            click.echo(
                f"gitlease: skipped {claim.resource}: its record is invalid "
                f"({printable(claim.problem or '')}); it is never granted over. "
                "Run `gitlease verify`",
                err=True,
            )
    doc = result.to_dict()
    commit_check_warning(opts, doc, store.location.worktree)
    stale_binding_warnings(opts, doc, store, [result.claim.ref])
    text = f"acquired {result.claim.describe()}\nreceipt {doc['receipt']}" + _mode_note(doc)
    if keepalive:
        keeper = keep_acquired(store, result.receipt, watched)
        doc["keepalive"] = keeper.to_dict()
        text += "\n" + keeper.describe()
    emit_taken(opts, doc, text, undo=lambda why: undo_acquire(store, result.receipt, why))


def _candidates(items: list[str], key_: str | None) -> list[str]:
    """``--first-free``'s candidates as resources (provider references read with ``--key``)."""
    candidates = []
    for number, item in enumerate(items, 1):
        try:
            candidates.append(resolve_resource(item, key_))
        except UsageError as exc:
            raise UsageError(
                f"--first-free: candidate {number}: {exc.message}; nothing was acquired"
            ) from None
    return candidates


class _WaitLine:
    """One live status line on stderr while ``acquire --wait`` retries."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, waiting: Any) -> None:
        holder = waiting.holder
        who = "your turn" if waiting.ahead else "a running guarded operation"
        if holder is not None and holder.record is not None:
            left = format_duration(holder.expires_in_ms or 0)
            who = f"{printable(holder.record.owner)} ({left} left)"
        if waiting.candidates > 1:
            who = f"any of {waiting.candidates} candidates (the soonest: {who})"
        if waiting.ahead:
            who += f", {waiting.ahead} ahead of you in line"
        line = (
            f"waiting for {who}: attempt {waiting.attempt}, "
            f"waited {format_duration(waiting.waited_ms)}"
        )
        sys.stderr.write("\r\033[K" + line)
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            with contextlib.suppress(OSError):  # (after the acquire: must not fail it)
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()


def _owned(name: str, help_text: str, verb: str, option: tuple[str, str]) -> None:
    """A command on one owned claim (``gitlease.api.lease``'s function of that name):
    [RESOURCE], --receipt, --key and the command's own ``option`` (flag, help)."""

    def run(
        opts: Options, resource: str | None, receipt: str | None, key_: str | None, **kw: Any
    ) -> None:
        from ..api import lease

        act = getattr(lease, name)
        # (a signal that meets the write: the answer is the write's)
        with answering_owned(name) if name != "check" else contextlib.nullcontext():
            claim = act(open_store(opts), resolve_resource(resource, key_), receipt=receipt, **kw)
            doc = claim.to_dict()
            emit(opts, doc, f"{verb} {claim.describe()}" + _mode_note(doc))

    run.__doc__ = help_text
    run.__name__ = name
    f: Callable[..., Any] = click.option(option[0], help=option[1])(run)
    f = key_option(f)
    f = click.option(
        "--receipt",
        type=click.Path(),
        help="The receipt of the claim (default: this worktree's).",
    )(f)
    f = click.argument("resource", required=False)(f)
    command(cli, name)(f)


_owned(
    "heartbeat",
    "Extend your claim by its TTL (exit 4, LOST, if it already expired).",
    "renewed",
    ("--ttl", "A new TTL for this and later heartbeats."),
)
_owned(
    "release",
    "Release your claim, optionally with a checkpoint (where progress was written).",
    "released",
    ("--checkpoint", "Where the durable progress is, e.g. a provider comment URL."),
)
_owned(
    "check",
    "Exit 0 if you still hold the claim (with --min-remaining left), else 4 (LOST).",
    "held:",
    ("--min-remaining", "Require at least this much time left."),
)


@command(cli, "show")
@click.argument("resource")
@key_option
def show(opts: Options, resource: str, key_: str | None) -> None:
    """Show the record of RESOURCE (never secret): active, expired, released or free."""
    from ..api.reads import show as do_show

    claim = do_show(open_store(opts), resolve_resource(resource, key_))
    emit(opts, claim.to_dict(), output.claim_detail(claim.to_dict()))


@command(cli, "list")
@click.option(
    "--state",
    type=click.Choice(["active", "expired", "released", "invalid"]),
    help="Only claims in this state.",
)
@click.option("--prefix", help="Only resources that start with this text.")
@click.option(
    "--watch",
    is_flag=True,
    help="Keep the table on screen, redrawn as claims change (Ctrl-C ends it); on a stdout "
    "that is not a terminal, one table each time the claims change.",
)
@click.option("--all", "all_", is_flag=True, help="With --watch: show released claims too.")
def list_(
    opts: Options, state: str | None, prefix: str | None, watch: bool, all_: bool
) -> int | None:
    """List every claim: a table for people, JSON for programs."""
    from ..api.reads import claims_document, iter_claims, list_claims
    from ..api.stale import bound, review

    if watch:
        if opts.json or state or prefix:
            raise UsageError("--watch is a view for people: it takes no --json, --state, --prefix")
        from .board import watch as run_watch

        return run_watch(opts, all_)
    if all_:
        raise UsageError("--all goes with --watch (list without --watch shows every claim)")

    store = open_store(opts)
    stale: list[dict[str, Any]] = []
    claims: list[Claim] | None = None
    if bound(store):  # the bindings are judged by the claims just read (the store read once)
        claims = list_claims(store, state=state, prefix=prefix)
        stale = [s.to_dict() for s in review(store, drop=False, claims=claims)]
    if opts.json and not stale:  # streamed: 100,000 claims are never held whole
        from ..api.output import gc_paused
        from .jsonout import print_sorted_claims_json

        batches = iter_claims(store, state=state, prefix=prefix) if claims is None else [claims]
        try:
            with gc_paused():
                print_sorted_claims_json(
                    ([c.to_dict() for c in batch] for batch in batches), "resource"
                )
        except GitleaseError:
            raise  # (a store that cannot be read: its own code; nothing was written yet)
        except OSError as exc:
            raise OutputFailed(exc) from None
        return None
    if claims is None:
        claims = list_claims(store, state=state, prefix=prefix)
    doc = claims_document(claims)
    text = None
    if not opts.json:
        text = output.claim_table(doc["claims"])
        text += "".join(
            f"\nthis worktree has a stale binding to {printable(s['resource'])} "
            f"(claim {s['claim_id']}): {printable(s['why'])}"
            for s in stale
        )
    if stale:  # (only then: a plain list stays {"claims": [...]})
        doc["stale_bindings"] = stale
    emit(opts, doc, text)
    return None


@command(cli, "free")
@click.argument("resources", nargs=-1)
def free(opts: Options, resources: tuple[str, ...]) -> None:
    """Of the given resources (`-`: one a line on stdin), print those that can be acquired now."""
    from ..api.reads import free as do_free

    claims = [c.to_dict() for c in do_free(open_store(opts), read_items(resources))]
    emit(opts, {"claims": claims}, "\n".join(c["resource"] for c in claims))


@command(cli, "log")
@click.argument("resource")
@key_option
def log(opts: Options, resource: str, key_: str | None) -> None:
    """The history of RESOURCE, oldest first: one line per transition."""
    from ..api.history import history

    resource = resolve_resource(resource, key_)
    kept = history(open_store(opts), resource)
    doc = kept.to_dict()
    emit(opts, doc, output.log_lines(doc["records"], kept.start_text()))
