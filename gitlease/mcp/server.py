"""The protocol side: a stdio MCP server (the official SDK's low-level ``Server``) whose
tools are the commands (docs/howto/mcp.md; the choices: docs/design.md, the MCP server).

A call becomes the command's own ``--json`` run (:func:`gitlease.mcp.tools.argv`),
executed by the CLI in this process, in a thread of its own, with its stdout caught
(:mod:`.capture`). Its document is the result, as structured content and as the
same JSON text; a failure is a tool error (``isError``) whose content is the CLI's
error document, never a protocol error. The low-level server is used rather than
``MCPServer`` because the tools are declared by the table, with their JSON schemas,
and because a bad argument must be the CLI's USAGE document, not a validation
message of the SDK's.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from ..api.tokens import TOKEN_PREFIX
from ..errors import GitleaseError, LostError, UsageError
from . import capture, tools
from .renewal import Renewals

T = TypeVar("T")

#: What the server tells the model once, at the start of the session.
INSTRUCTIONS = (
    "gitlease: claims on units of work, so that agents never work on the same thing. Before "
    "starting on an issue or task, `acquire` it (or `acquire` with `first_free` over your "
    "backlog). HELD means someone else works on it: pick other work, do not wait unless told "
    "to. Call `check` right before every durable write (commit, push, comment). When done, "
    "`release` with a `checkpoint` saying where the progress is. This server renews your "
    "claims while the session lives; if the session ends they expire after their TTL."
)


@dataclass(frozen=True)
class Cli:
    """The CLI, handed in by ``gitlease mcp`` (this package sits below the CLI's layer):
    ``invoke(argv)`` runs a command line and returns its exit code; ``error_document``
    and ``json_text`` are how the CLI writes an error and a document."""

    invoke: Callable[[list[str]], int]
    error_document: Callable[[GitleaseError], dict[str, Any]]
    json_text: Callable[[Any], str]


class Session:
    """What one server holds: the tools offered, the CLI to run them, the renewals."""

    def __init__(
        self,
        cli: Cli,
        renewals: Renewals,
        *,
        shared: list[str],
        commands: set[str],
    ) -> None:
        self._invoke = cli.invoke
        self.error_document = cli.error_document
        self._json_text = cli.json_text
        self.renewals = renewals
        self._shared = shared
        self.tools = {t.name: t for t in tools.TOOLS if t.name in commands}
        self._stdout: capture.ThreadStdout | None = None

    def list_tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=t.name,
                description=t.description,
                input_schema=t.input_schema(),
                annotations=types.ToolAnnotations(
                    read_only_hint=t.read_only, destructive_hint=False, open_world_hint=False
                ),
            )
            for t in self.tools.values()
        ]

    def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[bool, dict[str, Any]]:
        """Run one tool: (failed, the document). Blocking: run in a thread of its own."""
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools)
            return True, self.error_document(UsageError(f"no tool {name!r} (tools: {known})"))
        try:
            argv = tools.argv(tool, arguments)
        except UsageError as exc:
            return True, self.error_document(exc)
        given = (arguments or {}).get("resource")
        paused = None
        if name == "release" and isinstance(given, str):
            paused = self.renewals.pause(given)  # (before: no renewal races the release)
        code, doc = self._run(argv)
        if paused is not None and code != 0 and not _lost(doc):
            # the release failed (a bad checkpoint, a store error): the claim is still held,
            # and must not lapse because this server stopped renewing it
            self.renewals.resume(paused)
        return self._after(name, given if isinstance(given, str) else None, code, doc)

    def _run(self, argv: list[str]) -> tuple[int, dict[str, Any]]:
        """The CLI's ``--json`` run of ``argv``: its exit code and its document."""
        assert self._stdout is not None, "serve() installs the captured stdout"
        with self._stdout.capture() as out:
            code = self._invoke([*self._shared, *argv])
        text = out.getvalue()
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):  # (the CLI answers every --json run with a document)
            problem = GitleaseError(f"the command answered no JSON document (exit {code})")
            return max(code, 1), self.error_document(problem)
        return code, doc

    def _after(
        self, name: str, given: str | None, code: int, doc: dict[str, Any]
    ) -> tuple[bool, dict[str, Any]]:
        """Keep the renewals in step with what the call did."""
        if code != 0:
            error = doc.get("error")
            if _lost(doc) and isinstance(error, dict):
                claim = error.get("claim")
                about = claim.get("resource") if isinstance(claim, dict) else None
                for resource in {given, about} - {None}:
                    self.renewals.drop(str(resource))
            return True, doc
        resource = doc.get("resource")
        if not isinstance(resource, str):
            return False, doc
        if name == "acquire" and isinstance(doc.get("receipt"), str):
            claim_id = str(doc.get("claim_id"))
            self.renewals.keep(resource, claim_id, doc["receipt"], _seconds(doc.get("expires_in")))
        elif name == "release":
            self.renewals.forget(resource)
        elif name in ("check", "heartbeat") and (
            why := self.renewals.lost(resource, doc.get("claim_id"))
        ):  # the renewal found this very claim lost: never "held" again from this session
            lost = LostError(
                f"{resource}: the server's renewal found this claim lost ({why}); it is no "
                "longer renewed. Stop writing; acquire it again to go on",
                claim=doc,
            )
            return True, self.error_document(lost)
        elif name == "heartbeat":  # (a new TTL: renewed at a third of it from now on)
            self.renewals.renewed(resource, _seconds(doc.get("expires_in")))
        return False, doc

    def result(self, failed: bool, doc: dict[str, Any]) -> types.CallToolResult:
        """The tool result: the document as structured content and as the CLI's JSON text."""
        text = self._text(doc)
        if TOKEN_PREFIX in text:  # a net: no document holds a token, and none may leave
            failed = True
            doc = self.error_document(
                GitleaseError(
                    "the answer was withheld: it held text that looks like a bearer token"
                )
            )
            text = self._text(doc)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=doc,
            is_error=failed,
        )

    def _text(self, doc: dict[str, Any]) -> str:
        return self._json_text(doc)

    def install(self, stdout: capture.ThreadStdout) -> None:
        self._stdout = stdout


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


async def _in_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a daemon thread of its own: a long call (``acquire`` with ``wait``) holds
    neither the event loop nor the process once the session has ended."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            value = fn()
        except BaseException as exc:  # handed to the awaiting task
            loop.call_soon_threadsafe(_settle, future, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, value, None)

    threading.Thread(target=run, name="gitlease-mcp-call", daemon=True).start()
    return await future


def _settle(future: asyncio.Future[T], value: T | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)  # type: ignore[arg-type]


def build(session: Session) -> Server[Any]:
    """The low-level server with the session's tools."""

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=session.list_tools())

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            failed, doc = await _in_thread(lambda: session.call(params.name, params.arguments))
        except Exception as exc:  # a bug: a tool error that says so, never a protocol error
            bug = GitleaseError(f"unexpected error: {type(exc).__name__}: {exc}")
            failed, doc = True, session.error_document(bug)
        return session.result(failed, doc)

    try:
        own = version("gitlease")
    except PackageNotFoundError:
        own = ""
    return Server(
        "gitlease",
        version=own,
        title="gitlease",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(session: Session) -> None:
    """Serve on stdin/stdout until the client goes (stdin closed); then stop renewing,
    releasing nothing."""
    import anyio

    server = build(session)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            with capture.installed() as stdout:
                session.install(stdout)
                await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        session.renewals.stop()


def _lost(doc: dict[str, Any]) -> bool:
    """Whether a command's document is the LOST error (the claim is no longer held)."""
    error = doc.get("error")
    return isinstance(error, dict) and error.get("code") == LostError.code
