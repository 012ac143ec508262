"""The public surface is explicit: ``__all__``, the lazy map and the names type checkers see
(the ``TYPE_CHECKING`` block of gitlease/__init__.py) agree, and every name loads.

docs/versioning.md promises ``import gitlease`` and ``gitlease.errors`` as the stable paths;
if the three lists drift, a name is either invisible to type checkers or missing at run time.
"""

from __future__ import annotations

import ast
import importlib

from conftest import ROOT

import gitlease

INIT = ROOT / "gitlease" / "__init__.py"


def _type_checking_imports() -> dict[str, str]:
    """name -> module (below gitlease) of each import in the ``if TYPE_CHECKING:`` block."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )  # fmt: skip
    out: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names:
            assert alias.asname == alias.name, "re-exported explicitly (`import X as X`)"
            module = node.module or ""
            sub = f"{module}.{alias.name}".lstrip(".")
            is_module = (ROOT / "gitlease" / (sub.replace(".", "/") + ".py")).exists()
            out[alias.name] = sub if is_module else module
    return out


def test_all_lazy_map_and_type_checking_names_agree() -> None:
    lazy: dict[str, str] = gitlease._LAZY  # type: ignore[attr-defined]
    seen = _type_checking_imports()
    assert set(seen) == set(lazy)
    for name, module in lazy.items():
        assert seen[name] == module, f"{name}: TYPE_CHECKING imports it from another module"
    errors = {n for n in gitlease.__all__ if n not in lazy}
    assert errors == {n for n in vars(importlib.import_module("gitlease.errors"))
                      if n.endswith(("Error", "Failed", "Unknown"))}  # fmt: skip
    assert len(gitlease.__all__) == len(set(gitlease.__all__))


def test_every_public_name_loads_from_the_module_the_map_names() -> None:
    for name, module in gitlease._LAZY.items():  # type: ignore[attr-defined]
        value = getattr(gitlease, name)
        loaded = importlib.import_module(f"gitlease.{module}")
        modules = gitlease._LAZY_MODULES  # type: ignore[attr-defined]
        expected = loaded if name in modules else getattr(loaded, name)
        assert value is expected, name
