"""Sightings: when this host first saw each record of a remote store, on its own clock.

Expiry across hosts never trusts another host's clock: a record written by
another host counts as expired once this host has seen it unchanged for a whole
TTL (docs/remote.md). This module remembers the first sightings.
"""

from __future__ import annotations

from pathlib import Path

from .._util.files import atomic_write, flocked
from ..errors import StoreError
from ..gitio.gitread import Snapshot
from .clock import Now


class Sightings:
    """When this host first saw each record, on its own boot clock (``first_seen_ms``).

    One small text file per store (``ref oid boot first_seen_ms`` a line), changed
    under an ``flock`` and replaced atomically. Losing it only makes this host
    wait a whole TTL again before taking over another host's record.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def stamp(self, snaps: list[Snapshot], now: Now, *, complete: bool) -> list[Snapshot]:
        """The snapshots with ``first_seen_ms``; remember new sightings (and, when the list
        is ``complete``, forget refs that are gone)."""
        if not any(s.oid for s in snaps) and not complete:
            return snaps
        lock = self.path.with_name(self.path.name + ".lock")
        with flocked(lock, wait=None, busy=lambda: StoreError(f"{lock} stayed locked")):
            known = self._load()
            changed = False
            out = []
            for snap in snaps:
                if snap.oid is None:
                    changed |= known.pop(snap.ref, None) is not None
                    out.append(snap)
                    continue
                entry = known.get(snap.ref)
                if entry is None or entry[0] != snap.oid or entry[1] != now.boot:
                    entry = (snap.oid, now.boot, now.boot_ms)
                    known[snap.ref] = entry
                    changed = True
                out.append(snap.replace(first_seen_ms=entry[2]))
            if complete:
                present = {s.ref for s in snaps}
                for ref in [r for r in known if r not in present]:
                    del known[ref]
                    changed = True
            if changed:
                self._save(known)
        return out

    def forget(self, present: dict[str, str]) -> int:
        """Drop the sightings of refs that are gone or hold another record now (``present``:
        ref -> object id); how many. They serve nothing: a record seen again is timed anew."""
        if not self.path.exists():
            return 0
        lock = self.path.with_name(self.path.name + ".lock")
        with flocked(lock, wait=None, busy=lambda: StoreError(f"{lock} stayed locked")):
            known = self._load()
            stale = [ref for ref, (oid, _, _) in known.items() if present.get(ref) != oid]
            for ref in stale:
                del known[ref]
            if stale:
                self._save(known)
        return len(stale)

    def _load(self) -> dict[str, tuple[str, str, int]]:
        known = {}
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror}") from None
        for line in text.splitlines():
            parts = line.split(" ")
            if len(parts) == 4 and parts[3].lstrip("-").isdigit():
                known[parts[0]] = (parts[1], parts[2], int(parts[3]))
        return known

    def _save(self, known: dict[str, tuple[str, str, int]]) -> None:
        text = "".join(f"{ref} {oid} {boot} {ms}\n" for ref, (oid, boot, ms) in known.items())
        try:
            atomic_write(self.path, text.encode("utf-8"), durable=False)
        except OSError as exc:
            raise StoreError(f"cannot write {self.path}: {exc.strerror or exc}") from None
