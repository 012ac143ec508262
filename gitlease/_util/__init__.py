"""Small helpers every layer may use: files (one atomic write), text, processes, immutable
values, digests, and the test-only switches; here, the ``TYPE_CHECKING`` the commit check's
modules use instead of ``typing``'s, and regular expressions compiled on their first use.

Patterns compiled on first use: a pattern compiled at the top of a module costs every
process that imports the module, whether it uses the pattern or not: ``re`` compiles in
Python, 20-400 µs a pattern (a character class with the surrogates in it is the dearest). The
modules a read or the commit check imports hold some sixty; ``show`` uses a dozen of them, and
compiling the rest took about 1.3 ms of its start (docs/performance.md, section 2). So every
module-level pattern of the package is written ``NAME = lazy(r"...")``: the same pattern,
compiled when a method of it is first called. (Here rather than in a module of its own: the
commit check imports this package anyway, and its count of modules is kept from growing.)

After that first call the compiled pattern's methods are attributes of the stand-in itself,
so a later call costs what it costs on the compiled pattern, plus nothing but the lookup. Two
threads that make the first call at once both compile; both results are the same pattern.
"""

from __future__ import annotations

import re

from ..errors import TYPE_CHECKING as TYPE_CHECKING  # (defined there, the bottom layer)

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, AnyStr


#: What the stand-in hands over from the compiled pattern on first use.
_METHODS = ("search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer")


class _Lazy:
    """A stand-in for a compiled pattern (see the package's text)."""

    def __init__(self, compile: Callable[[], re.Pattern[Any]], source: str | bytes) -> None:
        self._compile = compile
        self._source = source

    def __getattr__(self, name: str) -> object:
        compiled = self._compile()
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        self.__dict__.update(
            pattern=compiled.pattern,
            flags=compiled.flags,
            groups=compiled.groups,
            groupindex=compiled.groupindex,
        )
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile(pattern, flags)``, compiled on the first call of one of its methods."""
    return _Lazy(lambda: re.compile(pattern, flags), pattern)  # type: ignore[return-value]
