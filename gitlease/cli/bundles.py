"""`gitlease bundle ...`: several resources taken, renewed, checked and released together."""

from __future__ import annotations

from typing import Any

import click

from .app import Options, acquire_options, cli, command, emit, open_store

_LEAD = {"help_option_names": ["-h", "--help"]}


@cli.group("bundle", context_settings=_LEAD)
def bundle() -> None:
    """Claim several resources all or nothing, and act on all of them."""


def _text(verb: str, result_id: str | None, claims: list[Any]) -> str:
    lines = [f"{verb} bundle {result_id}"]
    lines += [f"  {c.describe()}" for c in claims]
    return "\n".join(lines)


@command(bundle, "acquire")
@click.argument("resources", nargs=-1, required=True)
@acquire_options("every claim")
def acquire(
    opts: Options, resources: tuple[str, ...], no_bind: bool, key_: str | None, **options: Any
) -> None:
    """Take every RESOURCE or none (exit 3 if any is held)."""
    from .. import bundle as B
    from ..providers import canonical_key

    names = [canonical_key(key_, r) for r in resources] if key_ else list(resources)
    result = B.acquire_many(open_store(opts), names, bind=not no_bind, **options)
    emit(
        opts,
        result.to_dict(),
        _text("acquired", result.bundle_id, result.claims) + f"\nreceipt {result.receipt.path}",
    )


def _bundle_command(name: str, doc: str, option: tuple[str, str] | None) -> None:
    def run(opts: Options, bundle_id: str | None, receipt: str | None, **kw: str | None) -> None:
        from .. import bundle as B

        store = open_store(opts)
        if name == "show":
            bid, claims = B.show(store, bundle_id, receipt=receipt)
        else:
            result = getattr(B, name)(store, bundle_id, receipt=receipt, **kw)
            bid, claims = result.bundle_id, result.claims
        doc = {"bundle_id": bid, "claims": [c.to_dict() for c in claims]}
        emit(
            opts,
            doc,
            _text(
                {
                    "show": "members of",
                    "check": "held:",
                    "heartbeat": "renewed",
                    "release": "released",
                }[name],
                bid,
                claims,
            ),
        )

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
