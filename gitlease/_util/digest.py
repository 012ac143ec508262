"""SHA-1 and SHA-256 of short inputs, from CPython's own implementations.

``import hashlib`` loads OpenSSL's library and tries every algorithm it offers: 3-4 ms a
process on the test machine, more than a tenth of the commit check's own time. gitlease
hashes only short texts (a record's bytes for its object id, a ref for a file name, a path
for the store's name), so it uses the interpreter's built-in modules, which load in a
fraction of a millisecond and give the same digests (about 2.5 µs slower a 700-byte
record: 0.25 s over a listing of 100,000). Where they are missing (an interpreter built
without them), ``hashlib`` serves. Hashing whole files (``replace-file``) stays with
``hashlib``, which is faster on long inputs.
"""

from __future__ import annotations

from collections.abc import Callable

from . import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Protocol

    class Hash(Protocol):
        """What gitlease asks of a hash object."""

        def update(self, data: bytes, /) -> None: ...
        def digest(self) -> bytes: ...
        def hexdigest(self) -> str: ...


def _constructor(modules: tuple[str, ...], name: str) -> Callable[[bytes], Hash]:
    for module in modules:  # (CPython 3.12 renamed _sha256 to _sha2)
        try:
            found: Callable[[bytes], Hash] = getattr(__import__(module), name)
        except (ImportError, AttributeError):
            continue
        return found
    import hashlib

    fallback: Callable[[bytes], Hash] = getattr(hashlib, name)
    return fallback


sha1 = _constructor(("_sha1",), "sha1")
sha256 = _constructor(("_sha256", "_sha2"), "sha256")
