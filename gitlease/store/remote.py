"""A store whose coordinator is a git remote, for agents on several hosts (docs/remote.md).

A remote store *holds* a local store, its mirror (:class:`~gitlease.store.local.LocalStore`):
the record blobs this host writes, a copy of the remote's ``refs/worklease/*`` (what ``git
for-each-ref``, ``show`` and the commit hooks read), the guards, the receipts and the
sightings below. The remote decides ownership. Every write is one

    git push --atomic --porcelain REMOTE --force-with-lease=REF:EXPECTED BLOB:REF ...

and the server compares each ref with EXPECTED under its own ref locks before
it moves any of them (an empty EXPECTED: the ref must not exist), so that push
is the compare-and-swap (:mod:`gitlease.store.settle` decides what it did). Reads first
fetch ``refs/worklease/*`` into the mirror (:mod:`gitlease.store.link`).

Expiry cannot trust another host's clocks, so a record written by another host
(another boot id) is judged by *sightings*: this host remembers, on its own boot
clock, when it first saw each record, and counts the record as expired once it
has seen it unchanged for a whole TTL (see :func:`gitlease.model.claim.observed_lifetime_ms`).
The holder's TTL started before the record was visible to anyone, so the holder's
own clock always runs out first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress

from ..errors import CompareAndSwapFailed, GitleaseError, StoreError, UsageError
from ..gitio import layout
from ..gitio.gitread import Snapshot
from ..model.clock import Now
from ..model.refname import PREFIX
from ..model.sightings import Sightings
from .base import BlobRead, Location, Store, Update
from .link import NETWORK_TIMEOUT_SECONDS, Link, redact
from .local import LocalStore
from .settle import SETTLE_SECONDS, Push

__all__ = ["NETWORK_TIMEOUT_SECONDS", "PRUNE_REFUSED", "SETTLE_SECONDS", "RemoteStore", "redact"]

PRUNE_REFUSED = (
    "prune is not available with a remote store: the tombstones are what keep revisions "
    "increasing for every host"
)


class RemoteStore(Store):
    """The remote as the coordinator; a local store (:attr:`mirror`) as this host's copy of
    its refs and workspace."""

    remote: str
    #: Each look of a waiter first in line fetches: at most one every second.
    wait_poll_seconds = 1.0
    reads_are_current = False

    def __init__(
        self, location: Location, remote: str, reason: str, *, one_shot: bool = False
    ) -> None:
        super().__init__(location)
        self.remote = remote
        self.remote_reason = reason
        #: This host's copy of the remote's refs, and where this host's records are written
        #: (``one_shot``: :func:`gitlease.store.location.open_store`).
        self.mirror = LocalStore(location, one_shot=one_shot)
        access = location.config.access if location.config is not None else ()
        self.link = Link(self.git_dir, remote, access)
        self.shown = self.link.shown  # for messages
        self.sightings = Sightings(layout.sightings(self.git_dir))

    @contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Network calls made inside (fetch, push, settling) end by then, or count as
        unanswered: exec's heartbeat must not outlast the claim it renews."""
        with self.link.within(seconds):
            yield

    # ----------------------------------------------------------------- reads

    def refresh(self) -> None:
        """Fetch the remote's claims into the mirror (:meth:`gitlease.store.link.Link.fetch`)."""
        self.link.fetch()

    def read(self, ref: str) -> Snapshot:
        """The mirror's value of ``ref``, stamped with when this host first saw it."""
        return self.sightings.stamp([self.mirror.read(ref)], Now.read(), complete=False)[0]

    def read_here(self, ref: str) -> Snapshot:
        """The mirror's value of ``ref``, with no sighting (a ref that holds no claim)."""
        return self.mirror.read(ref)

    def read_many(self, refs: Sequence[str]) -> list[Snapshot]:
        """The mirror's values of ``refs``, stamped with first sightings."""
        return self.sightings.stamp(self.mirror.read_many(refs), Now.read(), complete=False)

    def read_all(self, prefix: str = PREFIX) -> list[Snapshot]:
        """Every mirrored ref under ``prefix``, stamped with first sightings (the whole
        listing at once: :meth:`iter_all` and :meth:`read_all_since` give it whole too)."""
        snaps = self.mirror.read_all(prefix)
        return self.sightings.stamp(snaps, Now.read(), complete=prefix == PREFIX)

    def read_blob(self, oid: str) -> tuple[bytes | None, str | None]:
        """A blob of the mirror (the records this host wrote or fetched)."""
        return self.mirror.read_blob(oid)

    def read_blobs(self, oids: Sequence[str]) -> dict[str, tuple[bytes | None, str | None]]:
        """Many blobs of the mirror (:meth:`gitlease.store.local.LocalStore.read_blobs`)."""
        return self.mirror.read_blobs(oids)

    @contextmanager
    def blob_reader(self) -> Iterator[BlobRead]:
        """The mirror's reader of many blobs in turn."""
        with self.mirror.blob_reader() as read:
            yield read

    # ---------------------------------------------------------------- writes

    def prepare_write(self) -> None:
        """The mirror opens its writer (the blobs are written there) and starts the daily
        retention pass if it is due."""
        self.mirror.writer  # noqa: B018 - the property opens it
        self.start_retention_if_due()

    @contextmanager
    def durable(self) -> Iterator[None]:
        """The records are written to the mirror durably before they are pushed."""
        with self.mirror.durable():
            yield

    def write_blob(self, data: bytes) -> str:
        """A record blob, written to the mirror (the push carries it)."""
        return self.mirror.write_blob(data)

    def compare_and_swap_many(self, updates: list[Update], message: str) -> list[str]:
        """One atomic push with a lease per ref: all land or none; then mirror them here."""
        planned = [(ref, expected, self.write_blob(data)) for ref, expected, data in updates]
        args = ["push", "--atomic", "--porcelain", "--no-verify", "--no-recurse-submodules"]
        args.append(self.remote)
        args += [f"--force-with-lease={ref}:{expected or ''}" for ref, expected, _ in planned]
        args += [f"{new}:{ref}" for ref, _, new in planned]
        Push(self.link, self.mirror, planned).run(args, self.claim_left(updates))
        self.follow(planned, message)
        return [new for _, _, new in planned]

    def remove_compare_and_swap(self, ref: str, expected_oid: str) -> None:
        """Never: deleting a ref here would delete only this host's mirror of it."""
        self.ensure_prunable()

    def follow(self, planned: list[tuple[str, str | None, str]], message: str) -> None:
        """Point the mirror at what the remote now holds, so the commit hooks see it at once:
        each ref that still shows the record the push replaced (a fetch in between may
        already have brought something newer, which is left alone).

        Best effort: the remote already holds the records, and the next fetch
        corrects the mirror; failing here must not report a landed write as failed.
        """
        with suppress(GitleaseError), self.link.mirror_lock():  # e.g. a young lock that stays
            self.mirror.writer.follow(planned, message)

    def claim_left(self, updates: list[Update]) -> float | None:
        """Seconds the live claims of this boot that these updates replace have left on
        this host's clock (the least of them), or None when none is replaced (an acquire
        of a free or expired resource): a heartbeat or release must not wait for the
        remote past the moment its claim ends."""
        from ..model.record import RELEASED, parse

        now = Now.read()
        lefts: list[int] = []
        for _ref, expected, _data in updates:
            if expected is None:
                continue
            data, _problem = self.read_blob(expected)
            if data is None:
                continue
            try:
                record = parse(data)
            except StoreError:
                continue
            if record.boot_id == now.boot and record.state != RELEASED:
                lefts.append(record.boot_expires_ms - now.boot_ms)
        if not lefts or min(lefts) <= 0:
            return None
        return min(lefts) / 1000

    # ------------------------------------------------------ what differs for callers

    def recheck_refusal(self) -> bool:
        """The mirror may be behind the remote: refuse only on a fresh look. (A write from
        a stale look is safe anyway: the push's lease refuses it.)"""
        self.refresh()
        return True

    def outcome_readable(self, error: BaseException) -> bool:
        """A refused push (or a store error) left the mirror as the remote has it; an
        interrupted one did not, and only settling with ``show`` can tell."""
        return isinstance(error, (CompareAndSwapFailed, StoreError))

    def begin_command(self) -> None:
        """A new command looks afresh: a refusal settled by an earlier command's fetch
        answers no read of this one (see :meth:`gitlease.store.link.Link.fetch`)."""
        self.link.fetched_after_refusal = None

    def child_env(self) -> dict[str, str]:
        """The command's own gitlease calls use the same coordinator."""
        return {"GITLEASE_REMOTE": self.remote}

    def ensure_prunable(self) -> None:
        """The tombstones are what keep revisions increasing for every host."""
        raise UsageError(PRUNE_REFUSED)

    def repair_refusal(self, *, parsed: bool) -> str | None:
        """An unparseable record's revision is unknown, and this host may not have seen
        every earlier one: a tombstone written from here could reuse a revision."""
        if parsed:
            return None
        return (
            "cannot be repaired through a remote (its revision is unknown, and this host may "
            "not have seen every earlier one): fix or delete the ref at the remote by hand"
        )

    # ------------------------------------------------------ the mirror's history

    def reflog_refs(self) -> list[str]:
        """The mirror's reflogs (what this host saw of each claim's history)."""
        return self.mirror.reflog_refs()

    def read_reflog(self, ref: str) -> bytes:
        """The mirror's reflog of ``ref``."""
        return self.mirror.read_reflog(ref)

    def reflog_landed(self, ref: str, current: str | None) -> list[str]:
        """What the mirror's reflog shows ``ref`` held."""
        return self.mirror.reflog_landed(ref, current)

    def history_start(self, ref: str) -> str | None:
        """Where the mirror's kept history of ``ref`` starts."""
        return self.mirror.history_start(ref)

    def rewrite_reflog(self, ref: str, change: Callable[[bytes], bytes | None]) -> bool:
        """The mirror's reflog of ``ref``, rewritten under its lock."""
        return self.mirror.rewrite_reflog(ref, change)

    def delete_reflog(self, ref: str) -> None:
        """The mirror's reflog of a ref gone from it."""
        self.mirror.delete_reflog(ref)

    def collect_garbage_trimmed(self, grace: str | None = None) -> None:
        """``git gc`` of the mirror."""
        self.mirror.collect_garbage_trimmed(grace)

    def start_retention_if_due(self) -> None:
        """About once a day, the retention pass of this host's copy (it knows the remote:
        :func:`gitlease.state.autoprune.start_if_due`)."""
        from ..state import autoprune

        autoprune.start_if_due(self.git_dir, self.remote)
