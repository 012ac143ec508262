"""Providers map every spelling of one tracker reference to one resource.

See docs/reference/providers.md.

Two agents that name one issue differently must contend for one ref, so every provider maps all
spellings of a unit of work to the same resource and distinct units to distinct ones.

Third-party providers are entry points in the group ``gitlease.providers``: the entry point's
name is the provider's name, and it loads to a provider instance, a provider class (created
without arguments) or a plain function ``(item, *, options, cwd) -> str``. Entry points are read
only when a name is not built in, or when listing, so the common path stays cheap; a built-in
name always wins over an entry point of the same name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import GitleaseError, UsageError
from ..model.refname import validate_resource
from .builtin import BUILTINS

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "gitlease.providers"

__all__ = ["GROUP", "Provider", "canonical_key", "get_provider", "provider_names", "reset_plugins"]


class Provider(Protocol):
    """One way of naming units of work; ``key`` raises UsageError on a bad reference."""

    name: str
    accepts: str  # one line saying which forms are accepted, for error messages

    def key(self, item: str, *, options: Mapping[str, str], cwd: Path) -> str:
        """The canonical resource of ``item`` (USAGE, saying what is accepted, if none)."""
        ...


def provider_names() -> list[str]:
    """Built-in and installed provider names, sorted."""
    return sorted(set(BUILTINS) | set(_entry_points()))


def get_provider(name: str) -> Provider:
    """The provider called ``name``; an unknown name is a usage error that lists the known ones."""
    if name in BUILTINS:
        return BUILTINS[name]
    entry = _entry_points().get(name)
    if entry is None:
        known = ", ".join(provider_names())
        raise UsageError(f"unknown provider {name!r}; known providers: {known}")
    if name not in _loaded:
        _loaded[name] = _load(entry)
    return _loaded[name]


def canonical_key(
    provider: str,
    item: str,
    *,
    options: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> str:
    """The canonical resource for ``item``; refused with a UsageError before any store is read."""
    chosen = get_provider(provider)
    accepts = f"{provider} accepts {chosen.accepts}"
    if not isinstance(item, str):
        raise UsageError(f"{provider}: a reference is text, not {type(item).__name__}; {accepts}")
    text = item.strip()
    if not text:
        raise UsageError(f"{provider}: empty reference; {accepts}")
    resource = chosen.key(text, options=dict(options or {}), cwd=_cwd(cwd))
    try:
        return validate_resource(resource)
    except UsageError as exc:
        raise UsageError(
            f"{provider}: {item!r} gives no valid resource ({exc}); {accepts}"
        ) from None


def reset_plugins() -> None:
    """Forget discovered and loaded plugins (for tests, or after installing one at run time)."""
    import importlib

    global _discovered
    _discovered = None
    _loaded.clear()
    importlib.invalidate_caches()


# --- plugins --------------------------------------------------------------------------------

# Discovered entry points, keyed by the sys.path they were read from, so a changed path is
# noticed without a reset; loaded plugins are dropped along with them.
_discovered: tuple[tuple[str, ...], dict[str, EntryPoint]] | None = None
_loaded: dict[str, Provider] = {}


def _entry_points() -> dict[str, EntryPoint]:
    global _discovered
    path = tuple(sys.path)
    if _discovered is None or _discovered[0] != path:
        from importlib.metadata import entry_points

        found: dict[str, EntryPoint] = {}
        try:
            for entry in entry_points(group=GROUP):
                found.setdefault(entry.name, entry)  # the first on sys.path wins, as for imports
        except Exception as exc:  # a malformed distribution must not hide the built-ins
            raise GitleaseError(f"cannot read the installed {GROUP} entry points: {exc}") from exc
        _loaded.clear()
        _discovered = (path, found)
    return _discovered[1]


def _load(entry: EntryPoint) -> Provider:
    """Load a plugin, turning any failure into one clear error that names it."""
    dist = getattr(entry, "dist", None)
    origin = f"entry point {entry.name} = {entry.value}"
    if dist is not None:
        origin += f" from {dist.name} {dist.version}"
    try:
        target = entry.load()
        if isinstance(target, type):
            target = target()
    except Exception as exc:
        raise GitleaseError(
            f"provider {entry.name!r} failed to load ({origin}): {type(exc).__name__}: {exc}"
        ) from exc
    if callable(getattr(target, "key", None)):
        return _Plugin(entry.name, origin, target.key, getattr(target, "accepts", ""))
    if callable(target):
        doc = (getattr(target, "__doc__", None) or "").strip().splitlines()
        return _Plugin(entry.name, origin, target, doc[0] if doc else "")
    raise GitleaseError(f"provider {entry.name!r} ({origin}) is neither a provider nor callable")


class _Plugin:
    """A third-party provider behind the same contract as the built-ins."""

    def __init__(self, name: str, origin: str, key: Callable[..., Any], accepts: str) -> None:
        self.name = name
        self.origin = origin
        self.accepts = accepts or "what its plugin documents"
        self._key = key

    def key(self, item: str, *, options: Mapping[str, str], cwd: Path) -> str:
        try:
            result = self._key(item, options=options, cwd=cwd)
        except GitleaseError:
            raise
        except ValueError as exc:  # the plugin's way of saying "bad reference"
            raise UsageError(f"{self.name}: {exc}; {self.name} accepts {self.accepts}") from None
        except Exception as exc:
            raise GitleaseError(
                f"provider {self.name!r} ({self.origin}) failed on {item!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(result, str):
            raise GitleaseError(
                f"provider {self.name!r} ({self.origin}) returned {type(result).__name__}, "
                "not a resource string"
            )
        return result


def _cwd(cwd: Path | None) -> Path:
    if cwd is not None:
        return cwd
    try:
        return Path.cwd()
    except OSError:  # the directory was removed; only the path provider will mind
        return Path(".")
