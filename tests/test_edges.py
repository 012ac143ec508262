"""Truthful at the edges: each edge found by trying gitlease as an attacker and as a careless
user would, through the real CLI in subprocesses (docs/reliability.md, "At the edges").

Every test is named for what it shows, and failed on the code before its fix.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import signal
import stat
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from conftest import clock_ahead, git, make_repo, store_git, store_path
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

R = "edge/1"
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # anything but a newline
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (CI runs as root)")


def ref_of(resource: str) -> str:
    """The ref of a plain resource (docs/reference/store.md)."""
    return f"refs/worklease/{resource}.lease"


def refs(repo: Path) -> str:
    return git(
        "for-each-ref", "--format=%(refname) %(objectname)", "refs/worklease/", cwd=repo
    ).stdout


def no_crash(got) -> None:
    """Never ERROR (1), never a traceback."""
    assert got.code != 1, got
    assert "Traceback" not in got.err and "unexpected error" not in got.err, got


def state(cli, resource: str, **kw) -> str:
    got = cli("show", resource, "--json", **kw)
    return got.json["state"] if got.code == 0 else f"exit {got.code}"


# ------------------------------------------------------------------ forged records


def _stamp(seconds: float) -> str:
    t = time.gmtime(int(seconds))
    return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int(seconds * 1000) % 1000:03d}Z"


def _boot_ms() -> int:
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * 1000)


FIELDS = [
    "resource", "state", "claim-id", "owner", "revision", "bundle-id", "mode", "acquired-at",
    "renewed-at", "released-at", "expires-at", "renew-by", "ttl-ms", "boot-id",
    "boot-expires-ms", "note", "checkpoint", "public-key", "previous", "nonce",
]  # fmt: skip


def text(value: str) -> str:
    """A text value as a record writes it (docs/reference/record.md): a JSON string."""
    return json.dumps(value, ensure_ascii=False)


def forge(name: str, **values: str) -> bytes:
    """A validly self-signed record, as anyone who can write to the repository can make one:
    active on this host's boot clock for an hour unless ``values`` (raw field text) say
    otherwise."""
    key = Ed25519PrivateKey.generate()
    now = time.time()
    fields = {
        "resource": text(name),
        "state": "held",
        "claim-id": "c-" + os.urandom(8).hex(),
        "owner": text("mallory"),
        "revision": "1",
        "bundle-id": "-",
        "mode": "guarded",
        "acquired-at": _stamp(now),
        "renewed-at": _stamp(now),
        "released-at": "-",
        "expires-at": _stamp(now + 3600),
        "renew-by": _stamp(now + 1800),
        "ttl-ms": "3600000",
        "boot-id": BOOT_ID.read_text().strip(),
        "boot-expires-ms": str(_boot_ms() + 3_600_000),
        "note": "-",
        "checkpoint": "-",
        "public-key": key.public_key().public_bytes_raw().hex(),
        "previous": "-",
        "nonce": os.urandom(16).hex(),
    }
    fields.update({name.replace("_", "-"): value for name, value in values.items()})
    payload = ("gitlease-claim v1\n" + "".join(f"{n} {fields[n]}\n" for n in FIELDS)).encode()
    return payload + f"signature {key.sign(payload).hex()}\n".encode()


def put(repo: Path, ref: str, data: bytes) -> str:
    """Point ``ref`` at a blob holding ``data``, as a hand-run git command would."""
    oid = (
        subprocess.run(
            ["git", f"--git-dir={store_path(repo)}", "hash-object", "-w", "--stdin"],
            cwd=repo,
            input=data,
            capture_output=True,
        )
        .stdout.decode()
        .strip()
    )
    store_git("update-ref", ref, oid, cwd=repo)
    return oid


def receipt_doc(path: Path) -> dict:
    return json.loads(path.read_text())


# ------------------------------------------------------------------ item 1: receipt paths


def test_a_receipt_path_holding_another_file_is_refused_and_left_untouched(
    cli, tmp_path: Path
) -> None:
    precious = tmp_path / "f"
    precious.write_text("precious\n")
    got = cli("acquire", R, "--receipt", str(precious), "--no-bind", "--json")
    assert got.code == 2, got
    assert precious.read_text() == "precious\n"
    assert state(cli, R) == "free", "nothing was claimed"


def test_a_receipt_of_another_store_is_refused_and_left_untouched(cli, tmp_path: Path) -> None:
    """One GITLEASE_RECEIPT used from two repositories."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    env = {"GITLEASE_RECEIPT": str(private / "r.json")}
    assert cli("acquire", R, "--no-bind", env=env).code == 0
    saved = (private / "r.json").read_bytes()
    other = make_repo(tmp_path / "other")
    got = cli("acquire", R, "--no-bind", "--json", cwd=other, env=env)
    assert got.code == 2 and "store" in got.json["error"]["message"], got
    assert (private / "r.json").read_bytes() == saved
    assert state(cli, R, cwd=other) == "free"
    assert cli("heartbeat", R, env=env).code == 0, "the first store's claim is still manageable"
    assert cli("release", R, env=env).code == 0


def test_a_live_receipt_of_this_store_is_held_and_a_spent_one_is_reused(
    cli, tmp_path: Path
) -> None:
    path = tmp_path / "r.json"
    assert cli("acquire", "edge/a", "--receipt", str(path), "--no-bind").code == 0
    saved = path.read_bytes()
    got = cli("acquire", "edge/b", "--receipt", str(path), "--no-bind")
    assert got.code == 3, got
    assert path.read_bytes() == saved and state(cli, "edge/b") == "free"
    assert cli("release", "edge/a", "--receipt", str(path)).code == 0
    assert cli("acquire", "edge/b", "--receipt", str(path), "--no-bind").code == 0
    assert receipt_doc(path)["claims"][0]["resource"] == "edge/b"


def _make(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        path.mkdir(mode=0o700)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root (CI runs as root)")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a private copy of /dev/null
    elif kind == "link to a file":
        (path.parent / "target").write_text("precious\n")
        path.symlink_to(path.parent / "target")
    elif kind == "dangling link":
        path.symlink_to(path.parent / "nowhere")


@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "link to a file", "dangling link"])
def test_a_receipt_path_that_is_not_a_file_is_refused_at_once(
    cli, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "receipt"
    _make(kind, path)
    before = os.lstat(path)
    got = cli("acquire", R, "--receipt", str(path), "--no-bind", "--json", timeout=30)
    assert got.code == 2, got
    after = os.lstat(path)
    assert (after.st_ino, stat.S_IFMT(after.st_mode)) == (
        before.st_ino,
        stat.S_IFMT(before.st_mode),
    )
    if kind == "link to a file":
        assert (tmp_path / "target").read_text() == "precious\n"
    assert not (tmp_path / "nowhere").exists()
    assert state(cli, R) == "free", "nothing was claimed (and the guard was let go)"


def _racer(cwd: str, resource: str, receipt: str, barrier, results) -> None:
    os.chdir(cwd)
    import io

    from gitlease.cli import claims, main  # noqa: F401  (imports done before the barrier)

    barrier.wait()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["acquire", resource, "--receipt", receipt, "--no-bind", "--json"])
    results.put((resource, code))


@pytest.mark.slow
def test_acquires_racing_on_one_receipt_path_have_one_winner(cli, repo: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for round_ in range(3):
        receipt = repo.parent / f"race-{round_}.json"
        names = [f"race/{round_}/{i}" for i in range(4)]
        barrier, results = ctx.Barrier(len(names)), ctx.Queue()
        procs = [
            ctx.Process(target=_racer, args=(str(repo), n, str(receipt), barrier, results))
            for n in names
        ]
        for p in procs:
            p.start()
        codes = dict(results.get(timeout=120) for _ in names)
        for p in procs:
            p.join(timeout=30)
        winners = [n for n, code in codes.items() if code == 0]
        assert len(winners) == 1, codes
        assert all(code in (2, 3) for n, code in codes.items() if n not in winners), codes
        proved = receipt_doc(receipt)["claims"][0]
        assert proved["resource"] == winners[0]
        assert cli("show", winners[0], "--json").json["claim_id"] == proved["claim_id"]
        assert all(state(cli, n) == "free" for n in names if n not in winners)


# ------------------------------------------------------------------ item 2: after the write


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


# ------------------------------------------------------------------ item 3: total parsing


def _store_wide(cli, resource: str) -> dict[str, int]:
    """Every store-wide command once; none may crash."""
    codes = {}
    for args in (
        ["list"],
        ["list", "--json"],
        ["show", resource],
        ["free", resource],
        ["log", resource],
        ["prune", "--older-than", "0s"],
        ["verify"],
        ["acquire", resource, "--no-bind"],
    ):
        got = cli(*args)
        no_crash(got)
        assert not CONTROL.search(got.out + got.err), got
        codes[" ".join(args)] = got.code
    return codes


def test_a_revision_of_5000_digits_is_invalid_and_repairable(cli, repo: Path) -> None:
    put(repo, ref_of(R), forge(R, revision="7" * 5000))
    codes = _store_wide(cli, R)
    assert (
        codes["list"] == 0 and codes["show " + R] == 7 and codes["acquire " + R + " --no-bind"] == 7
    )
    assert cli("list", "--json").json["claims"][0]["state"] == "invalid"
    assert cli("free", R).out.strip() == "", "an invalid record is never offered"
    repaired = cli("verify", "--repair", "--json")
    no_crash(repaired)
    assert repaired.code == 0, repaired
    assert cli("acquire", R, "--no-bind").code == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"expires_at": "not-a-time", "boot_id": "another-boot"},
        {"boot_expires_ms": str(10**400)},
        {"state": "released", "released_at": "yesterday"},
        {"ttl_ms": "99999999999999999999"},
        {"acquired_at": "2026-02-30T10:00:00.000Z"},
        {"previous": "--batch-all-objects"},
    ],
    ids=["bad-time-foreign-boot", "huge-boot-expiry", "released-yesterday", "huge-ttl",
         "no-such-day", "option-as-previous"],
)  # fmt: skip
def test_a_self_signed_record_with_impossible_values_is_invalid_everywhere(
    cli, repo: Path, fields: dict[str, str]
) -> None:
    put(repo, ref_of(R), forge(R, **fields))
    codes = _store_wide(cli, R)
    assert codes["list"] == 0 and codes[f"show {R}"] == 7, codes
    assert codes[f"acquire {R} --no-bind"] == 7, codes
    assert cli("list", "--json").json["claims"][0]["state"] == "invalid"


# ------------------------------------------------------------------ items 4 and 5: free text

NASTY = {"ESC": "\x1b]0;pwned\x07", "CR": "a\rb", "LF": "a\nstate released", "DEL": "a\x7f",
         "C1": "a\x9b2J"}  # fmt: skip


def _refusals(cli, make_args) -> None:
    for name, value in NASTY.items():
        args, env = make_args(value)
        got = cli(*args, "--json", env=env)
        assert got.code == 2, (name, got)
        assert got.json["error"]["code"] == "USAGE"


def test_a_note_with_control_characters_is_refused(cli, repo: Path) -> None:
    _refusals(cli, lambda v: (["acquire", R, "--note", v], None))
    assert refs(repo) == ""


def test_an_owner_with_control_characters_is_refused(cli, repo: Path) -> None:
    _refusals(cli, lambda v: (["acquire", R, "--owner", v], None))
    _refusals(cli, lambda v: (["acquire", R], {"GITLEASE_OWNER": v}))
    assert refs(repo) == ""


def test_a_checkpoint_with_control_characters_is_refused_and_the_claim_kept(cli) -> None:
    doc = cli("acquire", R, "--json").json
    _refusals(cli, lambda v: (["release", R, "--checkpoint", v], None))
    assert cli("show", R, "--json").json["oid"] == doc["oid"], "still held, unchanged"


def test_a_forged_record_cannot_write_to_the_terminal(cli, repo: Path) -> None:
    note = "x\nstate      released\x1b]0;pwned\x07\r"
    put(
        repo,
        ref_of(R),
        forge(R, owner=text("evil\x1b[2J\x9b"), note=text(note), checkpoint=text("c\x1b[8m")),
    )
    shown = cli("show", R)
    assert shown.code == 0 and not CONTROL.search(shown.out), shown
    assert len([line for line in shown.out.splitlines() if line.startswith("state")]) == 1
    for args in (["list"], ["log", R], ["acquire", R], ["acquire", R, "--wait", "1s"]):
        got = cli(*args)
        assert not CONTROL.search(got.out + got.err), (args, got)
        assert len(got.err.splitlines()) <= 1, (args, got)
    assert cli("show", R, "--json").json["note"] == note, "JSON carries the exact value"


def test_the_wait_status_line_escapes_the_holders_owner(repo: Path) -> None:
    from test_cli_more import _tty_run

    put(repo, ref_of(R), forge(R, owner=text("evil\x1b]0;pwned\x07\x1b[2J")))
    out = _tty_run(["acquire", R, "--wait", "1s"], repo, {})
    assert "waiting for" in out
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x07" not in out


def _a_token(cli) -> str:
    doc = cli("acquire", "edge/token-source", "--no-bind", "--json").json
    return receipt_doc(Path(doc["receipt"]))["token"]


def test_a_token_in_a_note_owner_or_checkpoint_is_refused_and_never_shown(cli, repo: Path) -> None:
    token = _a_token(cli)
    held = cli("acquire", R, "--json").json
    outputs = []
    for args, env in (
        (["acquire", "edge/2", "--note", f"my token is {token}"], None),
        (["acquire", "edge/2", "--owner", token], None),
        (["acquire", "edge/2"], {"GITLEASE_OWNER": token}),
        (["release", R, "--checkpoint", f"see {token}"], None),
        (["acquire", "edge/2", "--note", token[:24]], None),  # part of a token is a leak too
    ):
        for json_ in ([], ["--json"]):
            got = cli(*args, *json_, env=env)
            assert got.code == 2, (args, got)
            outputs += [got.out, got.err]
    assert not any(token[4:20] in o for o in outputs), "the refusal never repeats the text"
    assert state(cli, "edge/2") == "free"
    assert cli("show", R, "--json").json["oid"] == held["oid"]
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True
    ).stdout
    assert token.encode() not in objects and token[:24].encode() not in objects


# ------------------------------------------------------------------ item 6: receipt directory


def _receipts(repo: Path) -> Path:
    return repo / ".git" / "worklease" / "receipts"


def test_a_receipt_directory_linked_to_a_shared_directory_is_refused(
    cli, repo: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    _receipts(repo).parent.mkdir(parents=True)
    _receipts(repo).symlink_to(shared)
    got = cli("acquire", R, "--json")
    assert got.code == 2, got
    assert list(shared.iterdir()) == [] and state(cli, R) == "free"


def test_a_shared_receipt_directory_is_refused(cli, repo: Path) -> None:
    _receipts(repo).mkdir(parents=True)
    _receipts(repo).chmod(0o777)
    got = cli("acquire", R, "--json")
    assert got.code == 2, got
    assert list(_receipts(repo).iterdir()) == [] and state(cli, R) == "free"


def test_the_receipt_directory_is_checked_on_every_use(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--json").json
    _receipts(repo).chmod(0o777)
    for args in (["heartbeat", R], ["release", R], ["check", R]):
        got = cli(*args, "--json")
        assert got.code in (2, 4), (args, got)
        assert "others can write" in got.json["error"]["message"], got
    assert cli("show", R, "--json").json["oid"] == doc["oid"], "nothing was changed"
    _receipts(repo).chmod(0o700)
    assert cli("release", R).code == 0


# ------------------------------------------------------------------ item 7: bundle receipts


@pytest.mark.parametrize("verb", ["heartbeat", "check", "release", "show"])
def test_bundle_commands_refuse_another_stores_receipt(cli, tmp_path: Path, verb: str) -> None:
    other = tmp_path / "other.git"
    git("init", "-q", "--bare", str(other), cwd=tmp_path)
    receipt = tmp_path / "bundle.json"
    taken = cli("bundle", "acquire", "o/1", "o/2", "--store", str(other), "--receipt",
                str(receipt), "--no-bind")  # fmt: skip
    assert taken.code == 0, taken
    saved = receipt.read_bytes()
    got = cli("bundle", verb, "--receipt", str(receipt), "--json")
    assert got.code == 2 and "store" in got.json["error"]["message"], got
    assert receipt.read_bytes() == saved
    assert cli("bundle", "check", "--store", str(other), "--receipt", str(receipt)).code == 0


# ------------------------------------------------------------------ item 8: --json


def test_json_after_the_double_dash_is_the_commands_argument(cli, worktrees) -> None:
    a, b = worktrees
    assert cli("acquire", R, cwd=a).code == 0
    got = cli("exec", R, "--", "echo", "--json", cwd=b)
    assert got.code == 3, got
    assert got.out == "" and got.err.startswith("gitlease: HELD:"), got


def test_json_as_the_value_of_an_option_is_that_value(cli, worktrees) -> None:
    a, b = worktrees
    assert cli("acquire", R, cwd=a).code == 0
    got = cli("acquire", R, "--note", "--json", cwd=b)
    assert got.code == 3 and got.out == "" and got.err.startswith("gitlease: HELD:"), got
    took = cli("acquire", "edge/2", "--note", "--json", cwd=b)
    assert took.code == 0 and took.out.startswith("acquired"), took
    assert cli("show", "edge/2", "--json").json["note"] == "--json"
    parse_error = cli("acquire", R, "--no-such-option", "--json", cwd=b)
    assert parse_error.code == 2 and parse_error.json["error"]["code"] == "USAGE"


# ------------------------------------------------------------------ item 9: rollback


def _rolled_back(cli, a: Path, ttl: str = "15m") -> tuple[dict, dict]:
    """A claim released, another taken at the next revision, then the ref moved back to the
    first one's tombstone: (the live claim hidden by the rollback, the tombstone's doc)."""
    first = cli("acquire", R, "--json", cwd=a).json
    tombstone = cli("release", R, "--json", cwd=a).json
    again = cli("acquire", R, "--ttl", ttl, "--json", cwd=a).json
    assert again["revision"] == first["revision"] + 1
    store_git("update-ref", ref_of(R), tombstone["oid"], cwd=a)  # a restored backup does this
    return again, tombstone


def test_a_ref_rolled_back_to_an_older_tombstone_is_refused(cli, worktrees) -> None:
    a, b = worktrees
    again, _ = _rolled_back(cli, a)
    got = cli("acquire", R, "--json", cwd=b)
    assert got.code == 7, f"a second holder while {again['claim_id']} holds: {got}"
    assert "moved back" in got.json["error"]["message"], got
    assert cli("verify", cwd=b).code == 7


def test_verify_reports_a_rollback_and_log_shows_the_hidden_live_claim(cli, worktrees) -> None:
    a, b = worktrees
    again, tombstone = _rolled_back(cli, a)
    report = cli("verify", "--json", cwd=b).json
    assert [(p["kind"], p["resource"]) for p in report["problems"]] == [("rolled-back", R)]
    history = cli("log", R, "--json", cwd=b).json["records"]
    live = [r for r in history if r["claim_id"] == again["claim_id"]]
    assert live and live[-1]["state"] == "active", "the live claim is not hidden"
    assert history[-1]["oid"] == tombstone["oid"] and "moved back" in history[-1]["problem"]
    assert "moved back" in cli("log", R, cwd=b).out
    assert cli("heartbeat", R, cwd=a).code == 4, "its holder learns at its next heartbeat"


def test_verify_repair_waits_for_the_hidden_claim_then_continues_above_it(cli, worktrees) -> None:
    a, b = worktrees
    again, _ = _rolled_back(cli, a, ttl="1m")
    waited = cli("verify", "--repair", "--json", cwd=b)
    assert waited.code == 7 and "left alone until" in waited.json["problems"][0]["message"]
    assert cli("acquire", R, cwd=b).code == 7, "not while the hidden claim may be live"
    later = clock_ahead(61)  # the hidden claim's minute has run out (on a clock moved on)
    repaired = cli("verify", "--repair", "--json", cwd=b, env=later)
    assert repaired.code == 0 and repaired.json["problems"][0]["repaired"], repaired
    took = cli("acquire", R, "--json", cwd=b, env=later)
    assert took.code == 0 and took.json["revision"] == again["revision"] + 2, "never repeated"
    assert cli("verify", cwd=b, env=later).code == 0
    ids = [r["claim_id"] for r in cli("log", R, "--json", cwd=b).json["records"]]
    assert again["claim_id"] in ids, "the history carries on from what really came last"


def test_prune_never_removes_a_tombstone_a_ref_was_moved_back_to(cli, repo: Path) -> None:
    """Removing it would hide the rollback, and let the next acquire in while the claim it
    hid may still be live."""
    again, tombstone = _rolled_back(cli, repo)
    assert cli("prune", "--older-than", "0s").code == 0
    assert cli("show", R, "--json").json["oid"] == tombstone["oid"], "left for verify --repair"
    assert cli("acquire", R, "--no-bind").code == 7
    store_git("update-ref", ref_of(R), again["oid"], cwd=repo)  # put back: no rollback
    assert cli("release", R).code == 0
    assert cli("prune", "--older-than", "0s").code == 0
    assert state(cli, R) == "free", "a healthy tombstone is pruned"
    took = cli("acquire", R, "--no-bind", "--json").json
    assert took["revision"] == again["revision"] + 1, "and continues above it"


def test_a_rollback_is_found_in_the_reflog_without_a_mark(cli, repo: Path) -> None:
    _rolled_back(cli, repo)
    marks = store_path(repo) / "worklease" / "highwater"
    for mark in marks.iterdir():
        mark.unlink()  # (an older gitlease wrote none, or a crash came before it)
    assert cli("verify").code == 7, "the reflog says what the ref held"
    assert cli("acquire", R, "--no-bind").code == 7, "and verify raised the mark"


def test_a_reflog_line_of_a_write_that_never_landed_is_no_rollback(cli, repo: Path) -> None:
    """libgit2 appends the reflog line before it renames the lock: a process killed in
    between leaves a line for a newer record that never reached the ref."""
    held = cli("acquire", R, "--no-bind", "--json").json
    phantom = put(repo, "refs/worklease/scratch.lease", forge(R, revision="9"))
    store_git("update-ref", "-d", "refs/worklease/scratch.lease", cwd=repo)
    log = store_path(repo) / "logs" / ref_of(R)
    with log.open("a") as f:
        f.write(f"{held['oid']} {phantom} killed <k@x> 1700000000 +0000\tgitlease acquire\n")
    assert cli("verify").code == 0
    assert cli("release", R).code == 0
    assert cli("acquire", R, "--no-bind", "--json").json["revision"] == held["revision"] + 1


def test_a_ref_removed_by_hand_continues_above_its_mark(cli, repo: Path) -> None:
    assert cli("acquire", R, "--no-bind").code == 0
    assert cli("release", R).code == 0
    second = cli("acquire", R, "--no-bind", "--json").json
    assert cli("release", R).code == 0
    store_git("update-ref", "-d", ref_of(R), cwd=repo)
    assert cli("acquire", R, "--no-bind", "--json").json["revision"] == second["revision"] + 1


def test_through_a_remote_a_host_refuses_a_ref_moved_back_below_what_it_saw(
    tmp_path: Path,
) -> None:
    from conftest import run_cli
    from hosts import HOST_B_ENV, make_host, make_server

    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")

    def on_b(*args: str):
        return run_cli(*args, cwd=b, env=HOST_B_ENV)

    assert run_cli("acquire", R, "--ttl", "1m", cwd=a).code == 0
    tombstone = run_cli("release", R, "--json", cwd=a).json["oid"]
    assert on_b("acquire", R, "--ttl", "1m").code == 0  # host B writes revision 2
    assert run_cli("acquire", R, cwd=a).code == 3, "host A sees revision 2 (held)"
    git("update-ref", ref_of(R), tombstone, cwd=server)  # the server restored from a backup
    for host in (lambda *x: run_cli(*x, cwd=a), on_b):
        got = host("acquire", R, "--json")
        assert got.code == 7 and "moved back" in got.json["error"]["message"], got


# ------------------------------------------------------------------ item 10: long names


@pytest.mark.parametrize(
    "resource",
    ["L" * 512, "é" * 256, "\U0001f600" * 128, "A/" * 255 + "A", "Jira/" + "ABC-" * 126 + "1"],
    ids=["upper-case", "accented", "emoji", "many-segments", "mixed"],
)
def test_every_resource_within_512_bytes_is_acquirable(cli, resource: str) -> None:
    assert len(resource.encode()) <= 512
    got = cli("acquire", "--no-bind", "--json", "--", resource)
    assert got.code == 0, got
    assert got.json["resource"] == resource
    assert [c["resource"] for c in cli("list", "--json").json["claims"]] == [resource]
    assert cli("heartbeat", "--", resource).code == 0
    assert cli("release", "--", resource).code == 0
    assert cli("verify").code == 0


@pytest.mark.parametrize("resource", ["L" * 513, "é" * 257, "\U0001f600" * 128 + "x"])
def test_a_resource_over_512_bytes_is_usage_never_store(cli, repo: Path, resource: str) -> None:
    got = cli("acquire", "--json", "--", resource)
    assert got.code == 2 and got.json["error"]["code"] == "USAGE", got
    assert refs(repo) == ""


def test_a_ref_name_that_is_not_utf8_is_reported_not_a_crash(cli, repo: Path) -> None:
    """git allows any byte from 0x80 up in a ref name: a hand-made one must not crash."""
    oid = put(repo, ref_of("edge/ok"), forge("edge/ok"))
    store = f"--git-dir={store_path(repo)}"
    subprocess.run(["git", store, "update-ref", b"refs/worklease/\xff.lease", oid], check=True)
    for args in (["list"], ["list", "--json"], ["verify"], ["verify", "--json"], ["free", R],
                 ["acquire", R, "--no-bind"]):  # fmt: skip
        got = cli(*args)
        no_crash(got)
        assert not CONTROL.search(got.out + got.err), got
    listed = cli("list", "--json").json["claims"]
    assert [c["state"] for c in listed] == ["active", "active", "invalid"], listed
    assert listed[2]["ref"] == "refs/worklease/\udcff.lease", "the byte, kept as a surrogate"
    problems = cli("verify", "--json").json["problems"]
    assert [(p["kind"], p["ref"]) for p in problems] == [
        ("bad-ref-name", "refs/worklease/\udcff.lease")
    ]


def test_a_corrupt_record_is_reported_with_its_name_once(cli, repo: Path) -> None:
    resource = "long/" + "/".join(["n" * 90] * 3)
    tampered = forge(resource, owner=text("a")).replace(b'owner "a"', b'owner "b"')
    put(repo, ref_of(resource), tampered)
    got = cli("acquire", resource)
    assert got.code == 7, got
    assert got.err.count(resource) == 1, got.err


# ------------------------------------------------------------------ item 11: free and guards


def test_free_does_not_offer_a_resource_whose_guard_is_held(cli, repo: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "exec", R, "--ttl", "8s", "--", "sleep", "60"],
        cwd=repo,
        start_new_session=True,
    )
    try:
        from conftest import wait_for

        wait_for(lambda: state(cli, R) == "active", what="exec to take the claim")
        os.kill(proc.pid, signal.SIGSTOP)  # exec keeps its guard, and its TTL runs out
        wait_for(lambda: state(cli, R) == "expired", what="the TTL to run out")
        assert cli("acquire", R, "--no-bind").code == 3, "the guard is held"
        assert cli("free", R).out.strip() == "", "so free must not offer it"
        assert cli("free", R, "edge/2").out.split() == ["edge/2"], "and offers the others"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert cli("free", R).out.split() == [R], "the guard is free again at once"


# ------------------------------------------------------------------ item 12: every output


def test_coordination_only_is_stated_by_heartbeat_check_and_release(cli) -> None:
    assert cli("acquire", R, "--coordination-only").code == 0
    for args in (["heartbeat", R], ["check", R], ["release", R]):
        got = cli(*args)
        assert got.code == 0 and "coordination only" in got.out, (args, got)


def test_coordination_only_is_stated_by_exec(cli) -> None:
    got = cli("exec", R, "--coordination-only", "--", "true")
    assert got.code == 0 and "coordination only" in got.out + got.err, got


def test_coordination_only_is_stated_by_bundle_commands(cli) -> None:
    for args in (
        ["bundle", "acquire", "b/1", "b/2", "--coordination-only"],
        ["bundle", "heartbeat"],
        ["bundle", "check"],
        ["bundle", "release"],
    ):
        got = cli(*args)
        assert got.code == 0 and "coordination only" in got.out, (args, got)


def test_coordination_only_is_stated_in_json_by_every_command(cli) -> None:
    sentence = cli("acquire", R, "--coordination-only", "--json").json["guarantee"]
    assert sentence.startswith("coordination only")
    for args in (["heartbeat", R], ["check", R], ["release", R]):
        doc = cli(*args, "--json").json
        assert (doc["mode"], doc["guarantee"]) == ("coordination-only", sentence), (args, doc)
    done = cli("exec", "edge/x", "--coordination-only", "--json", "--", "true").json
    assert done["claim"]["guarantee"] == sentence
    docs = cli("bundle", "acquire", "b/1", "b/2", "--coordination-only", "--json").json
    assert {c["guarantee"] for c in docs["claims"]} == {sentence}


def test_a_guarded_claim_says_nothing_about_coordination(cli) -> None:
    for args in (["acquire", R], ["heartbeat", R], ["check", R], ["exec", R, "--", "true"],
                 ["release", R]):  # fmt: skip
        got = cli(*args)
        assert got.code == 0 and "coordination" not in got.out + got.err, (args, got)


def test_check_json_says_a_bound_claim_is_bound(cli) -> None:
    assert cli("acquire", R, "--json").json["bound"] is True
    assert cli("show", R, "--json").json["bound"] is True
    assert cli("check", R, "--json").json["bound"] is True


def test_every_command_that_looks_says_bound_truly_and_the_others_say_null(cli) -> None:
    assert cli("acquire", R, "--json").json["bound"] is True
    assert cli("heartbeat", R, "--json").json["bound"] is True
    assert cli("acquire", "edge/2", "--no-bind", "--json").json["bound"] is False
    assert cli("check", "edge/2", "--json").json["bound"] is False
    assert [c["bound"] for c in cli("list", "--json").json["claims"]] == [True, False]
    bundle = cli("bundle", "acquire", "b/1", "b/2", "--json").json
    assert [c["bound"] for c in bundle["claims"]] == [True, True]
    assert [c["bound"] for c in cli("bundle", "check", "--json").json["claims"]] == [True, True]
    assert cli("release", R, "--json").json["bound"] is False, "release unbinds"
    assert {c["bound"] for c in cli("log", R, "--json").json["records"]} == {None}, "not looked"
    held = cli("acquire", "edge/2", "--json").json["error"]["claim"]
    assert held["bound"] is None, "an error's claim: not looked"


def test_exec_json_sends_the_commands_stdout_to_stderr(cli) -> None:
    got = cli("exec", R, "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert got.code == 3, got
    doc = json.loads(got.out)
    assert doc["exit"] == 3 and doc["claim"]["state"] == "released", "exec acquired it"
    assert got.err.split() == ["out", "err"], got
    assert cli("acquire", R).code == 0
    kept = cli("exec", R, "--json", "--", "true")
    assert kept.code == 0 and kept.json["claim"]["state"] == "active", "the caller's own"
    assert kept.json["claim"]["bound"] is True
    lost = cli("exec", "edge/2", "--json", "--", "true", env={"GITLEASE_TESTING_X": "1"})
    assert lost.code == 0 and json.loads(lost.out)["exit"] == 0, "a warning stays on stderr"


def test_exec_json_prints_one_json_document(cli) -> None:
    got = cli("exec", R, "--json", "--", "true")
    assert got.code == 0, got
    json.loads(got.out)


# ------------------------------------------------------------------ item 14: test switches


def test_a_test_only_boot_offset_alone_is_ignored(cli, worktrees) -> None:
    a, b = worktrees
    env = {"GITLEASE_TESTING_BOOT_OFFSET_MS": "3600000000"}
    took = cli("acquire", R, "--ttl", "1s", cwd=a, env=env)
    assert took.code == 0 and "ignoring the test-only GITLEASE_TESTING_BOOT_OFFSET_MS" in took.err
    time.sleep(1.2)
    assert cli("acquire", R, cwd=b).code == 0, "a 1-second claim must not live 1000 hours"


@pytest.mark.parametrize("gate", [None, "yes", "1"], ids=["no-gate", "yes", "one"])
def test_a_test_only_boot_id_alone_is_ignored(cli, gate: str | None) -> None:
    assert cli("acquire", R).code == 0
    env = {"GITLEASE_TESTING_BOOT_ID": "x", **({"GITLEASE_TESTING": gate} if gate else {})}
    got = cli("list", "--json", env=env)
    assert got.json["claims"][0]["state"] == "active", got
    assert "WARNING" in got.err and "ignor" in got.err, got


def test_with_the_explicit_test_switch_the_switches_count_and_every_command_warns(
    cli, repo: Path
) -> None:
    from conftest import TESTING

    assert cli("acquire", R).code == 0
    other_host = {**TESTING, "GITLEASE_TESTING_BOOT_ID": "x"}
    for args in (["list", "--json"], ["show", R, "--json"], ["free", "edge/9"]):
        got = cli(*args, env=other_host)
        assert got.code == 0, got
        assert got.err.startswith("gitlease: WARNING: GITLEASE_TESTING is set"), got
        assert "GITLEASE_TESTING_BOOT_ID" in got.err
    assert cli("show", R, "--json", env=other_host).json["state"] == "expired", "it counted"
    alone = cli("list", env=TESTING)
    assert "WARNING: GITLEASE_TESTING is set" in alone.err, "even with no switch in force"
    assert cli("list").err == "", "and nothing without it"


def test_a_malformed_test_only_switch_never_crashes_a_command(cli) -> None:
    got = cli("list", env={"GITLEASE_TESTING_BOOT_OFFSET_MS": "abc"})
    no_crash(got)
    assert got.code == 0, got


# ------------------------------------------------------------------ item 15: partial bundles


def _partial_bundle(cli, repo: Path, receipt: Path | None = None) -> list[str]:
    """What a bundle acquire killed mid-commit leaves: the receipt, and one member written
    (libgit2 commits ref by ref). Built by removing the other member's ref."""
    extra = ["--receipt", str(receipt)] if receipt else []
    assert cli("bundle", "acquire", "p/1", "p/2", "--no-bind", *extra).code == 0
    store_git("update-ref", "-d", ref_of("p/2"), cwd=repo)
    return extra


def test_verify_reports_a_partial_bundle_and_bundle_commands_refuse_it(cli, repo: Path) -> None:
    _partial_bundle(cli, repo)
    report = cli("verify", "--json")
    assert report.code == 7
    assert [p["kind"] for p in report.json["problems"]] == ["partial-bundle"]
    assert "p/2" in report.json["problems"][0]["message"]
    for args in (["bundle", "check"], ["bundle", "heartbeat"]):
        got = cli(*args, "--json")
        assert got.code == 4 and "partial: p/2 was never written" in got.json["error"]["message"]


@pytest.mark.parametrize("where", ["receipt", "worktree"])
def test_nobody_can_act_on_a_member_of_a_partial_bundle(cli, repo: Path, where: str) -> None:
    extra = _partial_bundle(cli, repo, repo.parent / "bundle.json" if where == "receipt" else None)
    held = cli("show", "p/1", "--json").json
    (repo / "f").write_text("old\n")
    for args in (
        ["check", "p/1"], ["heartbeat", "p/1"], ["exec", "p/1", "--", "true"],
        ["check", "p/2"], ["heartbeat", "p/2"],
        ["replace-file", str(repo / "f"), "p/1", "--expect-absent"],
    ):  # fmt: skip
        got = cli(*args[:2], *extra, "--json", *args[2:], input="new\n")
        assert got.code == 4, (args, got)
        assert "p/2 was never written" in got.json["error"]["message"], (args, got)
    assert (repo / "f").read_text() == "old\n"
    assert cli("show", "p/1", "--json").json["oid"] == held["oid"], "nothing was renewed"


def test_a_member_left_at_its_older_record_is_never_written_too(cli, repo: Path) -> None:
    """The member's ref still shows what was there before the bundle (a tombstone of an
    earlier claim), as a crash before its ref was committed leaves it."""
    assert cli("acquire", "p/2").code == 0
    older = cli("release", "p/2", "--json").json["oid"]
    assert cli("bundle", "acquire", "p/1", "p/2", "--no-bind").code == 0
    store_git("update-ref", ref_of("p/2"), older, cwd=repo)
    got = cli("bundle", "check", "--json")
    assert got.code == 4 and "p/2 was never written" in got.json["error"]["message"], got
    assert cli("check", "p/1").code == 4


def test_a_partial_bundle_releases_what_it_holds(cli, repo: Path) -> None:
    _partial_bundle(cli, repo)
    got = cli("bundle", "release", "--json")
    assert got.code == 0, got
    assert [c["state"] for c in got.json["claims"]] == ["released", "free"]
    assert "never written" in cli("bundle", "release").out, "text says what was not held"
    assert cli("verify").code == 0, "the receipt is spent: nothing partial any more"
    assert cli("bundle", "acquire", "p/1", "p/2").code == 0


def test_releasing_only_the_unwritten_member_is_lost(cli, repo: Path) -> None:
    receipt = repo.parent / "bundle.json"
    _partial_bundle(cli, repo, receipt)
    got = cli("release", "p/2", "--receipt", str(receipt), "--json")
    assert got.code == 4 and "never written" in got.json["error"]["message"], got
    assert cli("release", "p/1", "--receipt", str(receipt)).code == 0, "the held one: yes"
    assert state(cli, "p/1") == "released"


def test_a_whole_bundle_whose_member_was_released_and_taken_is_not_partial(cli, worktrees) -> None:
    """The documented flow: one member released on its own, then taken by someone else;
    the other member stays the bundle holder's to renew, check and release."""
    a, b = worktrees
    assert cli("bundle", "acquire", "w/1", "w/2", cwd=a).code == 0
    assert cli("release", "w/2", cwd=a).code == 0
    assert cli("acquire", "w/2", cwd=b).code == 0
    assert cli("release", "w/2", cwd=b).code == 0
    assert cli("acquire", "w/2", cwd=b).code == 0  # a later revision: the chain is followed
    for args in (["check", "w/1"], ["heartbeat", "w/1"], ["exec", "w/1", "--", "true"]):
        assert cli(*args, cwd=a).code == 0, args
    assert [p["kind"] for p in cli("verify", "--json", cwd=a).json["problems"]] == []
    assert cli("bundle", "check", cwd=a).code == 4, "the bundle as a whole is not held"
    assert cli("release", "w/1", cwd=a).code == 0


# ------------------------------------------------------------------ item 16: durations


@pytest.mark.parametrize(
    "args",
    [
        ["acquire", R, "--ttl", "٥"],
        ["acquire", R, "--ttl", "５m"],
        ["acquire", R, "--wait", "٣s"],
        ["check", R, "--min-remaining", "١m"],
        ["prune", "--older-than", "٧d"],
    ],
)
def test_durations_accept_ascii_digits_only(cli, repo: Path, args: list[str]) -> None:
    got = cli(*args, "--json")
    assert got.code == 2 and got.json["error"]["code"] == "USAGE", got
    assert refs(repo) == ""


def test_a_required_claim_refusal_does_not_say_re_acquire(cli, repo: Path) -> None:
    assert cli("hooks", "install").code == 0
    git("config", "gitlease.requireClaim", "true", cwd=repo)
    (repo / "f").write_text("x\n")
    git("add", "f", cwd=repo)
    got = git("commit", "-qm", "x", cwd=repo, check=False)
    assert got.returncode != 0 and "requires a claim" in got.stderr
    assert "Re-acquire" not in got.stderr, got.stderr
