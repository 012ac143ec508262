"""``gitlease mcp``: the Model Context Protocol server (docs/howto/mcp.md)."""

from __future__ import annotations

from importlib import import_module

from ..errors import UsageError
from . import jsonout
from .app import Options, cli, command

INSTALL = "pip install 'gitlease[mcp]'"


@command(cli, "mcp")
def mcp(opts: Options) -> None:
    """Serve the commands as MCP tools on stdin/stdout, for an agent's harness.

    Run it in the agent's worktree: claims are bound to it and their receipts live
    there, as from the command line. The claims taken through the server are renewed
    while it runs; when it ends they are left to expire after their TTL, never
    released. Needs the extra: pip install 'gitlease[mcp]'.
    """
    try:
        import_module("mcp.server.lowlevel")  # the SDK, from the extra
    except ImportError:
        raise UsageError(
            f"gitlease mcp needs the MCP SDK (the `mcp` package, 2.x): {INSTALL}"
        ) from None
    from ..mcp.renewal import Renewals
    from ..mcp.server import Cli, Session, serve
    from ..mcp.warm import Warm
    from . import app
    from .app import LazyGroup, main

    shared = ["--json"]
    if opts.store is not None:
        shared.append(f"--store={opts.store}")
    if opts.remote is not None:
        shared.append(f"--remote={opts.remote}")
    warm = app.resident = Warm()

    def invoke(argv: list[str]) -> int:
        try:
            return main(argv)
        finally:
            warm.release()  # this call's stores go back to the pool

    renewals = Renewals(lambda: warm.open_store(opts.store, opts.remote))
    session = Session(
        Cli(invoke=invoke, error_document=jsonout.error_document, json_text=jsonout.json_text),
        renewals,
        shared=shared,
        commands=set(LazyGroup.modules),
    )
    serve(session)
