"""Module-level patterns are compiled on first use (gitlease/_util/__init__.py): importing the
package compiles none, and a stand-in answers as the compiled pattern does."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

import gitlease
from gitlease._util import _Lazy, lazy

#: Compiles during the imports, by the module that asked: gitlease's own. (The CLI may not
#: import gitlease._util: its output net is a string ``re`` compiles on first use, and the
#: two modules only ``--json`` and ``board`` import compile theirs at import.)
_COUNT_COMPILES = """
import re, sys
SKIP = ("gitlease.cli.jsonout", "gitlease.cli.board")
real = re._compile
compiled = []
def counting(pattern, flags):
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(("re", "sre")):
        frame = frame.f_back
    if frame is not None and frame.f_code.co_name == "<module>":
        name = frame.f_globals.get("__name__", "")
        if name.startswith("gitlease") and name not in SKIP:
            compiled.append((name, pattern))
    return real(pattern, flags)
re._compile = counting
import gitlease.api.reads, gitlease.api.location, gitlease.hooks.check, gitlease.agents
import gitlease.claims.engine, gitlease.store.remote, gitlease.fence, gitlease.providers.builtin
import gitlease.scopes.syntax, gitlease.state.floors, gitlease.fence.trailer
import gitlease.cli.app, gitlease.cli.output, gitlease.cli.claims, gitlease.cli.hooks
print(compiled)
"""


def test_importing_the_package_compiles_no_pattern() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_COMPILES], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def _module_patterns() -> list[_Lazy]:
    found = []
    for info in pkgutil.walk_packages(gitlease.__path__, "gitlease."):
        if info.name.endswith(".__main__"):
            continue  # (each runs its command)
        module = importlib.import_module(info.name)
        found += [v for v in vars(module).values() if isinstance(v, _Lazy)]
    return found


_PATTERNS = _module_patterns()


def test_every_module_level_pattern_is_a_stand_in_and_compiles() -> None:
    assert len(_PATTERNS) >= 50, len(_PATTERNS)
    for stand_in in _PATTERNS:
        compiled = re.compile(stand_in._source, stand_in.flags)
        assert (stand_in.pattern, stand_in.groups) == (compiled.pattern, compiled.groups)


def _same(
    a: re.Match[str] | re.Match[bytes] | None, b: re.Match[str] | re.Match[bytes] | None
) -> bool:
    if a is None or b is None:
        return a is b
    return (a.span(), a.groups()) == (b.span(), b.groups())


@given(st.text(alphabet="abcAZ09 -_./%@:\n\t\x00\x1b[m\ud800é", max_size=40))
def test_a_stand_in_answers_as_the_compiled_pattern(text: str) -> None:
    for source in (r"[a-z]+(?P<n>[0-9]*)", r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]", r"\s*(\w+)"):
        stand_in, compiled = lazy(source), re.compile(source)
        assert _same(stand_in.search(text), compiled.search(text))
        assert _same(stand_in.match(text), compiled.match(text))
        assert _same(stand_in.fullmatch(text), compiled.fullmatch(text))
        assert stand_in.sub("?", text) == compiled.sub("?", text)
        assert stand_in.findall(text) == compiled.findall(text)
        assert stand_in.split(text) == compiled.split(text)
    raw = text.encode("utf-8", "surrogatepass")
    assert _same(lazy(rb"[0-9a-f]+").search(raw), re.compile(rb"[0-9a-f]+").search(raw))
