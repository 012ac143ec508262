"""Records forged as anyone who can write to the store can make them: validly self-signed,
with any values (docs/reference/record.md), and put behind a ref as a hand-run git command
would.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from conftest import store_git, store_path
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def stamp(seconds: float) -> str:
    """A record's time stamp of ``seconds`` since the epoch."""
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
        "acquired-at": stamp(now),
        "renewed-at": stamp(now),
        "released-at": "-",
        "expires-at": stamp(now + 3600),
        "renew-by": stamp(now + 1800),
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
