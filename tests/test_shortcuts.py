"""The cheap paths of performance round two, each shown taken, and shown not taken where it
must not be (docs/design.md: the object id shortcut, the verified-records cache, receipts).

Counting, never timing: which modules a process imported, which files a command touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from conftest import NEEDS_SHIM, git, make_repo, run_cli, store_path, wall_clock_moved
from hypothesis import given, settings
from hypothesis import strategies as st

R = "github/acme/api/20"

# Runs in a subprocess in the worktree; prints what it answered and whether it loaded crypto.
_PROBE = """
import json, sys
from pathlib import Path
what = sys.argv[1]
out = {}
if what == "hook":
    from gitlease.hooks import check as hookcheck
    out["problems"] = hookcheck.problems()
elif what == "cli":
    from gitlease.cli import run
    sys.argv = ["gitlease", *sys.argv[2:]]
    try:
        run()
    except SystemExit as exc:
        out["code"] = exc.code
out["crypto"] = sorted(m for m in sys.modules if m.startswith("cryptography"))
sys.stderr.write("PROBE " + json.dumps(out) + "\\n")
"""


def probe(cwd: Path, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True
    )
    line = next(x for x in proc.stderr.splitlines() if x.startswith("PROBE "))
    return json.loads(line[len("PROBE ") :])


def receipt_of(doc: dict) -> Path:
    return Path(doc["receipt"])


def binding_of(repo: Path, resource: str = R) -> Path:
    from gitlease.model.refname import encode
    from gitlease.receipts.receipt import resource_key

    return repo / ".git" / "worklease" / "bindings" / f"{resource_key(encode(resource))}.json"


def oid_of(repo: Path, resource: str = R) -> str | None:
    return json.loads(binding_of(repo, resource).read_text()).get("oid")


# ------------------------------------------------------------------ the object id shortcut


def test_the_commit_check_of_our_own_record_needs_no_cryptography(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    assert oid_of(repo) == doc["oid"], "the binding names the record that landed"
    assert "oid" not in receipt_of(doc).read_text(), "(the receipt's format is unchanged)"
    got = probe(repo, "hook")
    assert got == {"problems": [], "crypto": []}, got
    assert cli("heartbeat", R).code == 0
    now = cli("show", R, "--json").json["oid"]
    assert oid_of(repo) == now != doc["oid"], "a heartbeat records its record too"
    assert probe(repo, "hook") == {"problems": [], "crypto": []}


def test_check_of_our_own_record_needs_no_cryptography(cli, repo: Path) -> None:
    assert cli("acquire", R, "--ttl", "5m").code == 0
    got = probe(repo, "cli", "check", R)
    assert got == {"code": 0, "crypto": []}, got
    assert cli("heartbeat", R).code == 0
    assert probe(repo, "cli", "check", R) == {"code": 0, "crypto": []}


def test_without_a_binding_check_verifies(cli, repo: Path) -> None:
    assert cli("acquire", R, "--ttl", "5m", "--no-bind").code == 0
    got = probe(repo, "cli", "check", R)
    assert got["code"] == 0 and got["crypto"], got


def test_a_binding_others_could_write_is_not_believed(cli, repo: Path) -> None:
    assert cli("acquire", R, "--ttl", "5m").code == 0
    binding_of(repo).chmod(0o666)
    got = probe(repo, "hook")
    assert got["problems"] == [] and got["crypto"], "the id is ignored; the record verified"
    binding_of(repo).chmod(0o600)
    binding_of(repo).parent.chmod(0o777)
    got = probe(repo, "hook")
    assert got["problems"] == [] and got["crypto"], got


def test_a_replaced_record_is_still_lost_and_checked(cli, repo: Path, tmp_path: Path) -> None:
    cli("acquire", R, "--ttl", "1s")
    time.sleep(1.3)
    other = tmp_path / "other.json"
    assert cli("acquire", R, "--ttl", "5m", "--receipt", str(other), "--no-bind").code == 0
    got = probe(repo, "hook")
    assert got["crypto"], "another's record is verified, not taken as ours"
    assert len(got["problems"]) == 1 and "replaced" in got["problems"][0], got
    got = probe(repo, "cli", "check", R)
    assert got["code"] == 4 and got["crypto"], got


def _replace_object(git_dir: Path, oid: str, data: bytes) -> None:
    """Put other bytes under the name ``oid`` in the store (git does not hash what it reads)."""
    path = git_dir / "objects" / oid[:2] / oid[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob %d\0" % len(data) + data))


def _forged(doc: dict) -> bytes:
    """A record of our claim (same claim id, revision), self-signed by another key, good
    for an hour: what someone who can write the store, but has not our token, can make."""
    from gitlease.model.record import SigningKey, new_token, parse

    raw = subprocess.run(
        ["git", "--git-dir", doc["store"], "cat-file", "blob", doc["oid"]],
        capture_output=True,
        check=True,
    ).stdout
    mine = parse(raw)
    key = SigningKey(new_token())
    forged = mine.evolve(
        public_key=key.public_hex, boot_expires_ms=mine.boot_expires_ms + 3_600_000
    )
    return forged.signed(key).raw or b""


def test_a_forged_record_under_our_object_id_is_refused(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    doc["store"] = str(store_path(repo))
    _replace_object(Path(doc["store"]), doc["oid"], _forged(doc))
    assert cli("show", R, "--json").json["oid"] == doc["oid"], "git still names our object id"
    got = probe(repo, "hook")
    assert got["crypto"], "bytes that do not hash to the id are verified"
    assert len(got["problems"]) == 1 and "forged" in got["problems"][0], got
    got = probe(repo, "cli", "check", R)
    assert got["code"] == 4, got


def test_an_untrusted_receipt_still_fails_the_commit_check(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    receipt_of(doc).chmod(0o644)
    got = probe(repo, "hook")
    assert len(got["problems"]) == 1 and "not trusted" in got["problems"][0], got
    assert probe(repo, "cli", "check", R)["code"] == 4


# ------------------------------------------------------------------ the verified-records cache


def _cache(repo: Path) -> Path:
    return store_path(repo) / "worklease" / f"verified-{os.getuid()}"


def test_reads_verify_a_record_once_across_processes(cli, repo: Path) -> None:
    for i in range(3):
        assert cli("acquire", f"c/{i}", "--ttl", "5m", "--no-bind").code == 0
    assert probe(repo, "cli", "list", "--json")["crypto"], "the first list verifies"
    assert _cache(repo).exists()
    for args in (["list", "--json"], ["show", "c/1"], ["free", "c/1", "c/9"]):
        got = probe(repo, "cli", *args)
        assert got["code"] == 0 and got["crypto"] == [], (args, got)
    assert cli("heartbeat", "c/2").code == 0
    assert probe(repo, "cli", "show", "c/2")["crypto"], "a new record is verified"
    assert probe(repo, "cli", "show", "c/2")["crypto"] == [], "and then remembered"


def _tampered(repo: Path) -> str:
    """Make the record of c/1 fail its signature (its note changed, the signature kept), set
    the ref to it; its object id."""
    gd = store_path(repo)
    oid = git(f"--git-dir={gd}", "rev-parse", "refs/worklease/c/1.lease", cwd=repo).stdout.strip()
    raw = git(f"--git-dir={gd}", "cat-file", "blob", oid, cwd=repo).stdout
    bad = raw.replace("note -", 'note "tampered"')
    new = (
        subprocess.run(
            ["git", f"--git-dir={gd}", "hash-object", "-w", "--stdin"],
            input=bad.encode(),
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    git(f"--git-dir={gd}", "update-ref", "refs/worklease/c/1.lease", new, cwd=repo)
    return new


def _write_cache(repo: Path, oids: list[str], mode: int = 0o600) -> None:
    from gitlease.state.verified_records import MAGIC

    path = _cache(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(MAGIC + "".join(f"{o}\n" for o in oids).encode())
    path.chmod(mode)


def test_a_cache_entry_never_passes_other_bytes_under_its_id(cli, repo: Path) -> None:
    doc = cli("acquire", "c/1", "--ttl", "5m", "--no-bind", "--json").json
    cli("list")  # remembers the good record's id
    from gitlease.state.verified_records import load

    gd = store_path(repo)
    assert doc["oid"] in load(gd)
    raw = git(f"--git-dir={gd}", "cat-file", "blob", doc["oid"], cwd=repo).stdout
    # the same record with its note changed and its signature kept, under the cached id
    _replace_object(gd, doc["oid"], raw.replace("note -", 'note "tampered"').encode())
    got = cli("show", "c/1", "--json")
    assert got.code == 7 and got.json["error"]["claim"]["state"] == "invalid", got
    listed = cli("list", "--json").json["claims"]
    assert [c["state"] for c in listed] == ["invalid"], listed


@pytest.mark.parametrize("foreign", ["group-writable", "bad header", "a symbolic link"])
def test_a_foreign_cache_is_ignored(cli, repo: Path, tmp_path: Path, foreign: str) -> None:
    cli("acquire", "c/1", "--ttl", "5m", "--no-bind")
    bad = _tampered(repo)
    if foreign == "group-writable":
        _write_cache(repo, [bad], mode=0o620)
    elif foreign == "bad header":
        _write_cache(repo, [bad])
        _cache(repo).write_bytes(b"something else\n" + f"{bad}\n".encode())
    else:
        target = tmp_path / "elsewhere"
        _write_cache(repo, [bad])
        _cache(repo).rename(target)
        _cache(repo).symlink_to(target)
    listed = cli("list", "--json").json["claims"]
    assert [c["state"] for c in listed] == ["invalid"], (foreign, listed)
    assert cli("show", "c/1").code == 7


def test_decisions_never_use_the_cache(cli, repo: Path) -> None:
    """Even a cache of this user's own that names a broken record (only this user can write
    it) makes no decision take it: acquire, verify and the holder's own commands check."""
    doc = cli("acquire", "c/1", "--ttl", "1s", "--no-bind", "--json").json
    bad = _tampered(repo)
    _write_cache(repo, [bad, doc["oid"]])
    assert cli("list", "--json").json["claims"][0]["state"] != "invalid", (
        "the reads believe their own cache: what this user's cache says, they show"
    )
    time.sleep(1.2)
    taken = cli("acquire", "c/1", "--json")
    assert taken.code == 7 and "corrupt" in taken.json["error"]["message"], taken
    assert cli("heartbeat", "c/1").code == 4
    report = cli("verify", "--json")
    assert report.code != 0 and "invalid-record" in report.out, report


# ------------------------------------------------------------------ receipts: layout and O(1)


def _to_flat_layout(repo: Path, receipt: Path, bundle: bool = False) -> Path:
    """Move a receipt to where the previous layout wrote it, as it wrote it (no object ids,
    no index, no layout marker), and point the bindings at it."""
    root = repo / ".git" / "worklease" / "receipts"
    doc = json.loads(receipt.read_text())
    for claim in doc["claims"]:
        claim.pop("oid", None)
    name = f"bundle-{receipt.stem}.json" if bundle else f"{receipt.parent.name}-{receipt.name}"
    flat = root / name
    flat.write_text(json.dumps(doc, indent=2) + "\n")
    flat.chmod(0o600)
    receipt.unlink()
    for entry in [*(root / "held").iterdir(), *root.glob("*/*.bundle")]:
        entry.unlink()
    (root / "layout").unlink()
    bindings = repo / ".git" / "worklease" / "bindings"
    for binding in bindings.glob("*.json") if bindings.exists() else []:
        old = json.loads(binding.read_text())
        old.pop("oid", None)
        old["receipt"] = str(flat)
        binding.write_text(json.dumps(old))
    return flat


def test_receipts_of_the_previous_layout_still_prove_their_claims(cli, repo: Path) -> None:
    doc = cli("acquire", R, "--ttl", "5m", "--json").json
    flat = _to_flat_layout(repo, receipt_of(doc))
    assert cli("check", R).code == 0, "found by name: the claim id now at the ref"
    assert probe(repo, "hook")["problems"] == [], "the binding names it"
    assert cli("heartbeat").code == 0, "found without a name: indexed once, on first use"
    assert cli("release").code == 0
    assert json.loads(flat.read_text())["token"] is None
    assert cli("release").code == 0, "a retried release finds the spent one"


def test_bundle_receipts_of_the_previous_layout_still_work(cli, repo: Path) -> None:
    doc = cli("bundle", "acquire", "b/1", "b/2", "--ttl", "5m", "--json").json
    _to_flat_layout(repo, receipt_of(doc), bundle=True)
    assert cli("heartbeat", "b/1").code == 0, "a member by name"
    assert cli("bundle", "check", doc["bundle_id"]).code == 0, "the bundle by id"
    assert cli("bundle", "release").code == 0, "the bundle without an id"


@NEEDS_SHIM
def test_spent_receipts_of_both_layouts_go_a_day_later(cli, repo: Path) -> None:
    old = cli("acquire", "old/1", "--ttl", "5m", "--json").json
    flat = _to_flat_layout(repo, receipt_of(old))
    assert cli("release", "old/1").code == 0
    new = cli("acquire", "new/1", "--ttl", "5m", "--json").json
    assert cli("release", "new/1").code == 0
    assert cli("acquire", "next/1", "--ttl", "5m").code == 0
    assert flat.exists() and receipt_of(new).exists(), "a day is not over"
    later = wall_clock_moved(2 * 86_400)
    assert cli("acquire", "next/2", "--ttl", "5m", env=later).code == 0
    assert not flat.exists() and not receipt_of(new).exists()
    assert not receipt_of(new).parent.exists(), "and the resource's directory with it"


def _spent_receipts(repo: Path, count: int, hour: int) -> None:
    """``count`` released receipts of this layout, indexed as spent in ``hour``, written
    directly (acquiring them would take minutes); their files dated then."""
    from gitlease.receipts.receipt import resource_key

    root = repo / ".git" / "worklease" / "receipts"
    bucket = root / "spent" / str(hour)
    bucket.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = str(store_path(repo))
    when = hour * 3600 + 60
    for i in range(count):
        ref = f"refs/worklease/backlog/{hour}-{i}.lease"
        key, claim_id = resource_key(ref), f"c-{hour:08x}{i:08x}"
        doc = {
            "version": 1,
            "store": store,
            "bundle_id": None,
            "claims": [
                {"resource": f"backlog/{hour}-{i}", "ref": ref, "claim_id": claim_id,
                 "revision": 1, "oid": None}
            ],
            "token": None,
        }  # fmt: skip
        (root / key).mkdir(mode=0o700)
        path = root / key / f"{claim_id}.json"
        path.write_text(json.dumps(doc))
        path.chmod(0o600)
        os.utime(path, (when, when))
        (bucket / f"{key}-{claim_id}").touch()


_COUNTER = """
import json, os, sys, builtins
root = sys.argv[1]
seen = {"calls": 0, "entries": 0}
def counted(fn):
    def call(path, *a, **k):
        if not isinstance(path, int) and os.fspath(path).startswith(root):
            seen["calls"] += 1
        return fn(path, *a, **k)
    return call
for name in ("stat", "lstat", "open", "listdir", "mkdir", "rmdir", "unlink", "rename"):
    setattr(os, name, counted(getattr(os, name)))
real_scandir = os.scandir
class Counted:
    def __init__(self, path):
        self.it = real_scandir(path)
        self.mine = os.fspath(path).startswith(root)
        if self.mine:
            seen["calls"] += 1
    def __iter__(self):
        for entry in self.it:
            if self.mine:
                seen["entries"] += 1
            yield entry
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.it.close()
os.scandir = Counted
import gitlease
from gitlease.store.location import open_store
gitlease.acquire(open_store(), sys.argv[2], ttl="5m")
sys.stderr.write("COUNT " + json.dumps(seen) + "\\n")
"""


def _count(repo: Path, resource: str) -> dict:
    root = str(repo / ".git" / "worklease" / "receipts")
    proc = subprocess.run(
        [sys.executable, "-c", _COUNTER, root, resource], cwd=repo, capture_output=True, text=True
    )
    line = next((x for x in proc.stderr.splitlines() if x.startswith("COUNT ")), None)
    assert line is not None, proc.stderr
    return json.loads(line[len("COUNT ") :])


def test_an_acquire_touches_the_same_few_files_however_long_the_backlog(
    cli, tmp_path: Path
) -> None:
    now_hour = int(time.time() // 3600)
    counts = []
    for n, spent in enumerate((100, 3000)):
        repo = make_repo(tmp_path / f"r{n}")
        assert run_cli("acquire", "warm/1", "--ttl", "5m", cwd=repo).code == 0
        _spent_receipts(repo, spent, now_hour)  # a day's work: none old enough yet
        _spent_receipts(repo, spent, now_hour - 30)  # yesterday's: all old enough
        counts.append(_count(repo, "next/1"))
        counts.append(_count(repo, "next/2"))
    small, small2, big, big2 = counts
    assert big == small and big2 == small2, counts
    assert big["entries"] <= 40 and big["calls"] <= 120, counts
    root = tmp_path / "r1" / ".git" / "worklease" / "receipts"
    left = len(list((root / "spent" / str(now_hour - 30)).iterdir()))
    assert left == 3000 - 16, "each acquire tidied a few of yesterday's (8), no more"


# ------------------------------------------------------------------ the fast writers


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text() | st.integers() | st.booleans() | st.none(), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(_JSON)
@settings(max_examples=300, deadline=None)
def test_json_documents_are_laid_out_as_json_lays_them_out(doc) -> None:
    import re
    import unicodedata

    from gitlease.cli.output import json_text

    def escape(m: re.Match[str]) -> str:
        ch = m.group()
        code = ord(ch)
        invisible = unicodedata.category(ch) in ("Cf", "Zl", "Zp")
        if code <= 0x9F or 0xD800 <= code <= 0xDFFF or invisible:
            return json.dumps(ch)[1:-1]  # json's own \\u escape (a surrogate pair if astral)
        return ch

    # DEL, C1 controls, lone surrogates and invisible characters escaped; all else as json
    # writes it with ensure_ascii=False
    want = json.dumps(doc, indent=2, ensure_ascii=False)
    assert json_text(doc) == re.sub(r"[\x7f-\U0010ffff]", escape, want)


@given(
    st.lists(st.tuples(st.text(), st.text(), st.text(), st.integers(0, 2**63 - 1)), min_size=1),
    st.text(),
    st.none() | st.text(),
    st.none() | st.text(),
)
@settings(max_examples=200, deadline=None)
def test_receipts_are_written_as_json_writes_them(claims, store, token, bundle_id) -> None:
    from gitlease.receipts.receipt import ClaimRef, Receipt, parse

    refs = tuple(ClaimRef(*c) for c in claims)
    rec = Receipt(Path("/r.json"), store, token, refs, bundle_id)
    doc = {
        "version": 1,
        "store": store,
        "bundle_id": bundle_id,
        "claims": [
            {"resource": c.resource, "ref": c.ref, "claim_id": c.claim_id, "revision": c.revision}
            for c in refs
        ],
        "token": token,
    }
    assert rec.to_json() == json.dumps(doc, indent=2) + "\n"
    assert parse(Path("/r.json"), rec.to_json().encode()) == rec
