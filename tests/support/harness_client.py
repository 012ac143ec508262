"""One client of the history harness: random operations, each logged before and after.

Usage: harness_client.py CLIENT LOG_DIR TTL RESOURCE...

Every operation writes an ``invoke`` line before it starts and a ``complete``
line when it returns; a client killed in between leaves an operation whose
outcome is unknown. Times are read on both ``time.monotonic_ns()`` and
``CLOCK_BOOTTIME`` (the clock the store judges expiry on, so the checker can
compare a client's intervals with the store's history directly).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

from gitlease.api import bundle, guarded, lease
from gitlease.errors import GitleaseError
from gitlease.model.claim import Claim
from gitlease.receipts.receipt import read as read_receipt
from gitlease.store.location import open_store

#: Set when the harness plays several hosts: each keeps its own sinks (replace-file fences
#: the files of its own host only).
HOST = os.environ["HARNESS_HOST"] + "-" if os.environ.get("HARNESS_HOST") else ""
OPS = ("acquire", "heartbeat", "check", "release", "bundle", "exec", "replace", "control")
WEIGHTS = (5, 3, 3, 2, 1, 1, 3, 2)


def boot_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


class Client:
    def __init__(self, name: str, log_dir: Path, ttl: float, resources: list[str]) -> None:
        self.name = name
        self.dir = log_dir
        self.ttl = ttl
        self.resources = resources
        # every other client writes as the CLI does (git update-ref), the rest through
        # libgit2, as the library and the MCP server do: the two writers race on one store
        self.store = open_store(one_shot=name[-1:] in "02468")
        self.log = open(log_dir / f"client-{name}.jsonl", "a", buffering=1)  # noqa: SIM115
        self.seq = 0
        (log_dir / "receipts").mkdir(exist_ok=True, mode=0o700)

    def receipt(self, resource: str) -> Path:
        return self.dir / "receipts" / f"{self.name}-{self.resources.index(resource)}.json"

    def owned(self, resource: str) -> tuple[str | None, int | None]:
        try:
            rec = read_receipt(self.receipt(resource))
        except GitleaseError:
            return None, None
        claim = rec.claim_for(resource)
        return (claim.claim_id, claim.revision) if claim else (None, None)

    def run_one(self) -> None:
        op = random.choices(OPS, WEIGHTS)[0]
        resource = random.choice(self.resources)
        self.seq += 1
        base = {"client": self.name, "seq": self.seq, "op": op, "resource": resource}
        self.log.write(
            json.dumps({**base, "phase": "invoke", "t": boot_ns(), "mono": time.monotonic_ns()})
            + "\n"
        )
        result: dict[str, object] = {}
        try:
            result = getattr(self, "op_" + op)(resource) or {}
            outcome, code = "ok", 0
        except GitleaseError as exc:
            outcome, code = "fail", exc.exit_code
        self.log.write(
            json.dumps(
                {
                    **base,
                    **result,
                    "phase": "complete",
                    "outcome": outcome,
                    "code": code,
                    "t": boot_ns(),
                    "mono": time.monotonic_ns(),
                }
            )
            + "\n"
        )

    def _claim(self, claim: Claim) -> dict[str, object]:
        assert claim.record is not None
        return {"claim_id": claim.record.claim_id, "revision": claim.record.revision}

    def op_acquire(self, r: str) -> dict[str, object]:
        got = lease.acquire(self.store, r, ttl=f"{self.ttl}s", receipt=self.receipt(r), bind=False)
        return self._claim(got.claim)

    def op_heartbeat(self, r: str) -> dict[str, object]:
        return self._claim(lease.heartbeat(self.store, r, receipt=self.receipt(r)))

    def op_check(self, r: str) -> dict[str, object]:
        return self._claim(lease.check(self.store, r, receipt=self.receipt(r)))

    def op_release(self, r: str) -> dict[str, object]:
        return self._claim(lease.release(self.store, r, receipt=self.receipt(r)))

    def op_bundle(self, r: str) -> dict[str, object]:
        other = random.choice([x for x in self.resources if x != r])
        path = self.dir / "receipts" / f"{self.name}-bundle.json"
        got = bundle.acquire_many(
            self.store, [r, other], ttl=f"{self.ttl}s", receipt=path, bind=False
        )
        time.sleep(random.uniform(0, self.ttl / 4))
        bundle.release(self.store, receipt=path)
        return {"claims": [self._claim(c) for c in got.claims]}

    def op_exec(self, r: str) -> dict[str, object]:
        mine = self.receipt(r) if self.owned(r)[0] else None  # else exec acquires itself,
        # for the run's TTL: a client killed while its command runs must leave a claim the
        # others can take over within the run, not one of the default 15 minutes
        code = guarded.run_guarded(
            self.store, ["sleep", str(round(self.ttl / 3, 2))], r, receipt=mine, ttl=f"{self.ttl}s"
        )
        return {"exit": code}

    def op_replace(self, r: str) -> dict[str, object]:
        """The fenced sink: append this claim's id and revision through replace-file."""
        claim_id, revision = self.owned(r)
        sink = self.dir / f"fenced-{HOST}{self.resources.index(r)}.txt"
        content = sink.read_bytes() if sink.exists() else b""
        line = f"{claim_id} {revision}\n".encode()
        guarded.replace_file(
            self.store,
            sink,
            content + line,
            expect_sha256=hashlib.sha256(content).hexdigest() if content else None,
            expect_absent=not content,
            receipt=self.receipt(r),
            resource=r,
        )
        return {"claim_id": claim_id, "revision": revision}

    def op_control(self, r: str) -> dict[str, object]:
        """The unfenced control sink: check, work a while, then write without any fence."""
        claim = lease.check(self.store, r, receipt=self.receipt(r))
        time.sleep(random.uniform(0, self.ttl * 1.5))
        sink = self.dir / f"control-{HOST}{self.resources.index(r)}.txt"
        with open(sink, "a") as f:
            f.write(f"{claim.record.claim_id} {claim.record.revision} {boot_ns()}\n")
        return self._claim(claim)


def main() -> None:
    name, log_dir, ttl, *resources = sys.argv[1:]
    client = Client(name, Path(log_dir), float(ttl), resources)
    while True:
        client.run_one()


if __name__ == "__main__":
    main()
