"""The tool table: one entry per command, and how a tool call becomes the command's argv.

A tool *is* its command: its arguments are the command's long options with ``_``
for ``-`` (and its positional arguments by name), and its result is what
``gitlease CMD --json`` prints. So a call is turned into a command line here and
run by the CLI itself (:mod:`gitlease.cli.mcp`): no second copy of how a document is
built. Arguments are checked here first, totally, so that a bad one is a USAGE error
naming the argument, never a traceback and never an option smuggled in: every value
is passed as ``--option=VALUE`` and every positional after ``--``.

One more tool is one more :class:`Tool` in :data:`TOOLS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError

STRING = "string"
STRINGS = "strings"
FLAG = "flag"
DURATION = "duration"


@dataclass(frozen=True)
class Arg:
    """One argument of a tool.

    ``kind``: STRING, STRINGS (a list of strings), FLAG (a boolean) or DURATION (a
    string such as ``15m``, or a number of seconds). ``positional``: given to the
    command as its argument(s) rather than as ``--NAME``. ``choices``: the values allowed.
    """

    name: str
    kind: str
    help: str
    positional: bool = False
    required: bool = False
    choices: tuple[str, ...] = ()

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def schema(self) -> dict[str, Any]:
        if self.kind == STRINGS:
            doc: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
        elif self.kind == FLAG:
            doc = {"type": "boolean"}
        else:
            doc = {"type": "string"}
        if self.choices:
            doc["enum"] = list(self.choices)
        doc["description"] = self.help
        return doc


@dataclass(frozen=True)
class Tool:
    """A command as a tool: ``name`` is the command's, ``args`` its arguments, ``read_only``
    whether it only looks (an annotation for the harness)."""

    name: str
    description: str
    args: tuple[Arg, ...] = ()
    read_only: bool = True

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {a.name: a.schema() for a in self.args},
            "additionalProperties": False,
        }
        required = [a.name for a in self.args if a.required]
        if required:
            schema["required"] = required
        return schema


_KEY = Arg(
    "key",
    STRING,
    "Read the resource (and first_free's candidates) as a reference of this provider, e.g. "
    "`github` for `acme/api#42`, `gitlab`, `jira`, `linear`, `beads`, `taskmaster`, `path`, "
    "`raw` (see the `key` tool).",
)
_OWNED = Arg(
    "resource",
    STRING,
    "The claimed resource, as `acquire` returned it (default: the claim this worktree holds).",
    positional=True,
)
#: The one resource a read names (``show``, ``log``), with ``key`` to read it as a reference.
_READ_ONE = (Arg("resource", STRING, "The resource.", positional=True, required=True), _KEY)
_HELD_BY_YOU = (
    " Answers with the claim document; a tool error with code LOST (exit 4) means you no longer "
    "hold it (it expired, was released, or someone took it over): stop writing, your work on it "
    "is not yours to finish."
)

ACQUIRE = Tool(
    "acquire",
    "Claim a unit of work (an issue, a task, a file, any name) before you start on it, so that "
    "no other agent works on it at the same time. Give `resource`, or `first_free` with a list "
    "of candidates in order of preference to take the first one nobody holds. On success you "
    "hold the claim: the answer names it (`resource`, `claim_id`, `expires_at`) and this "
    "worktree is bound to it. A claim expires after its `ttl` unless renewed: this server renews "
    "the claims it took for as long as your session lives; when the session ends they are left "
    "to expire, never released for you. A tool error with code HELD (exit 3) means someone else "
    "holds it (or every candidate): pick other work and do not wait for it, unless you were told "
    "to (then pass `wait`). Before each durable write (commit, push, comment, file write) call "
    "`check`; when done, call `release` with a `checkpoint`.",
    (
        Arg("resource", STRING, "The resource to claim, e.g. `github/acme/api/42`.", True),
        Arg(
            "first_free",
            STRINGS,
            "Instead of `resource`: candidates in order (e.g. your backlog's open items); the "
            "first that can be acquired is claimed, held ones are passed over.",
        ),
        _KEY,
        Arg(
            "paths",
            STRINGS,
            "Path scopes the claim reserves: patterns relative to the repository's top folder "
            "(git wildmatch: `src/auth/**`, `docs/auth.md`; a trailing `/` is a folder).",
        ),
        Arg("ttl", DURATION, "How long the claim lasts without renewal, e.g. 15m (default 15m)."),
        Arg("note", STRING, "A short note shown with the claim (what you are doing)."),
        Arg(
            "wait",
            DURATION,
            "Only when told to wait: while HELD, wait this long (e.g. 10m) for the claim, "
            "in turn with the other waiters.",
        ),
        Arg(
            "coordination_only",
            FLAG,
            "The durable change happens elsewhere (a remote API, not this repository).",
        ),
    ),
    read_only=False,
)

TOOLS: tuple[Tool, ...] = (
    ACQUIRE,
    Tool(
        "check",
        "Re-check that you still hold your claim, with at least `min_remaining` left. Call it "
        "right before every durable write (commit, push, comment, file write that others see): "
        "a claim can lapse while you think." + _HELD_BY_YOU,
        (
            _OWNED,
            _KEY,
            Arg("min_remaining", DURATION, "Require at least this much time left, e.g. 2m."),
        ),
    ),
    Tool(
        "release",
        "Release your claim when the work is done or abandoned, with a `checkpoint` saying where "
        "the durable progress is (a commit, a PR or comment URL), so the next agent can resume. "
        "The server stops renewing it." + _HELD_BY_YOU,
        (
            _OWNED,
            _KEY,
            Arg(
                "checkpoint",
                STRING,
                "Where the progress is, e.g. a commit id or a PR/comment URL.",
            ),
        ),
        read_only=False,
    ),
    Tool(
        "heartbeat",
        "Renew your claim now by its TTL (or a new `ttl` for this and later renewals). Rarely "
        "needed: this server renews the claims it took while your session lives." + _HELD_BY_YOU,
        (_OWNED, _KEY, Arg("ttl", DURATION, "A new TTL, e.g. 30m.")),
        read_only=False,
    ),
    Tool(
        "show",
        "Show the record of one resource (never secret): its state (active, expired, released, "
        "free, invalid), owner, expiry, note and last checkpoint.",
        _READ_ONE,
    ),
    Tool(
        "list",
        "List every claim in the store (the board of who works on what).",
        (
            Arg(
                "state",
                STRING,
                "Only claims in this state.",
                choices=("active", "expired", "released", "invalid"),
            ),
            Arg("prefix", STRING, "Only resources that start with this text."),
        ),
    ),
    Tool(
        "free",
        "Of the given resources, answer those that can be acquired now (free, released or "
        "expired). To take one, prefer `acquire` with `first_free`: it decides atomically.",
        (
            Arg(
                "resources",
                STRINGS,
                "The resources to look at.",
                positional=True,
                required=True,
            ),
        ),
    ),
    Tool(
        "log",
        "The history of one resource, oldest first: who held it, renewals, releases with their "
        "checkpoints (where to resume).",
        _READ_ONE,
    ),
    Tool(
        "key",
        "The canonical resource name of provider references (e.g. provider `github`, item "
        "`acme/api#42`), the name to claim.",
        (
            Arg(
                "provider",
                STRING,
                "The provider: github, gitlab, jira, linear, beads, taskmaster, path, raw.",
                True,
                True,
            ),
            Arg("items", STRINGS, "The references to name.", positional=True, required=True),
            Arg("tag", STRING, "taskmaster: the tag (default master)."),
        ),
    ),
    Tool(
        "where",
        "The store this worktree uses and why, where its receipts live, and the remote that "
        "coordinates it, if any.",
    ),
    Tool(
        "who",
        "Which live claims' path scopes cover each path: ask before editing files another agent "
        "may have reserved.",
        (Arg("paths", STRINGS, "Paths relative to the repository's top folder.", True, True),),
    ),
)

BY_NAME = {t.name: t for t in TOOLS}


def _value(tool: Tool, arg: Arg, value: Any) -> Any:
    """The argument's value, checked against its kind (USAGE otherwise)."""
    where = f"{tool.name}: argument {arg.name!r}"
    if value is None:
        return None
    if arg.kind == FLAG:
        if not isinstance(value, bool):
            raise UsageError(f"{where}: true or false")
        return value
    if arg.kind == STRINGS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"{where}: a list of strings")
        return value
    if arg.kind == DURATION and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # a number of seconds, as on the command line
    if not isinstance(value, str):
        raise UsageError(f"{where}: a string")
    if arg.choices and value not in arg.choices:
        raise UsageError(f"{where}: one of {', '.join(arg.choices)}")
    return value


def argv(tool: Tool, arguments: dict[str, Any] | None) -> list[str]:
    """The command line (after the shared options) that runs ``tool`` with ``arguments``."""
    given = dict(arguments or {})
    unknown = sorted(set(given) - {a.name for a in tool.args})
    if unknown:
        known = ", ".join(a.name for a in tool.args) or "none"
        raise UsageError(f"{tool.name}: unknown argument {unknown[0]!r} (known: {known})")
    if tool is ACQUIRE:
        _check_acquire(given)
    options: list[str] = []
    positionals: list[str] = []
    for arg in tool.args:
        value = _value(tool, arg, given.get(arg.name))
        if value is None or value is False:
            if arg.required:
                raise UsageError(f"{tool.name}: argument {arg.name!r} is required")
            continue
        if arg.kind == STRINGS and value == ["-"]:
            raise UsageError(
                f"{tool.name}: argument {arg.name!r}: `-` reads the items from standard input "
                "on the command line, and this server's standard input carries the protocol: "
                "give the items themselves"
            )
        if tool is ACQUIRE and arg.name == "first_free":  # `acquire --first-free C...`
            options.append("--first-free")
            positionals.extend(value)
        elif arg.positional:
            positionals.extend(value if isinstance(value, list) else [value])
        elif value is True:
            options.append(arg.option)
        else:
            values = value if isinstance(value, list) else [value]
            options.extend(f"{arg.option}={v}" for v in values)
    return [tool.name, *options, "--", *positionals]


def _check_acquire(given: dict[str, Any]) -> None:
    """``acquire``'s two forms: ``resource``, or ``first_free`` with its candidates."""
    resource, first_free = given.get("resource"), given.get("first_free")
    if resource is not None and first_free is not None:
        raise UsageError("acquire: give `resource` or `first_free`, not both")
    if first_free is not None and first_free == []:
        raise UsageError("acquire: `first_free` needs at least one candidate")
    if resource is None and first_free is None:
        raise UsageError("acquire: argument 'resource' (or 'first_free') is required")
