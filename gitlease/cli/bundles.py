"""`gitlease bundle ...`: several resources taken, renewed, checked and released together."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import click

from .app import (
    Options,
    answering_owned,
    cli,
    command,
    emit,
    emit_taken,
    open_store,
    shared_options,
)
from .arguments import acquire_options
from .hooks import commit_check_warning, stale_binding_warnings

_LEAD = {"help_option_names": ["-h", "--help"]}


@cli.group("bundle", context_settings=_LEAD)
@shared_options
def bundle() -> None:
    """Claim several resources all or nothing, and act on all of them."""


def _never_written(claims: list[Any], receipt: Any) -> str:
    """The members a release passed over: their records were never written (a partial
    bundle, docs/concepts.md), so there was nothing of the caller's to release."""
    ours = {(c.ref, c.claim_id) for c in receipt.claims}
    missing = [
        c.resource for c in claims if c.record is None or (c.ref, c.record.claim_id) not in ours
    ]
    if not missing:
        return ""
    return f"\nnot held, never written (the bundle's acquire was interrupted): {', '.join(missing)}"


def _text(verb: str, result_id: str | None, claims: list[Any]) -> str:
    lines = [f"{verb} bundle {result_id}"]
    lines += [f"  {c.describe()}" for c in claims]
    said = next((c.guarantee for c in claims if c.coordination_only), None)
    if said is not None:  # every output about such a claim says so
        lines.append(said)
    return "\n".join(lines)


KEEPALIVE_HELP = (
    "Then keep every member alive while the agent lives, as `gitlease bundle keepalive` does "
    "(if that fails, they are released again)."
)
WHILE_PID_HELP = (
    "Keep them alive while this process lives (default: the agent, the nearest process above "
    "this one that is neither a shell nor gitlease)."
)


@command(bundle, "acquire")
@click.argument("resources", nargs=-1, required=True)
@acquire_options("every claim", KEEPALIVE_HELP)
def acquire(
    opts: Options,
    resources: tuple[str, ...],
    no_bind: bool,
    key_: str | None,
    keepalive: bool,
    **options: Any,
) -> None:
    """Take every RESOURCE or none (exit 3 if any is held)."""
    from ..api import answering as window

    window.arm()  # a signal after the write releases the claims again

    from ..api import bundle as B
    from ..api.answering import undo_acquire
    from ..providers import canonical_key

    names = [canonical_key(key_, r) for r in resources] if key_ else list(resources)
    store = open_store(opts)
    if keepalive:  # the process to watch, found before acquiring (USAGE if there is none)
        from ..keepalive.start import keep_acquired, watched_process

        watched = watched_process(watch_from=os.getppid())
    result = B.acquire_many(store, names, bind=not no_bind, **options)
    doc = result.to_dict()
    text = _text("acquired", result.bundle_id, result.claims) + f"\nreceipt {result.receipt.path}"
    bound = {"bound": any(c.get("bound") for c in doc["claims"])}
    commit_check_warning(opts, bound, store.location.worktree)
    if "commit_check" in bound:
        doc["commit_check"] = bound["commit_check"]
    stale_binding_warnings(opts, doc, store, [c.ref for c in result.claims])
    if keepalive:
        keeper = keep_acquired(store, result.receipt, watched)
        for claim in doc["claims"]:
            claim["keepalive"] = keeper.to_dict()
        text += "\n" + keeper.describe()
    emit_taken(opts, doc, text, undo=lambda why: undo_acquire(store, result.receipt, why))


@command(bundle, "keepalive")
@click.argument("bundle_id", required=False)
@click.option("--while-pid", type=int, metavar="PID", help=WHILE_PID_HELP)
@click.option("--max", "max_", metavar="D", help="Stop after this long at the latest (4h).")
@click.option("--receipt", type=click.Path(), help="The bundle's receipt.")
def keepalive(
    opts: Options,
    bundle_id: str | None,
    while_pid: int | None,
    max_: str | None,
    receipt: str | None,
) -> None:
    """Renew every member in a detached process while the agent lives (see `keepalive`)."""
    from ..keepalive.start import keep_bundle_alive

    result = keep_bundle_alive(
        open_store(opts),
        bundle_id,
        receipt=receipt,
        while_pid=while_pid,
        max_duration=max_,
        watch_from=os.getppid(),
    )
    doc = {"bundle_id": result.bundle_id, "claims": [c.to_dict() for c in result.claims]}
    keeper = result.claims[0].keepalive
    emit(
        opts,
        doc,
        _text("kept", result.bundle_id, result.claims) + f"\n{keeper and keeper.describe()}",
    )


def _bundle_command(name: str, doc: str, option: tuple[str, str] | None) -> None:
    def run(opts: Options, bundle_id: str | None, receipt: str | None, **kw: str | None) -> None:
        from ..api import bundle as B

        writes = name in ("heartbeat", "release")  # (a signal that meets the write: its answer)
        with answering_owned(f"bundle {name}") if writes else contextlib.nullcontext():
            store = open_store(opts)
            if name == "show":
                bid, claims = B.show(store, bundle_id, receipt=receipt)
            else:
                result = getattr(B, name)(store, bundle_id, receipt=receipt, **kw)
                bid, claims = result.bundle_id, result.claims
            doc = {"bundle_id": bid, "claims": [c.to_dict() for c in claims]}
            verb = {"show": "members of", "check": "held:", "heartbeat": "renewed",
                    "release": "released"}[name]  # fmt: skip
            text = _text(verb, bid, claims)
            if name == "release":
                text += _never_written(claims, result.receipt)
            emit(opts, doc, text)

    run.__doc__ = doc
    run.__name__ = f"bundle_{name}"
    if option is not None:
        run = click.option(option[0], help=option[1])(run)
    run = click.option("--receipt", type=click.Path(), help="The bundle's receipt.")(run)
    run = click.argument("bundle_id", required=False)(run)
    command(bundle, name)(run)


_bundle_command(
    "heartbeat",
    "Renew every member (exit 4 naming the member if one was lost).",
    ("--ttl", "A new TTL for every member."),
)
_bundle_command(
    "release",
    "Release every member, optionally with a checkpoint.",
    ("--checkpoint", "Where the durable progress is."),
)
_bundle_command(
    "check",
    "Exit 0 if you still hold every member.",
    ("--min-remaining", "Require at least this much time left on every member."),
)
_bundle_command("show", "Show every member's record (from the receipt, or by bundle id).", None)
