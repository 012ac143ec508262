"""Small immutable value objects, without ``dataclasses``.

Importing ``dataclasses`` pulls in ``inspect`` and ``ast`` and builds each
class with ``exec``: about 20 ms, paid on every commit by the hook, which
imports the record, receipt and store modules. :class:`Value` gives the same
frozen, keyword-constructed, comparable objects for the types on that path;
modules off it (``verification``, ``pruning``, ``githooks``) use plain dataclasses.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from . import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, ClassVar, TypeVar

    V = TypeVar("V", bound="Value")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cycle collector while many small objects are built (a ``list`` of 10,000
    claims: about a tenth of its time went to collections that find nothing, since values
    hold no cycles). Objects are still freed as soon as nothing refers to them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Factory:
    """A default made afresh for every object (like ``dataclasses.field(default_factory=...)``)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class Value:
    """Fields are the subclass's ``__slots__``, in order; set once, at construction."""

    __slots__ = ()
    #: Defaults by field name (a :class:`Factory` is called for each object).
    _defaults: ClassVar[dict[str, Any]] = {}
    #: Fields left out of ``==``, ``hash()`` and ``repr()``.
    _hidden: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self._fields()
        if not kwargs and len(args) == len(names):  # every field, in order: the common case
            for name, value in zip(names, args):  # noqa: B905 (the lengths are equal)
                object.__setattr__(self, name, value)
            return
        if not kwargs and len(args) < len(names):  # the first fields, the rest defaulted
            tail = self._tail(len(args))
            if tail is not None:
                for name, value in zip(names, args):  # noqa: B905 (args is the shorter)
                    object.__setattr__(self, name, value)
                for name, value in tail:
                    object.__setattr__(self, name, value)
                return
        if not args and len(kwargs) == len(names):  # every field by name (a record's making)
            try:
                values = [kwargs[name] for name in names]
            except KeyError:
                pass  # (a misspelt field: the slow path below names it)
            else:
                for name, value in zip(names, values):  # noqa: B905 (the lengths are equal)
                    object.__setattr__(self, name, value)
                return
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} values")
        for name, value in zip(names, args, strict=False):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}: {name} given twice")
            kwargs[name] = value
        for name in names:
            if name in kwargs:
                value = kwargs.pop(name)
            elif name in self._defaults:
                value = self._defaults[name]
                value = value.make() if isinstance(value, Factory) else value
            else:
                raise TypeError(f"{type(self).__name__}: missing {name}")
            object.__setattr__(self, name, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unknown {', '.join(sorted(kwargs))}")

    @classmethod
    def _tail(cls, given: int) -> tuple[tuple[str, Any], ...] | None:
        """The defaults of the fields after the first ``given``, or None if one has none or
        is made afresh (:class:`Factory`): looked up once per class and count."""
        tails = cls.__dict__.get("_tails")
        if tails is None:
            tails = {}
            type.__setattr__(cls, "_tails", tails)
        if given not in tails:
            rest = cls._fields()[given:]
            defaults = cls._defaults
            plain = all(n in defaults and not isinstance(defaults[n], Factory) for n in rest)
            tails[given] = tuple((n, defaults[n]) for n in rest) if plain else None
        tail: tuple[tuple[str, Any], ...] | None = tails[given]
        return tail

    @classmethod
    def _of(cls: type[V], values: tuple[Any, ...]) -> V:
        """An object from every field's value, in order, unchecked (for hot paths that made
        every value themselves, such as parsing a record)."""
        setters = cls.__dict__.get("_setters")
        if setters is None:  # each slot's own descriptor, looked up once per class
            setters = tuple(getattr(cls, name).__set__ for name in cls._fields())
            type.__setattr__(cls, "_setters", setters)
        if len(values) != len(setters):
            raise TypeError(f"{cls.__name__} takes {len(setters)} values")
        obj = object.__new__(cls)
        for setter, value in zip(setters, values):  # noqa: B905 (checked above)
            setter(obj, value)
        return obj

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use .replace()")

    @classmethod
    def _fields(cls) -> tuple[str, ...]:
        names: tuple[str, ...] = cls.__slots__
        return names

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._fields() if n not in self._hidden)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash((type(self), self._compared()))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{n}={getattr(self, n)!r}" for n in self._fields() if n not in self._hidden
        )
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), tuple(getattr(self, n) for n in self._fields()))

    def replace(self: V, **changes: Any) -> V:
        """A copy with some fields changed."""
        fields = self._fields()
        values = tuple(changes.pop(n) if n in changes else getattr(self, n) for n in fields)
        if changes:
            raise TypeError(f"{type(self).__name__}: unknown {', '.join(sorted(changes))}")
        return type(self)._of(values)

    def as_dict(self) -> dict[str, Any]:
        """The fields by name."""
        return {n: getattr(self, n) for n in self._fields()}
