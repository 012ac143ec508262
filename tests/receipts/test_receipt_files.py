"""Receipt files: those of the previous layout still prove their claims, spent ones of both
layouts go a day later, an acquire touches the same few files however long the backlog
(counting, never timing), and the fast writer writes what ``json`` writes (docs/design.md,
receipts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import NEEDS_SHIM, make_repo, run_cli, store_path, wall_clock_moved
from hypothesis import given, settings
from hypothesis import strategies as st
from probes import probe, receipt_of

R = "github/acme/api/20"


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
