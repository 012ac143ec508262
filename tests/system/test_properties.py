"""Properties (hypothesis) of everything that reads untrusted input: record bytes behind a
ref, and what a caller types (docs/reliability.md, "At the edges").

The parsers are called in-process, with many examples; the commands run as real
subprocesses, with few examples each (a subprocess costs a quarter of a second), so the
whole file stays within a few tens of seconds.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pygit2
import pytest
from conftest import make_repo, store_path
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from gitlease._util.text import printable
from gitlease.errors import CorruptRecordError, UsageError
from gitlease.model.clock import parse_duration_ms, parse_rfc3339
from gitlease.model.fields import check_text
from gitlease.model.record import parse_and_verify
from gitlease.model.refname import MAX_REF_CHARS, MAX_RESOURCE_BYTES, decode, encode
from gitlease.receipts.reservation import check_explicit_location

CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # anything but a newline
TOKEN_LIKE = re.compile(r"glt_[A-Za-z0-9_-]{16,}")
FAST = settings(max_examples=300, deadline=None)
CLI = settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# ------------------------------------------------------------------ forged records


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(seconds))) + ".000Z"


_NASTY = [
    "-", "", " ", "7" * 5000, str(10**400), str(2**63), str(2**63 - 1), "١٢", "0x10", "-5",
    "not-a-time", "yesterday", "2026-02-30T10:00:00.000Z", "9999-12-31T23:59:59.999Z",
    "0000-01-01T00:00:00.000Z", "2026-11-29T15:02:15.873Z\n", '"\\ud800"', '"a\\u0000b"', "--help",
    "[[[[[[[[[[", '"\\u001b]0;x\\u0007"', '"glt_' + "A" * 43 + '"', "--batch-all-objects",
    "\x1b[2J",
    "held", "released", "guarded", "coordination-only", "a" * 64, "0" * 40, '"é"', '"\\u00e9"',
]  # fmt: skip
_raw = st.one_of(
    st.sampled_from(_NASTY),
    st.text(max_size=20),
    st.integers(min_value=-1, max_value=2**70).map(str),
)
_text = st.text(max_size=20).map(lambda s: json.dumps(s, ensure_ascii=False))
_VALID = {
    "state": st.sampled_from(["held", "released"]),
    "revision": st.integers(0, 2**63 - 1).map(str),
    "mode": st.sampled_from(["guarded", "coordination-only"]),
    "expires-at": st.floats(0, 4e9).map(_stamp),
    "released-at": st.one_of(st.just("-"), st.floats(0, 4e9).map(_stamp)),
    "boot-id": st.sampled_from([Path("/proc/sys/kernel/random/boot_id").read_text().strip(), "b"]),
    "boot-expires-ms": st.one_of(st.integers(0, 2**63 - 1), st.integers(0, 10**10)).map(str),
    "ttl-ms": st.integers(0, 2**63 - 1).map(str),
    "owner": _text,
    "note": st.one_of(st.just("-"), _text),
    "checkpoint": st.one_of(st.just("-"), _text),
    "previous": st.sampled_from(["-", "a" * 40, "b" * 64]),
}


@st.composite
def forged_records(draw, resource: str = "p/0") -> bytes:
    """Validly self-signed records whose values are anything, as anyone with write access to
    the repository could make them; or plain bytes."""
    from forged import forge

    kind = draw(st.sampled_from(["bytes", "valid", "valid", "nasty", "nasty", "nasty"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    values = {}
    for name, valid in _VALID.items():
        choice = draw(st.integers(0, 3))
        if choice:  # valid values only, or now and then anything at all
            values[name] = draw(_raw if kind == "nasty" and choice == 1 else valid)
    if kind == "nasty" and draw(st.booleans()):
        values["resource"] = draw(st.one_of(_text, _raw))
    data = forge(resource, **values)
    if kind == "nasty" and draw(st.integers(0, 4)) == 0:  # and a byte changed somewhere
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1 :]
    return data


@given(forged_records())
@FAST
def test_any_record_bytes_give_a_record_or_a_clean_invalid(data: bytes) -> None:
    try:
        record = parse_and_verify(data)
    except CorruptRecordError:
        return
    for name in ("acquired_at", "renewed_at", "expires_at", "renew_by"):
        parse_rfc3339(getattr(record, name))
    if record.released_at is not None:
        parse_rfc3339(record.released_at)
    assert all(0 <= n < 2**63 for n in (record.revision, record.ttl_ms, record.boot_expires_ms))
    for value in (record.resource, record.owner, record.note or "", record.checkpoint or ""):
        value.encode("utf-8")  # no lone surrogate: every output can print it
        assert not CONTROL.search(printable(value))
    assert re.fullmatch(r"[0-9a-f]+", record.previous or "0")


def _put(repo: Path, ref: str, data: bytes) -> None:
    git_dir = f"--git-dir={store_path(repo)}"
    oid = subprocess.run(
        ["git", git_dir, "hash-object", "-w", "--stdin"], cwd=repo, input=data, capture_output=True
    ).stdout.strip()
    subprocess.run(["git", git_dir, "update-ref", ref, oid], cwd=repo, check=True)


def _cli(repo: Path, *args: str | bytes, env: dict | None = None) -> subprocess.CompletedProcess:
    return _wait(_start(repo, *args, env=env))


def _start(repo: Path, *args: str | bytes, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gitlease", *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


def _wait(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _clean(proc: subprocess.CompletedProcess, allowed: set[int], json_out: bool = False) -> None:
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    assert proc.returncode in allowed, (proc.args, proc.returncode, out, err)
    assert "Traceback" not in err and "unexpected error" not in out + err, (proc.args, err)
    if json_out:
        json.loads(out)
    else:
        assert not CONTROL.search(out + err), (proc.args, out, err)


@given(
    st.tuples(
        forged_records("p/0"),
        st.one_of(st.none(), forged_records("p/1")),
        st.one_of(st.none(), forged_records("p/2")),
    )
)
@CLI
@example((b"gitlease-claim v1\n", None, None))
def test_every_store_wide_command_survives_any_record(tmp_path_factory, records) -> None:
    repo = make_repo(tmp_path_factory.mktemp("store") / "repo")
    names = [f"p/{i}" for i, data in enumerate(records) if data is not None]
    for name, data in zip(names, [r for r in records if r is not None], strict=True):
        _put(repo, f"refs/worklease/{name}.lease", data)
    reads = [  # they only look: run side by side
        (_start(repo, "list"), {0}, False),
        (_start(repo, "list", "--json"), {0}, True),
        (_start(repo, "show", names[0]), {0, 7}, False),
        (_start(repo, "free", *names), {0}, False),
        (_start(repo, "log", names[0]), {0, 7}, False),
        (_start(repo, "verify"), {0, 7}, False),
    ]
    for proc, allowed, json_out in reads:
        _clean(_wait(proc), allowed, json_out)
    taken = _cli(repo, "acquire", names[-1], "--no-bind")
    _clean(taken, {0, 3, 7})
    event(f"acquire over it: exit {taken.returncode}")
    _clean(_cli(repo, "verify", "--repair"), {0, 7})  # verify, and repair what can be
    _clean(_cli(repo, "prune", "--older-than", "0s"), {0})


# ------------------------------------------------------------------ what callers type

_controls = st.sampled_from(["\x1b", "\r", "\n", "\t", "\x7f", "\x9b", "\x85", "\x00"])
_wild = st.one_of(
    st.text(max_size=30),
    st.lists(st.one_of(st.text(max_size=4), _controls), max_size=6).map("".join),
    st.text(alphabet="A-Za-z0-9_", max_size=30).map(lambda s: "glt_" + s),
    st.sampled_from(["--json", "-", "", "é" * 300, "glt_" + "x" * 43, "٥", "５m", "1.5m"]),
)


@given(_wild)
@settings(max_examples=1000, deadline=None)
def test_free_text_is_accepted_only_without_controls_or_tokens(value: str) -> None:
    try:
        assert check_text(value, "the note", max_chars=200) == value
    except UsageError as exc:
        found = TOKEN_LIKE.search(value)
        assert found is None or found.group() not in exc.message, "never repeats a token"
        return
    assert not CONTROL.search(value) and "\n" not in value and len(value) <= 200
    assert not TOKEN_LIKE.search(value)
    assert printable(value) == value


@given(st.text(max_size=40))
@settings(max_examples=1000, deadline=None)
def test_printable_leaves_no_control_character(value: str) -> None:
    shown = printable(value)
    assert not CONTROL.search(shown) and "\n" not in shown
    shown.encode("utf-8")


@given(st.one_of(st.text(max_size=40), _wild, st.text("ab\n\x1b[0-9;m\x85\ud800\u200b é")))
@settings(max_examples=1000, deadline=None)
def test_the_printable_fast_paths_answer_as_the_patterns(value: str) -> None:
    """``printable`` and the CLI's output net skip their pattern when Python calls the text
    printable: what they give is what the pattern alone gives."""
    from gitlease._util.text import UNPRINTABLE, _escape_char, escape_invisible
    from gitlease.cli.output import _CONTROL_OR_COLOUR, safe_text

    assert printable(value) == UNPRINTABLE.sub(_escape_char, value)
    net = re.sub(_CONTROL_OR_COLOUR, lambda m: m.group(1) or printable(m.group()), value)
    assert safe_text(value) == escape_invisible(net)


@given(st.one_of(_wild, st.from_regex(r"\s*\d{1,4}(\.\d{1,3})?\s*(ms|s|m|h|d)?\s*")))
@settings(max_examples=500, deadline=None)
def test_durations_take_ascii_digits_only(value: str) -> None:
    try:
        ms = parse_duration_ms(value)
    except UsageError:
        return
    blank = "[ \t\n\r\x0b\x0c]*"
    assert ms >= 0
    assert re.fullmatch(f"{blank}[0-9]+(\\.[0-9]+)?{blank}(ms|s|m|h|d)?{blank}", value), value


# Resources: any text without control characters, up to 512 UTF-8 bytes, often long.
_resource_chars = st.characters(blacklist_categories=("Cc", "Cs"))
resources = st.one_of(
    st.text(_resource_chars, min_size=1, max_size=40),
    st.text(st.sampled_from("aA/é.-_%+L😀"), min_size=100, max_size=512),
).filter(lambda s: len(s.encode()) <= MAX_RESOURCE_BYTES)


def _v1_ref(resource: str) -> str:
    """The ref of ``resource`` as every version before the compact form wrote it (frozen
    here on purpose: stores hold refs written this way, and they must decode unchanged)."""
    safe = set("abcdefghijklmnopqrstuvwxyz0123456789-_")
    components: list[str] = []
    segments, current = [], []
    for i, ch in enumerate(resource):
        if ch == "/" and current and i + 1 < len(resource) and resource[i + 1] != "/":
            segments.append("".join(current))
            current = []
        else:
            current.append("\0" if ch == "/" else ch)
    segments.append("".join(current))
    for segment in segments:
        out, last = [], len(segment) - 1
        for i, ch in enumerate(segment):
            dot_ok = ch == "." and 0 < i < last and segment[i - 1] != "." and segment[i + 1] != "."
            out.append(ch if ch in safe or dot_ok else "".join(f"%{b:02x}" for b in ch.encode()))
        text = "".join(out)
        for ending in (".lock", ".lease"):
            if text.endswith(ending):
                text = text[: -len(ending)] + "%2e" + ending[1:]
        text = text.replace("%00", "%2f")
        pieces = []
        while len(text) > 96:
            cut = 96
            while cut > 0 and ("%" in text[cut - 2 : cut] or text[cut] == "."):
                cut -= 1
            pieces.append(text[:cut])
            text = text[cut:]
        pieces.append(text)
        components += [p + "+" for p in pieces[:-1]] + [pieces[-1]]
    return "refs/worklease/" + "/".join(components) + ".lease"


@given(resources)
@FAST
@example("L" * 512)
@example("A/" * 255 + "A")
def test_every_resource_has_a_ref_libgit2_accepts_and_old_refs_decode_unchanged(
    resource: str,
) -> None:
    ref = encode(resource)
    assert len(ref) <= MAX_REF_CHARS and pygit2.reference_is_valid_name(ref)
    assert ref == ref.lower() and decode(ref) == resource
    assert all(0 < len(c) < 128 for c in ref.split("/"))
    old = _v1_ref(resource)
    if len(old) <= MAX_REF_CHARS:  # could have been written: must mean the same resource
        assert ref == old
    else:
        assert ref.startswith("refs/worklease/=/")


def test_the_longest_escaped_refs_are_kept_and_longer_ones_are_compact(tmp_path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r"), bare=True)
    blob = repo.create_blob(b"x")
    forms = set()
    for k in range(150):
        resource = "A" * 300 + "a" * k  # lengthens the escaped ref a step at a time
        old, ref = _v1_ref(resource), encode(resource)
        compact = len(old) > MAX_REF_CHARS
        assert ref.startswith("refs/worklease/=/") if compact else ref == old
        forms.add(compact)
        repo.references.create(ref, blob, force=True)  # libgit2 takes every one of them
        assert decode(ref) == resource
    assert forms == {False, True}, "both sides of the limit were tried"


def _receipt_json(store: str) -> bytes:
    claims = [{"resource": "x", "ref": "refs/worklease/x.lease", "claim_id": "c-0", "revision": 1}]
    doc = {"version": 1, "store": store, "bundle_id": None, "claims": claims, "token": None}
    return json.dumps(doc).encode()


@given(
    st.one_of(
        st.binary(max_size=200),
        st.sampled_from(["/the/store", "/another/store"]).map(_receipt_json),
    ),
    st.sampled_from([0o600, 0o644]),
)
@settings(max_examples=200, deadline=None)
def test_an_explicit_receipt_path_is_accepted_only_if_absent_or_a_receipt(
    tmp_path_factory, content: bytes, mode: int
) -> None:
    directory = tmp_path_factory.mktemp("receipts")
    directory.chmod(0o700)
    path = directory / "r.json"
    path.write_bytes(content)
    path.chmod(mode)
    try:
        check_explicit_location(path, "/the/store")
    except UsageError:
        pass
    else:
        doc = json.loads(content) if content else {}
        assert mode == 0o600 and (not content or doc["store"] == "/the/store")
    assert path.read_bytes() == content and stat.S_IMODE(path.stat().st_mode) == mode


_kinds = st.sampled_from(["none", "default", "file", "fifo", "dir", "link", "spent", "other"])


_fine = {
    "resource": resources,
    "ttl": st.sampled_from([None, "90", "15m", "1d", " 2h "]),
    "owner": st.sampled_from([None, "agent-7", "ågent@host:1"]),
    "note": st.sampled_from([None, "", "fixing the login bug", "--json", "glt_"]),
    "checkpoint": st.sampled_from([None, "https://example.invalid/42#c1"]),
}


@st.composite
def command_lines(draw) -> dict:
    """One input wild (or none), the others ordinary: so that many lines reach the store."""
    wild = draw(st.sets(st.sampled_from(sorted(_fine)), max_size=1))
    line = {k: draw(_wild.filter(bool) if k in wild else v) for k, v in _fine.items()}
    line["receipt"] = draw(_kinds)
    line["name"] = draw(st.one_of(st.just("r.json"), st.text(_resource_chars, max_size=30)))
    return line


def _arg(value: str) -> str:
    """An argument vector cannot hold NUL."""
    return value.replace("\0", "?")


def _receipt_at(kind: str, path: Path, repo: Path) -> bytes | None:
    if kind == "file":
        path.write_bytes(b"precious\n")
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "dir":
        path.mkdir()
    elif kind == "link":
        path.symlink_to(path.parent / "elsewhere")
    elif kind in ("spent", "other"):
        path.write_bytes(_receipt_json(str(store_path(repo)) if kind == "spent" else "/other"))
        path.chmod(0o600)
    return path.read_bytes() if path.is_file() and not path.is_symlink() else None


@given(command_lines())
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@example(
    {
        "resource": "L" * 512,
        "ttl": "٥",
        "owner": "o\x7f",
        "note": "n\x1b",
        "checkpoint": "c\n",
        "receipt": "fifo",
        "name": "r",
    }
)
def test_any_command_line_gets_a_true_exit_code_and_shows_no_token(tmp_path_factory, line) -> None:
    base = tmp_path_factory.mktemp("inputs")
    repo = make_repo(base / "repo")
    private = base / "private"
    private.mkdir(mode=0o700)
    name = line["name"].replace("/", "_").replace("\0", "_") or "r"
    name = "r" if name in (".", "..") else name
    path = private / name
    before = _receipt_at(line["receipt"], path, repo)
    args: list[str | bytes] = ["acquire", "--no-bind"]
    for option in ("ttl", "owner", "note"):
        if line[option] is not None:
            args += [f"--{option}", _arg(line[option])]
    if line["receipt"] != "default":
        args += ["--receipt", str(path)]
    args += ["--", _arg(line["resource"])]
    got = _cli(repo, *args)
    _clean(got, {0, 2})
    event(f"acquire exit {got.returncode}")
    outputs = [got.stdout, got.stderr]
    for option in ("owner", "note"):
        found = TOKEN_LIKE.search(line[option] or "")
        if found:
            assert got.returncode == 2 and found.group().encode() not in got.stdout + got.stderr
    if got.returncode != 0:
        if before is not None:
            assert path.read_bytes() == before, "a refused acquire leaves the receipt path alone"
        return
    if line["receipt"] == "default":
        (written,) = (repo / ".git" / "worklease" / "receipts").glob("*/*.json")
    else:
        written = path
    token = json.loads(written.read_text())["token"]
    release = ["release", "--", _arg(line["resource"])]
    if line["checkpoint"] is not None:
        release[1:1] = ["--checkpoint", _arg(line["checkpoint"])]
    if line["receipt"] != "default":
        release[1:1] = ["--receipt", str(path)]
    released = _cli(repo, *release)
    _clean(released, {0, 2})
    outputs += [released.stdout, released.stderr]
    shown = _cli(repo, "show", "--json", "--", _arg(line["resource"]))
    _clean(shown, {0}, json_out=True)
    state = json.loads(shown.stdout)["state"]
    assert state == ("released" if released.returncode == 0 else "active"), (released, state)
    assert not any(token.encode() in o for o in outputs), "the token stays in its receipt"


@pytest.mark.parametrize("value", [b"\xff\xfe", b"ok\xffname"])
def test_arguments_that_are_not_utf8_are_usage_errors(tmp_path: Path, value: bytes) -> None:
    repo = make_repo(tmp_path / "repo")
    for args in (
        ["acquire", value],
        ["acquire", "x", "--note", value],
        ["acquire", "x", "--owner", value],
        ["acquire", "x", "--receipt", str(tmp_path).encode() + b"/" + value],
    ):
        _clean(_cli(repo, *args), {2})
    assert json.loads(_cli(repo, "list", "--json").stdout) == {"claims": []}
