"""The listings: the board's, kept between looks (:class:`gitlease.api.reads.Listing`), and
``list --json``, streamed a batch at a time (docs/performance.md, 5b and 13).

The board's listing reads again only the records whose object id changed; every look times
every claim against the clock of that look; what it returns is what ``list`` returns for the
same refs. ``list --json`` holds a batch of records at a time and writes, byte for byte, the
document that sorting every claim would give.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import store_git

from gitlease._util import testing
from gitlease.api.reads import Listing, iter_claims, list_claims
from gitlease.board import timelines as board_timelines
from gitlease.board.data import Board
from gitlease.cli import jsonout
from gitlease.gitio.objects import LooseObjects
from gitlease.model import clock
from gitlease.model.claim import (
    Claim,
    is_expired,
    judge,
    remaining_ms,
    timed_many,
    verdict,
)
from gitlease.model.clock import Now, rfc3339
from gitlease.model.record import (
    GUARDED,
    HELD,
    RELEASED,
    Record,
    SigningKey,
    new_claim_id,
    new_token,
)
from gitlease.model.refname import encode

TTL_MS = 3_600_000
#: Names whose refs sort otherwise than the resources themselves (``a.lease`` after
#: ``a-b.lease``; upper case escaped; a long name in the compact form), and a few hundred
#: plain ones.
ODD = ["a", "a-b", "a/b", "A", "0", "Zz", "é", "a.b", "x" * 300, "b_1", "b-1", "b/1"]


def _record(resource: str, key: SigningKey, now: Now, **changes: Any) -> Record:
    stamp = rfc3339(now.wall_ms)
    fields: dict[str, Any] = dict(
        resource=resource, state=HELD, claim_id=new_claim_id(), owner="tester", revision=1,
        bundle_id=None, mode=GUARDED, acquired_at=stamp, renewed_at=stamp, released_at=None,
        expires_at=rfc3339(now.wall_ms + TTL_MS), renew_by=rfc3339(now.wall_ms + TTL_MS // 2),
        ttl_ms=TTL_MS, boot_id=now.boot, boot_expires_ms=now.boot_ms + TTL_MS, note=None,
        checkpoint=None, public_key=key.public_hex, previous=None,
    )  # fmt: skip
    fields.update(changes)
    return Record(**fields).signed(key)


def _blob(git_dir: Path, data: bytes) -> str:
    made = subprocess.run(
        ["git", "--git-dir", str(git_dir), "hash-object", "-w", "--stdin"],
        input=data,
        capture_output=True,
        check=True,
    )
    return made.stdout.decode().strip()


def _set_refs(git_dir: Path, refs: dict[str, str | None]) -> None:
    lines = "".join(
        f"update {ref} {oid}\n" if oid else f"delete {ref}\n" for ref, oid in refs.items()
    )
    subprocess.run(
        ["git", "--git-dir", str(git_dir), "update-ref", "--stdin"],
        input=lines.encode(),
        check=True,
    )


def _write(git_dir: Path, records: list[Record]) -> dict[str, str]:
    """The records written at their resources' refs (one ``update-ref`` for all): ref -> id."""
    oids = {encode(r.resource): _blob(git_dir, r.raw or b"") for r in records}
    _set_refs(git_dir, dict(oids))
    return oids


@pytest.fixture
def key() -> SigningKey:
    return SigningKey(new_token())


@pytest.fixture
def claims_store(store: Any, key: SigningKey) -> Any:
    """The library's store with a dozen active claims on resources in odd orders."""
    now = Now.read()
    _write(store.git_dir, [_record(r, key, now) for r in [*ODD, "plain/1", "plain/2"]])
    return store


def _docs(claims: list[Claim]) -> list[dict[str, Any]]:
    """The claims' documents without the one field that moves between two readings."""
    out = []
    for claim in claims:
        doc = claim.to_dict()
        doc.pop("expires_in")
        out.append(doc)
    return out


@pytest.fixture
def moved_clock() -> Iterator[Callable[[int], None]]:
    """Moves this process's boot clock forward (the tests' clock switch, in process)."""
    names = (testing.GATE, "GITLEASE_TESTING_BOOT_OFFSET_MS")
    saved = {name: os.environ.get(name) for name in names}

    def move(ms: int) -> None:
        os.environ[testing.GATE] = testing.GATE_VALUE
        os.environ["GITLEASE_TESTING_BOOT_OFFSET_MS"] = str(ms)
        clock.load_test_switches()

    try:
        yield move
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        clock.load_test_switches()


# ------------------------------------------------------------------ the board's listing


def test_a_look_reads_only_the_record_that_changed(claims_store: Any, key: SigningKey) -> None:
    listing = Listing(claims_store)
    first = listing.claims()
    assert listing.records_read == len(first) == len(ODD) + 2
    assert _docs(listing.claims()) == _docs(first) and listing.records_read == 0  # no change
    renewed = _record("plain/1", key, Now.read(), revision=2, note="renewed")
    _write(claims_store.git_dir, [renewed])
    after = listing.claims()
    assert listing.records_read == 1
    by = {c.resource: c for c in after}
    assert by["plain/1"].record is not None and by["plain/1"].record.note == "renewed"
    assert _docs(after) == _docs(list_claims(claims_store, refresh=False))


def test_an_unchanged_record_is_not_read_again(claims_store: Any) -> None:
    """Seen from the store: the object of an unchanged ref, damaged in place, is not read
    by the next look (its id names the same record); a read from scratch finds it invalid,
    as ``list`` and ``verify`` do."""
    listing = Listing(claims_store)
    before = {c.resource: c for c in listing.claims()}
    oid = before["plain/2"].oid
    assert oid is not None
    path = claims_store.git_dir / "objects" / oid[:2] / oid[2:]
    os.chmod(path, 0o644)
    path.write_bytes(zlib.compress(b"blob 5\0hello"))  # (another object's bytes, in place)
    kept = {c.resource: c for c in listing.claims()}
    assert listing.records_read == 0
    assert kept["plain/2"].state == "active" and kept["plain/2"].record == before["plain/2"].record
    fresh = {c.resource: c for c in Listing(claims_store).claims()}
    assert fresh["plain/2"].state == "invalid"
    assert {c.resource: c.state for c in list_claims(claims_store)}["plain/2"] == "invalid"


def test_a_kept_active_claim_shows_expired_once_its_time_is_up(
    claims_store: Any, moved_clock: Callable[[int], None]
) -> None:
    listing = Listing(claims_store)
    assert {c.state for c in listing.claims()} == {"active"}
    moved_clock(TTL_MS + 60_000)  # no write: only time passes
    later = listing.claims()
    assert listing.records_read == 0
    assert {c.state for c in later} == {"expired"}
    assert all(c.expires_in_ms is not None and c.expires_in_ms < 0 for c in later)
    assert _docs(later) == _docs(list_claims(claims_store, refresh=False))


def test_a_deleted_ref_disappears(claims_store: Any) -> None:
    listing = Listing(claims_store)
    assert "a-b" in {c.resource for c in listing.claims()}
    _set_refs(claims_store.git_dir, {encode("a-b"): None})
    after = listing.claims()
    assert "a-b" not in {c.resource for c in after}
    assert _docs(after) == _docs(list_claims(claims_store, refresh=False))


def test_a_forged_record_appearing_later_is_invalid_as_list_says(
    claims_store: Any, key: SigningKey
) -> None:
    listing = Listing(claims_store)
    listing.claims()
    honest = _record("plain/2", key, Now.read(), revision=2)
    forged = (honest.raw or b"").replace(b'owner "tester"', b'owner "mallory"')
    assert forged != honest.raw
    oid = _blob(claims_store.git_dir, forged)
    other = _blob(claims_store.git_dir, _record("other", key, Now.read()).raw or b"")
    _set_refs(claims_store.git_dir, {encode("plain/2"): oid, encode("new/one"): other})
    after = {c.resource: c for c in listing.claims()}
    assert listing.records_read == 2
    assert after["plain/2"].state == "invalid" and after["plain/2"].record is None
    assert after["new/one"].state == "invalid"  # (it names another resource)
    listed = {c.resource: c for c in list_claims(claims_store, refresh=False)}
    assert after["plain/2"].problem == listed["plain/2"].problem
    assert after["new/one"].problem == listed["new/one"].problem


def test_a_ref_that_is_not_a_record_is_listed_as_list_lists_it(claims_store: Any) -> None:
    """A ref at a tree, a symbolic ref, a ref at a missing object: the same claims either way
    (the listings read records themselves, git names the refs)."""
    git_dir = claims_store.git_dir
    listing = Listing(claims_store)
    listing.claims()
    tree = (
        subprocess.run(
            ["git", "--git-dir", str(git_dir), "mktree"], input=b"", capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )
    _set_refs(git_dir, {encode("tree/1"): tree})
    (git_dir / encode("sym/1")).parent.mkdir(parents=True, exist_ok=True)
    (git_dir / encode("sym/1")).write_text(f"ref: {encode('plain/1')}\n")
    missing = "1" * 40
    (git_dir / encode("gone/1")).parent.mkdir(parents=True, exist_ok=True)
    (git_dir / encode("gone/1")).write_text(missing + "\n")
    after = {c.resource: c for c in listing.claims()}
    listed = {c.resource: c for c in list_claims(claims_store, refresh=False)}
    for resource in ("tree/1", "sym/1", "gone/1"):
        assert after[resource].state == listed[resource].state == "invalid", resource
        assert after[resource].problem == listed[resource].problem, resource
    assert _docs(list(after.values())) == _docs(list(listed.values()))


def test_a_packed_store_lists_the_same(claims_store: Any) -> None:
    """Objects in a pack are not loose: git reads them (one ``cat-file`` process)."""
    loose = _docs(list_claims(claims_store, refresh=False))
    store_git("gc", "-q", "--prune=now", cwd=Path.cwd())
    oid = list_claims(claims_store, refresh=False)[0].oid
    with LooseObjects(claims_store.git_dir / "objects") as objects:
        assert oid is not None and objects.read(oid) is None
    assert _docs(list_claims(claims_store, refresh=False)) == loose
    assert _docs(Listing(claims_store).claims()) == loose


def test_loose_objects_read_as_git_reads_them(claims_store: Any) -> None:
    git_dir = claims_store.git_dir
    with LooseObjects(git_dir / "objects") as objects:
        for claim in list_claims(claims_store, refresh=False):
            assert claim.oid is not None
            shown = subprocess.run(
                ["git", "--git-dir", str(git_dir), "cat-file", "blob", claim.oid],
                capture_output=True,
                check=True,
            ).stdout
            assert objects.read(claim.oid) == ("blob", shown)
        oid = _blob(git_dir, b"x")
        path = git_dir / "objects" / oid[:2] / oid[2:]
        os.chmod(path, 0o644)
        whole = path.read_bytes()
        for damaged in (whole[:-3], whole + b"more", zlib.compress(b"blob 9\0x"), b"junk"):
            path.write_bytes(damaged)
            assert objects.read(oid) is None, damaged  # (left to git, which says what is wrong)
        assert objects.read("not an id") is None


# ------------------------------------------------------------------ the board


def test_the_board_shows_what_list_shows_after_each_change(
    claims_store: Any, key: SigningKey, moved_clock: Callable[[int], None]
) -> None:
    board = Board(claims_store)
    doc, _age = board.page_doc()
    body, _etag = board.page()
    assert json.loads(body) == json.loads(json.dumps(doc))  # (the text is the document)
    _write(claims_store.git_dir, [_record("plain/1", key, Now.read(), revision=2)])
    _set_refs(claims_store.git_dir, {encode("a"): None})
    changed, _age = board.page_doc()  # (the refs' files changed: built again)
    assert board.listing.records_read == 1
    listed = [c.to_dict() for c in list_claims(claims_store, refresh=False)]
    shown = [dict(c) for c in changed["claims"]]
    for got in (shown, listed):
        for c in got:
            c.pop("expires_in")
    assert shown == listed
    assert "a" not in {c["resource"] for c in shown}
    assert json.loads(board.page()[0])["claims"][0]["resource"] == listed[0]["resource"]
    moved_clock(TTL_MS + 1000)
    # (the page's cache ends on the monotonic clock, which the switch does not move: what
    # the next build makes is looked at directly)
    later = board._build(("test", 2))
    assert {c["state"] for c in later.doc["claims"]} == {"expired"}
    assert later.doc["summary"]["expired"] == len(listed)
    assert board.listing.records_read == 0


def test_a_new_board_over_much_history_fills_its_timelines_over_the_next_builds(
    store: Any, key: SigningKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = Now.read()
    heads = []
    for i in range(4):
        previous = None
        for revision in (1, 2, 3):
            record = _record(f"h/{i}", key, now, revision=revision, previous=previous)
            if revision < 3:
                previous = _blob(store.git_dir, record.raw or b"")
        heads.append(record)
    _write(store.git_dir, heads)
    whole = Board(store).page_doc()[0]["timelines"]  # (4 resources, 8 older records: at once)
    assert all(len(line["events"]) == 3 for line in whole.values())
    monkeypatch.setattr(board_timelines, "HISTORY_PER_BUILD", 2)
    board = Board(store)
    first = board.page_doc()[0]
    assert board.history_pending
    assert all(len(line["events"]) == 1 for line in first["timelines"].values())
    assert [c["resource"] for c in first["claims"]] == [f"h/{i}" for i in range(4)]
    builds = 1
    while board.history_pending:
        board.page_doc()  # (a build that left history unread is built again at the next poll)
        builds += 1
    assert builds == 3  # one level of history a build: the heads, then two levels
    assert board.page_doc()[0]["timelines"] == whole


def test_list_watch_reads_no_history(store: Any, key: SigningKey) -> None:
    now = Now.read()
    old = _blob(store.git_dir, _record("w/1", key, now).raw or b"")
    _write(store.git_dir, [_record("w/1", key, now, revision=2, previous=old)])
    board = Board(store, timelines=False)
    doc, _age = board.page_doc()
    assert doc["timelines"] == {} and not board.history_pending
    assert [c["revision"] for c in doc["claims"]] == [2]


# ------------------------------------------------------------------ list --json, streamed


@pytest.fixture
def big_store(store: Any, key: SigningKey) -> Any:
    """A few hundred claims, some released, some of another boot (expired), in odd orders."""
    now = Now.read()
    records = [_record(r, key, now) for r in ODD]
    records += [_record(f"shop/{i}", key, now) for i in range(300)]
    records += [_record(f"Shop-{i}", key, now, state=RELEASED, released_at=rfc3339(now.wall_ms))
                for i in range(20)]  # fmt: skip
    records += [_record(f"old/{i}", key, now, boot_id="another-boot") for i in range(20)]
    _write(store.git_dir, records)
    elsewhere = _blob(store.git_dir, _record("elsewhere", key, now).raw or b"")
    _set_refs(store.git_dir, {encode("wrong/1"): elsewhere})  # (names another resource)
    return store


def test_list_json_is_the_sorted_document_whatever_the_batches(
    big_store: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = list_claims(big_store, refresh=False)
    assert [c.resource for c in whole] == sorted(c.resource for c in whole)
    batches = list(iter_claims(big_store, refresh=False, batch=7))
    assert len(batches) > 40
    streamed = [c for batch in batches for c in batch]
    assert [c.resource for c in streamed] != [c.resource for c in whole]  # (ref order)
    assert sorted(_docs(streamed), key=lambda d: d["resource"]) == _docs(whole)
    docs = [c.to_dict() for c in whole]
    jsonout.print_json({"claims": docs})
    expected = capsys.readouterr().out
    for batch in (1, 7, 1000):
        parts = [docs[i : i + batch] for i in range(0, len(docs), batch)]
        jsonout.print_sorted_claims_json(reversed(parts), "resource")  # (any order in)
        assert capsys.readouterr().out == expected


def test_list_json_through_a_real_file_is_byte_for_byte(tmp_path: Path) -> None:
    docs = [{"resource": r, "note": f"n\x7f\u0085{r}", "n": None} for r in reversed(ODD)]
    out = tmp_path / "out.json"
    saved = sys.stdout
    try:
        for case in (docs, [], docs[:1]):
            with open(out, "w", encoding="utf-8") as sys.stdout:
                jsonout.print_sorted_claims_json(iter([case]), "resource")
            got = out.read_text(encoding="utf-8")
            sys.stdout = io.StringIO()
            jsonout.print_json({"claims": sorted(case, key=lambda d: d["resource"])})
            assert got == sys.stdout.getvalue()
    finally:
        sys.stdout = saved


def test_list_json_of_a_few_hundred_claims_is_the_listed_document(
    big_store: Any, cli: Callable[..., Any]
) -> None:
    got = cli("list", "--json")
    assert got.code == 0, got
    doc = json.loads(got.out)
    assert set(doc) == {"claims"}
    listed = _docs(list_claims(big_store, refresh=False))
    for claim in doc["claims"]:
        claim.pop("expires_in")
    assert doc["claims"] == listed
    states = {c["state"] for c in listed}
    assert states == {"active", "released", "expired", "invalid"}


# ------------------------------------------------------------------ timing, in one reading


def test_timing_in_one_reading_is_remaining_ms_and_is_expired(key: SigningKey) -> None:
    now = Now.read()
    other_clock = f"{now.boot}~boottime+3600000ms"
    records = [
        _record("t", key, now),
        _record("t", key, now, boot_expires_ms=now.boot_ms - 5),  # expired here
        _record("t", key, now, boot_id="another-boot"),
        _record("t", key, now, boot_id="another-boot", expires_at=rfc3339(now.wall_ms - 9)),
        _record("t", key, now, boot_id=other_clock, boot_expires_ms=now.boot_ms + 3_700_000),
        _record("t", key, now, boot_id=f"{now.boot}~boottimeXms"),  # (cannot be translated)
        _record("t", key, now, state=RELEASED, released_at=rfc3339(now.wall_ms)),
    ]
    from gitlease.gitio.gitread import Snapshot

    for first_seen in (None, now.boot_ms - TTL_MS - 10**6, now.boot_ms):
        for record in records:
            snap = Snapshot(encode("t"), "0" * 40, record.raw, None, first_seen)
            (one,) = timed_many([(snap, verdict(snap, "t", (snap.oid,)))], now)
            assert one == judge(snap, now, "t", (snap.oid,))
            if record.state == RELEASED:
                assert one.state == "released" and one.expires_in_ms is None
                continue
            assert one.expires_in_ms == remaining_ms(record, now, first_seen)
            assert (one.state == "expired") == is_expired(record, now, first_seen)


def test_a_record_on_a_clock_that_cannot_be_translated_is_timed_from_its_sighting(
    store: Any, key: SigningKey
) -> None:
    """As ``read_all`` stamps it (the sightings file): the listings decide from the verified
    record's fields which records want a first sighting, and stamp the same ones."""
    from gitlease.gitio import layout
    from gitlease.model.sightings import Sightings

    now = Now.read()
    odd = _record("odd/1", key, now, boot_id=f"{now.boot}~boottimeXms", ttl_ms=TTL_MS)
    _write(store.git_dir, [odd, _record("plain/1", key, now)])
    store.read_all()  # (its first sighting, now; then made half a TTL old)
    path = layout.sightings(store.git_dir)
    ref, oid, boot, _ms = path.read_text().split()
    path.write_text(f"{ref} {oid} {boot} {now.boot_ms - TTL_MS // 2}\n")
    stamped = {s.ref: s for s in store.read_all()}  # (what every other read judges from)
    assert stamped[encode("odd/1")].first_seen_ms == now.boot_ms - TTL_MS // 2
    assert stamped[encode("plain/1")].first_seen_ms is None
    for claims in (list_claims(store, refresh=False), Listing(store).claims()):
        by = {c.resource: c for c in claims}
        reference = judge(stamped[encode("odd/1")], Now.read(), "odd/1")
        assert by["odd/1"].state == reference.state == "active"
        assert by["odd/1"].expires_in_ms is not None and reference.expires_in_ms is not None
        assert abs(by["odd/1"].expires_in_ms - reference.expires_in_ms) < 60_000
        assert by["odd/1"].expires_in_ms < TTL_MS * 0.6  # (timed from the sighting)
    known = Sightings(layout.sightings(store.git_dir))._load()
    assert list(known) == [encode("odd/1")]
