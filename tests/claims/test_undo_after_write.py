"""A failure after the claim was written undoes it, so that an exit code never contradicts the
store (docs/reference/exit-codes.md): a bindings directory others can write, a full disk
under the bindings, a closed stdout or stderr, a stray name among the spent receipts.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import store_git, store_path
from observe import refs, state

R = "edge/1"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (CI runs as root)")


def _says_the_truth(cli, got, resources: list[str]) -> str:
    """An exit code that agrees with the store: 0 with the claims held, AMBIGUOUS naming
    each claim, or a failure with every claim undone; never USAGE or ERROR with a live
    claim. Which of the three it was."""
    now = [cli("show", r, "--json").json for r in resources]
    if got.code == 0:
        assert all(doc["state"] == "active" for doc in now), (got, now)
        return "held"
    if got.code == 5:
        assert all(doc["claim_id"] and doc["claim_id"] in got.out + got.err for doc in now), got
        return "ambiguous"
    for doc in now:
        assert doc["state"] != "active", f"exit {got.code} while the claim is active: {got}"
    return "undone"


ACQUIRES = {"acquire": ["acquire", R], "bundle acquire": ["bundle", "acquire", "edge/b1", R]}


def _members(args: list[str]) -> list[str]:
    return args[2:] if args[0] == "bundle" else args[1:]


@pytest.mark.parametrize("verb", ACQUIRES)
def test_a_shared_bindings_directory_is_refused_before_the_claim_is_written(
    cli, repo: Path, verb: str
) -> None:
    bindings = repo / ".git" / "worklease" / "bindings"
    bindings.mkdir(parents=True)
    bindings.chmod(0o777)
    got = cli(*ACQUIRES[verb], "--json")
    assert got.code == 2 and "others can write" in got.json["error"]["message"], got
    assert _says_the_truth(cli, got, _members(ACQUIRES[verb])) == "undone"
    assert refs(repo) == "", "refused before anything was written"
    assert list(bindings.iterdir()) == []


def _full(directory: Path) -> contextlib.AbstractContextManager[None]:
    """``directory`` on a private 64 KiB tmpfs, filled up: only that disk is full."""

    @contextlib.contextmanager
    def mounted():
        directory.mkdir(parents=True, exist_ok=True)
        options = "size=64k,mode=0700"
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
                       check=True)  # fmt: skip
        try:
            with contextlib.suppress(OSError), open(directory / "filler", "wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
            yield
        finally:
            subprocess.run(["umount", "-l", str(directory)], check=False)

    return mounted()


@root_only
@pytest.mark.parametrize("verb", ACQUIRES)
def test_a_full_disk_under_the_bindings_undoes_the_claim(cli, repo: Path, verb: str) -> None:
    with _full(repo / ".git" / "worklease" / "bindings"):
        got = cli(*ACQUIRES[verb], "--json")
        assert got.code == 7 and "released again" in got.json["error"]["message"], got
        assert _says_the_truth(cli, got, _members(ACQUIRES[verb])) == "undone"
    assert cli(*ACQUIRES[verb]).code == 0, "and the resources can be taken at once"


def _with_stdout_closed(repo: Path, args: list[str]) -> types.SimpleNamespace:
    """``gitlease ARGS | true``, made deterministic: the reader is gone first."""
    reader, writer = os.pipe()
    os.close(reader)
    proc = subprocess.run(
        [sys.executable, "-m", "gitlease", *args],
        cwd=repo,
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(writer)
    return types.SimpleNamespace(code=proc.returncode, out="", err=proc.stderr)


@pytest.mark.parametrize("json_", [["--json"], []], ids=["json", "text"])
@pytest.mark.parametrize("verb", ACQUIRES)
def test_a_closed_stdout_undoes_the_claim_and_exits_141(
    cli, repo: Path, verb: str, json_: list[str]
) -> None:
    got = _with_stdout_closed(repo, [*ACQUIRES[verb], *json_])
    assert got.code == 141, got  # as a process killed by SIGPIPE
    assert "released again" in got.err and "Exception ignored" not in got.err, got
    assert _says_the_truth(cli, got, _members(ACQUIRES[verb])) == "undone"
    assert cli(*ACQUIRES[verb]).code == 0


def test_a_closed_stdout_after_a_keepalive_started_stops_it_too(cli, repo: Path) -> None:
    got = _with_stdout_closed(repo, ["acquire", R, "--keepalive"])  # it would watch pytest
    assert got.code == 141 and _says_the_truth(cli, got, [R]) == "undone", got
    assert cli("show", R, "--json").json["keepalive"] is None


def test_a_closed_stdout_whose_undo_fails_too_is_ambiguous_naming_the_claim(
    cli, repo: Path
) -> None:
    """The claim cannot be released again (here: every release fails as on a full disk):
    exit 5, and the message names the claim and how to release it."""
    script = (
        "import sys\n"
        "from gitlease.claims import engine as core\n"
        "def failing(*args, **kwargs):\n"
        "    raise OSError(28, 'No space left on device')\n"
        "core.release_claims = failing\n"
        "from gitlease.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    reader, writer = os.pipe()
    os.close(reader)
    proc = subprocess.run(
        [sys.executable, "-c", script, "acquire", R, "--json"],
        cwd=repo, stdout=writer, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(writer)
    got = types.SimpleNamespace(code=proc.returncode, out="", err=proc.stderr)
    assert got.code == 5, got
    assert _says_the_truth(cli, got, [R]) == "ambiguous"
    assert "No space left on device" in got.err and "release --receipt" in got.err, got


def test_other_commands_with_a_closed_stdout_exit_141_without_noise(cli, repo: Path) -> None:
    assert cli("acquire", R).code == 0
    for args in (["show", R, "--json"], ["list"], ["heartbeat", R]):
        got = _with_stdout_closed(repo, args)
        assert got.code == 141, (args, got)
        assert "Exception ignored" not in got.err and "Traceback" not in got.err, got
    assert state(cli, R) == "active", "a heartbeat that could not answer still renewed"


def _with_stderr_closed(repo: Path, args: list[str]) -> types.SimpleNamespace:
    """``gitlease ARGS 2>&1 >/dev/tty | head -0``, made deterministic: stderr is a pipe whose
    reader is gone before the command writes (a supervisor that stopped reading its log)."""
    reader, writer = os.pipe()
    os.close(reader)
    proc = subprocess.run(
        [sys.executable, "-m", "gitlease", *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=writer,
        text=True,
    )
    os.close(writer)
    return types.SimpleNamespace(code=proc.returncode, out=proc.stdout)


@pytest.mark.parametrize(
    "args",
    [["acquire", R], ["acquire", R, "--json"], ["bundle", "acquire", "review/2", R]],
    ids=["acquire", "acquire-json", "bundle-acquire"],
)
def test_a_closed_stderr_never_leaves_a_claim_behind_a_failure(
    cli, repo: Path, args: list[str]
) -> None:
    """No hooks are installed, so the acquire warns on stderr that commits are not checked;
    that stderr cannot be written. The answer must still agree with the store: 0 with the
    claim held, or a failure with the claim released again (never exit 1 with it held)."""
    got = _with_stderr_closed(repo, args)
    held = cli("show", R, "--json").json["state"] == "active"
    assert (got.code == 0) == held, f"exit {got.code}, claim {'held' if held else 'not held'}"


def test_a_closed_stderr_after_first_free_skipped_an_invalid_record_leaves_no_claim(
    cli, repo: Path
) -> None:
    """``acquire --first-free`` reports on stderr each candidate it passed over for an invalid
    record; that line cannot be written either."""
    oid = subprocess.run(
        ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
        input=b"not a record\n", capture_output=True, check=True,
    ).stdout.decode().strip()  # fmt: skip
    store_git("update-ref", "refs/worklease/review/bad.lease", oid, cwd=repo)
    got = _with_stderr_closed(repo, ["acquire", "--first-free", "review/bad", R, "--no-bind"])
    held = cli("show", R, "--json").json["state"] == "active"
    assert (got.code == 0) == held, f"exit {got.code}, claim {'held' if held else 'not held'}"


def test_a_stray_name_among_the_spent_receipts_never_fails_an_acquire_after_its_write(
    cli, repo: Path
) -> None:
    """The tidying after an acquire reads the hours under receipts/spent/ by name; a name
    that str.isdigit() takes but int() does not ('²') made it raise after the write: exit 1
    with the claim left active."""
    assert cli("acquire", "review/0", "--no-bind").code == 0
    (repo / ".git" / "worklease" / "receipts" / "spent" / "\u00b2").mkdir(parents=True)
    got = cli("acquire", R, "--no-bind")
    held = cli("show", R, "--json").json["state"] == "active"
    assert (got.code == 0) == held, got
    assert got.code == 0, got
    assert cli("prune").code == 0
