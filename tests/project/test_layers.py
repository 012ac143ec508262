"""Every module of the package has its place in the layers that import-linter checks.

A module missing from `[tool.importlinter]` in pyproject.toml would escape the layers
contract (docs/design.md, the map) without anyone noticing.
"""

from __future__ import annotations

import tomllib

from conftest import ROOT


def test_every_module_is_in_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    package = ROOT / "gitlease"
    modules = {
        p.stem for p in package.glob("*.py") if p.stem != "__init__" and p.stem != "__main__"
    }
    modules |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    modules -= {"resources"}  # package data only (hook programs, SKILL.md): no code
    assert modules - layered == set(), "modules outside every layer"
    assert layered - modules == set(), "layers naming modules that do not exist"
