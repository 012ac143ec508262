"""The engine's one compare-and-swap (``claims/engine.py``'s ``write_signed``), unit-tested
over a store kept in memory (tests/support/memstore.py), which keeps the contract of every
store: each ref compared under the lock with what the caller read, all land or none.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memstore import MemoryStore

from gitlease.claims.engine import write_signed
from gitlease.errors import CompareAndSwapFailed, StoreError
from gitlease.gitio.gitread import Snapshot
from gitlease.model.clock import Now, rfc3339
from gitlease.model.record import GUARDED, HELD, Record, SigningKey, new_claim_id, new_token
from gitlease.model.refname import SCOPES_INDEX_REF, encode
from gitlease.store.base import Location, Store


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(Location(tmp_path, "in memory (a test)", None, None))


def _signed(resource: str, previous: str | None, now: Now, revision: int = 1) -> Record:
    key = SigningKey(new_token())
    ttl = 600_000
    stamp = rfc3339(now.wall_ms)
    return Record(
        resource=resource,
        state=HELD,
        claim_id=new_claim_id(),
        owner="test",
        revision=revision,
        bundle_id=None,
        mode=GUARDED,
        acquired_at=stamp,
        renewed_at=stamp,
        released_at=None,
        expires_at=rfc3339(now.wall_ms + ttl),
        renew_by=rfc3339(now.wall_ms + ttl // 2),
        ttl_ms=ttl,
        boot_id=now.boot,
        boot_expires_ms=now.boot_ms + ttl,
        note=None,
        checkpoint=None,
        public_key=key.public_hex,
        previous=previous,
    ).signed(key)


def test_the_memory_store_is_a_store() -> None:
    """It derives from the abstract store, every abstract method implemented (else it could
    not be made: the fixture would fail)."""
    assert issubclass(MemoryStore, Store)
    assert not getattr(MemoryStore, "__abstractmethods__", None)


def test_a_write_over_what_was_read_lands_and_is_judged_from_what_landed(store) -> None:
    now = Now.read()
    ref = encode("mem/1")
    snap = store.read(ref)
    record = _signed("mem/1", None, now)
    [claim] = write_signed(store, [(snap, record)], "test acquire", now)
    assert store.refs[ref] == claim.oid
    assert store.read(ref).data == record.raw
    assert claim.state == "active" and claim.resource == "mem/1"
    assert store.durable_writes == 0, "not durable unless asked"


def test_a_compare_and_swap_against_a_moved_ref_fails_and_nothing_lands(store) -> None:
    now = Now.read()
    first, second = encode("mem/a"), encode("mem/b")
    snaps = [store.read(first), store.read(second)]
    moved = store.put(second, b"another writer's bytes")  # after the read, before the write
    records = [_signed("mem/a", None, now), _signed("mem/b", None, now)]
    with pytest.raises(CompareAndSwapFailed, match="changed while it was being written"):
        write_signed(store, list(zip(snaps, records, strict=True)), "test", now)
    assert first not in store.refs, "all or none: the ref that had not moved stays absent"
    assert store.refs[second] == moved
    assert store.writes == []


def test_riders_land_with_the_records_in_one_write(store) -> None:
    now = Now.read()
    ref = encode("mem/ride")
    index = store.put(SCOPES_INDEX_REF, b"index 1\n")
    rider = (SCOPES_INDEX_REF, index, b"index 2\n")
    [claim] = write_signed(
        store, [(store.read(ref), _signed("mem/ride", None, now))], "t", now, riders=[rider]
    )
    assert store.writes == [[(ref, None, claim.record.raw), rider]], "one write carried both"
    assert store.read(SCOPES_INDEX_REF).data == b"index 2\n"
    assert claim.oid == store.refs[ref], "the claims returned are the records', not the rider's"


def test_a_stale_rider_keeps_the_record_from_landing(store) -> None:
    now = Now.read()
    ref = encode("mem/stale")
    old = store.put(SCOPES_INDEX_REF, b"index 1\n")
    store.put(SCOPES_INDEX_REF, b"index 2, written meanwhile\n")
    with pytest.raises(CompareAndSwapFailed):
        write_signed(
            store,
            [(store.read(ref), _signed("mem/stale", None, now))],
            "t",
            now,
            riders=[(SCOPES_INDEX_REF, old, b"index 3\n")],
        )
    assert ref not in store.refs
    assert store.read(SCOPES_INDEX_REF).data == b"index 2, written meanwhile\n"


def test_a_durable_write_is_made_inside_the_stores_durable_block(store) -> None:
    now = Now.read()
    write_signed(
        store, [(store.read(encode("mem/d")), _signed("mem/d", None, now))], "t", now, durable=True
    )
    assert store.durable_writes == 1


def test_a_failed_write_is_settled_from_the_store_when_its_outcome_can_be_read(store) -> None:
    now = Now.read()
    ref = encode("mem/settle")
    record = _signed("mem/settle", None, now)
    landed = store.put(ref, record.raw or b"")  # what the settle finds there
    store.raise_store_error("the write's answer was lost")
    seen: list[BaseException] = []

    def settle(error: BaseException) -> list[str]:
        seen.append(error)
        return [store.refs[ref]]

    [claim] = write_signed(store, [(Snapshot(ref, None, None), record)], "t", now, settle=settle)
    assert [type(e) for e in seen] == [StoreError]
    assert claim.oid == landed


def test_a_failed_write_whose_outcome_cannot_be_read_is_never_settled(store) -> None:
    now = Now.read()
    store.readable = False
    store.raise_store_error("interrupted")

    def settle(error: BaseException) -> list[str]:
        raise AssertionError("settled from a store that cannot tell")

    snap = store.read(encode("mem/unread"))
    with pytest.raises(StoreError, match="interrupted"):
        write_signed(store, [(snap, _signed("mem/unread", None, now))], "t", now, settle=settle)


def test_a_write_over_a_record_continues_its_chain(store) -> None:
    now = Now.read()
    ref = encode("mem/chain")
    [first] = write_signed(store, [(store.read(ref), _signed("mem/chain", None, now))], "t", now)
    snap = store.read(ref)
    [second] = write_signed(store, [(snap, _signed("mem/chain", first.oid, now, 2))], "t", now)
    assert store.reflog_landed(ref, second.oid) == [first.oid, second.oid]
    with pytest.raises(CompareAndSwapFailed):  # the first read is stale now
        write_signed(store, [(snap, _signed("mem/chain", first.oid, now, 2))], "t", now)
