"""The click group, the options every command shares, and the one place where exceptions
become exit codes (docs/reference/exit-codes.md)."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator
from importlib import import_module
from typing import Any, ClassVar

import click

from ..errors import GitleaseError, UsageError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Options:
    """What every command may be given, before or after the command name."""

    def __init__(self) -> None:
        self.json = False
        self.store: str | None = None
        self.remote: str | None = None
        self.debug = False
        self.argv: list[str] = []


def _set(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        opts = ctx.find_root().ensure_object(Options)
        if value not in (None, False):
            setattr(opts, name, value)
        return value

    return callback


#: The options every command shares: (declaration, what :class:`Options` keeps it as, the
#: option's own settings).
_SHARED: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (
        ("--json", "json_"),
        "json",
        {"is_flag": True, "help": "Print one JSON document on stdout (on success and on failure)."},
    ),
    (
        ("--store",),
        "store",
        {
            "type": click.Path(),
            "help": "The store repository (default: GITLEASE_STORE, then git config "
            "gitlease.store, then the project's shared store under $XDG_STATE_HOME; see "
            "`gitlease where`).",
        },
    ),
    (
        ("--remote",),
        "remote",
        {
            "metavar": "NAME|URL",
            "help": "Coordinate through this git remote, for agents on several hosts (default: "
            "GITLEASE_REMOTE or git config gitlease.remote; '' for none).",
        },
    ),
    (("--debug",), "debug", {"is_flag": True, "help": "Show a traceback on unexpected errors."}),
]


def shared_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--json``, ``--store``, ``--remote``, ``--debug``: accepted before or after a command."""
    for decls, name, settings in _SHARED:
        f = click.option(*decls, expose_value=False, callback=_set(name), **settings)(f)
    return f


def command(group: click.Group, name: str, **kwargs: Any) -> Callable[..., Any]:
    """Declare a command with the shared options; it returns an exit code or None."""

    def decorate(f: Callable[..., Any]) -> Any:
        @functools.wraps(f)
        def run(*args: Any, **kw: Any) -> Any:
            return f(click.get_current_context().find_root().ensure_object(Options), *args, **kw)

        settings = {**CONTEXT, **kwargs.pop("context_settings", {})}
        return group.command(name, context_settings=settings, **kwargs)(shared_options(run))

    return decorate


class LazyGroup(click.Group):
    """Imports a command's module only when that command runs: start-up stays small."""

    modules: ClassVar[dict[str, str]] = {
        "where": "claims", "key": "claims", "acquire": "claims", "heartbeat": "claims",
        "release": "claims", "check": "claims", "show": "claims", "list": "claims",
        "free": "claims", "log": "claims", "bundle": "bundles", "exec": "guarded",
        "replace-file": "guarded", "verify": "admin", "prune": "admin", "bind": "admin",
        "unbind": "admin", "hooks": "hooks", "skill": "skill", "fence-check": "fence",
        "keepalive": "keepalive", "mcp": "mcp", "agent-hook": "agents", "agents": "agents",
        "board": "board", "who": "who", "remote": "coordination",
    }  # fmt: skip

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.modules))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.modules:
            import_module(f"gitlease.cli.{self.modules[cmd_name]}")
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings=CONTEXT)
@shared_options
@click.version_option(package_name="gitlease", message="gitlease %(version)s")
def cli() -> None:
    """Bounded claims on units of work, kept as signed records under refs/worklease/.

    Exit codes: 0 OK, 1 ERROR, 2 USAGE, 3 HELD, 4 LOST, 5 AMBIGUOUS, 6 PRECONDITION, 7 STORE.
    """


#: Set by a process that runs many commands (``gitlease mcp``): what it keeps warm from one
#: command to the next, the stores and the commit-hook look (:mod:`gitlease.mcp.warm`).
resident: Any = None


def open_store(opts: Options, *, writes: str = "few") -> Any:
    """The store the shared options choose. ``writes``: ``"few"`` for a command that writes
    a claim or a few (its store is ``one_shot``: each write one ``git update-ref``, pygit2
    never imported); ``"many"`` for a pass that writes a record a resource (``verify
    --repair``, ``prune``: one libgit2 handle for them all)."""
    if resident is not None:
        return resident.open_store(opts.store, opts.remote)
    from ..api.location import open_store as open_location

    return open_location(opts.store, remote=opts.remote, one_shot=writes == "few")


#: The exit status of a command whose stdout was closed before it could answer (as a
#: process killed by SIGPIPE has: 128 + 13).
BROKEN_PIPE_EXIT = 141


class OutputFailed(Exception):
    """stdout could not be written (a closed pipe, a full disk). Deliberately not an
    ``OSError``: click would catch that itself and exit 1."""

    def __init__(self, error: OSError, note: str = "") -> None:
        super().__init__(str(error))
        self.error = error
        self.note = note


def emit(opts: Options, doc: Any, text: str | None) -> None:
    """Print ``doc`` as JSON with ``--json``, else ``text`` for people (flushed, so that a
    closed stdout is known here: :class:`OutputFailed`)."""
    from . import output  # (here, not at the top: `--version` and `--help` print none of it)

    try:
        if opts.json:
            from .jsonout import print_json

            print_json(doc)
        elif text:
            output.write_stdout(output.safe_text(text) + "\n")
        sys.stdout.flush()
    except OSError as exc:
        raise OutputFailed(exc) from None


@contextlib.contextmanager
def answering_owned(what: str) -> Iterator[None]:
    """Around ``heartbeat``'s and ``release``'s work and answer (and their bundle forms): a
    SIGINT, SIGTERM or SIGHUP that meets the write once it may land waits for the write, its
    bookkeeping and the answer, which is the write's (exit 0); stderr then names the signal.
    See docs/reference/exit-codes.md.

    Once the block has ended with an error (AMBIGUOUS after a second signal, or any other),
    that error is the answer: a further signal while it is being written (to a stdout that
    nobody reads, say) ends the process with the same exit code at once, never with 130 or
    143 (:func:`gitlease.api.answering.end_with`)."""
    from ..api import answering

    try:
        with answering.answering_owned():
            yield
    except GitleaseError as exc:
        answering.end_with(exc.exit_code)
        raise
    signum = answering.owned_came()
    if signum is None:
        return
    import signal

    name = signal.Signals(signum).name
    with contextlib.suppress(OSError):
        click.echo(f"gitlease: {name} came while the {what} was being written; it was "
                   "written, and the answer is true", err=True)  # fmt: skip


def emit_taken(
    opts: Options, doc: Any, text: str | None, undo: Callable[[BaseException], None]
) -> None:
    """:func:`emit` for a command that has just taken claims (``acquire``, ``bundle
    acquire``): if the answer cannot be written, ``undo`` releases them again first, so
    that no exit code but 0 leaves a claim behind (AMBIGUOUS, naming them, if even that
    fails). So does SIGINT, SIGTERM or SIGHUP received since the write
    (:mod:`gitlease.api.answering`): then the exit is 128+N, with nothing held. See
    docs/reference/exit-codes.md."""
    from ..api import answering as window

    signum = window.pending()
    if signum is not None:
        import signal

        name = signal.Signals(signum).name
        undo(KeyboardInterrupt(f"{name} after the write"))
        with contextlib.suppress(OSError):
            click.echo(f"gitlease: interrupted ({name}); the claim was released again", err=True)
        raise click.exceptions.Exit(128 + signum)
    try:
        emit(opts, doc, text)
    except OutputFailed as exc:
        undo(exc.error)
        raise OutputFailed(exc.error, "; the claim was released again") from None


def main(
    argv: list[str] | None = None, prog_name: str | None = None, *, final: bool = False
) -> int:
    """Run the CLI and return its exit code (docs/reference/exit-codes.md). ``final``: the
    process ends when this returns (the console script), so a signal that comes once an
    answer is decided keeps ending it with that answer's code
    (:func:`gitlease.api.answering.end_with`);
    otherwise the handlers are put back before this returns."""
    try:
        return _main(argv, prog_name)
    finally:
        # (only a command that answered an owned write imported it, and may have replaced any)
        answering = sys.modules.get("gitlease.api.answering")
        if not final and answering is not None:
            answering.end_with(None)


def _main(argv: list[str] | None, prog_name: str | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(name.startswith("GITLEASE_TESTING") for name in os.environ):
        from ..api.output import switch_warnings  # (only then: `--version` imports none of it)

        for line in switch_warnings():  # a test-only switch never changes a decision silently
            click.echo(line, err=True)
    opts = _options(args)
    try:
        result = cli.main(
            args=args,
            prog_name=prog_name or _prog_name(),
            standalone_mode=False,
            obj=opts,
        )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("gitlease: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        error = UsageError(exc.format_message())
        return _fail(error, _given(opts, args, "json"), usage=exc)
    except GitleaseError as exc:
        return _fail(exc, opts.json)  # the command line was parsed: opts says what was asked
    except KeyboardInterrupt:
        click.echo("gitlease: interrupted", err=True)
        return 130
    except OutputFailed as exc:
        return _output_failed(exc)
    except BrokenPipeError as exc:  # a write outside emit (click's own help, say)
        return _output_failed(OutputFailed(exc))
    except Exception as exc:  # a bug: message, no traceback unless --debug
        if _given(opts, args, "debug"):
            import traceback  # (2 ms a command that would never use it)

            traceback.print_exc()
        bug = GitleaseError(f"unexpected error: {type(exc).__name__}: {exc}")
        return _fail(bug, _given(opts, args, "json"))
    return int(result or 0)


def _options(args: list[str]) -> Options:
    opts = Options()
    opts.argv = args
    return opts


def _given(opts: Options, args: list[str], name: str) -> bool:
    """Whether the flag ``--NAME`` was given as an option.

    Once click has parsed the command line, its callback has said so in ``opts``. A
    parse error can come first: then the arguments are scanned the way click reads
    them, so that ``--json`` as the value of an option (``--note --json``) or after
    ``--`` (``exec R -- echo --json``) is not taken for the option.
    """
    return bool(getattr(opts, name)) or _flag_in(args, f"--{name}")


def _flag_in(args: list[str], flag: str) -> bool:
    ctx = click.Context(cli, info_name="gitlease")
    command: click.Command = cli
    takes_value = _value_options(command)
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--":
            return False
        elif arg == flag:
            return True
        elif arg.startswith("-") and len(arg) > 1:
            skip = "=" not in arg and arg in takes_value
        elif isinstance(command, click.Group):
            try:
                sub = command.get_command(ctx, arg)
            except Exception:  # an unknown or broken command: keep the group's options
                sub = None
            if sub is not None:
                command, takes_value = sub, _value_options(sub)
    return False


def _value_options(command: click.Command) -> set[str]:
    """The option names of ``command`` that take a value (the next argument is theirs)."""
    return {
        name
        for param in command.params
        if isinstance(param, click.Option) and not param.is_flag and not param.count
        for name in param.opts
    }


def _output_failed(exc: OutputFailed) -> int:
    """A closed stdout: 141 (as SIGPIPE would end the process), another write error 1."""
    _silence_stdout()
    _say(f"gitlease: the output could not be written ({exc.error.strerror or exc.error}){exc.note}")
    return BROKEN_PIPE_EXIT if isinstance(exc.error, BrokenPipeError) else 1


def _silence_stdout() -> None:
    """Point a stdout that cannot be written at /dev/null, so that the interpreter's last
    flush does not fail again (and change the exit status to 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file (a test's StringIO): nothing will flush it at exit


def _say(line: str) -> None:
    """One line on stderr, if stderr can still be written."""
    from . import output

    with contextlib.suppress(OSError):
        click.echo(output.safe_text(line), err=True)


def _fail(error: GitleaseError, wants_json: bool, usage: click.ClickException | None = None) -> int:
    from . import output

    if wants_json:
        from .jsonout import error_document, print_json

        try:
            print_json(error_document(error))
            sys.stdout.flush()
        except OSError:  # stdout is closed: the error goes to stderr instead
            _silence_stdout()
            _say(output.error_line(error))
    elif usage is not None:
        shown = io.StringIO()
        usage.show(file=shown)
        sys.stderr.write(output.safe_text(shown.getvalue()))
    else:
        _say(output.error_line(error))
    return error.exit_code


def _prog_name() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "gitlease"
    if name in ("__main__.py", "-c", "-m") or name.endswith(".py"):
        return "gitlease"
    return "git lease" if name == "git-lease" else name
