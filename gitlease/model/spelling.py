"""One spelling per name: a new claim's resource must be NFC and hold nothing invisible.

``café`` can be written three ways that print alike (NFC, NFD, with a zero-width space):
as resources they were three refs, so three agents could each hold "café" at once, and a
U+202E in a name turned a ``list`` line around. A *new* claim's resource is therefore
refused (USAGE) unless it is in Unicode Normalization Form C and holds no format character
(category Cf: bidi controls, zero-width spaces and joiners, the soft hyphen) and no line or
paragraph separator (Zl, Zp). Names already in a store are left as they are (they can still
be shown, renewed and released), and every output escapes those characters
(:func:`gitlease._util.text.visible`).
"""

from __future__ import annotations

import unicodedata

from .._util.text import is_invisible, visible
from ..errors import UsageError


def check_new_resource(resource: str) -> str:
    """``resource``, or USAGE if it is not NFC or holds an invisible character."""
    if resource.isascii():
        return resource
    for ch in resource:
        if ord(ch) > 0x7F and is_invisible(ch):
            raise UsageError(
                f"resource {visible(resource)!r} contains the invisible character "
                f"U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')}): a name that prints "
                "like another must not be another claim; leave it out"
            )
    if not unicodedata.is_normalized("NFC", resource):
        nfc = unicodedata.normalize("NFC", resource)
        raise UsageError(
            f"resource {visible(resource)!r} is not in Unicode NFC: spell it {visible(nfc)!r} "
            "(every spelling of one name must be one claim)"
        )
    return resource
