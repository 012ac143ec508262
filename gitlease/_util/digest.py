"""SHA-1 and SHA-256 without loading OpenSSL in a short process.

``import hashlib`` loads OpenSSL's library and tries every algorithm it offers: 3-4 ms a
process on the test machine, more than a tenth of the commit check's own time. A short
process (the commit check, a read, a write) hashes a few short texts: a record's bytes for
its object id, a ref for a file name, a path for the store's name. It gets them from the
interpreter's built-in modules, which load in a fraction of a millisecond and give the same
digests. They are slower on bulk (about 2.5 µs more a 700-byte record), so a process that
hashes many (a listing of thousands of records reads each one's id) turns to ``hashlib``
after :data:`SWITCH_AFTER` digests, when OpenSSL's load has paid for itself. Where the
built-in modules are missing (an interpreter built without them), ``hashlib`` serves at once.
Whole files (``replace-file``) are hashed with ``hashlib`` directly.
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


#: Digests made with the built-in modules before a process turns to ``hashlib``'s: about
#: 1,500 of them pay for OpenSSL's load.
SWITCH_AFTER = 1500


def _constructor(modules: tuple[str, ...], name: str) -> Callable[[bytes], Hash]:
    builtin: Callable[[bytes], Hash] | None = None
    for module in modules:  # (CPython 3.12 renamed _sha256 to _sha2)
        try:
            builtin = getattr(__import__(module), name)
        except (ImportError, AttributeError):
            continue
        break
    fast: Callable[[bytes], Hash] | None = None  # hashlib's, once in use
    made = 0

    def make(data: bytes) -> Hash:
        nonlocal fast, made
        if fast is None:
            made += 1
            if builtin is not None and made <= SWITCH_AFTER:
                return builtin(data)
            import hashlib

            fast = getattr(hashlib, name)
        return fast(data)

    return make


sha1 = _constructor(("_sha1",), "sha1")
sha256 = _constructor(("_sha256", "_sha2"), "sha256")
