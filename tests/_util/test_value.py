"""The value objects (gitlease/_util/value.py): however a value is made (every field in order,
the first fields with the rest defaulted, by name), it is the same value; a field with no
default is still required, and a default made afresh is never shared."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitlease._util.value import Factory, Value


class _Point(Value):
    __slots__ = ("x", "y", "z", "tags")
    _defaults: ClassVar[dict[str, Any]] = {"z": 0, "tags": Factory(list)}


class _Plain(Value):
    __slots__ = ("a", "b", "c")
    _defaults: ClassVar[dict[str, Any]] = {"b": "b", "c": None}


@given(st.integers(), st.text(), st.none() | st.integers(), st.integers(0, 3))
def test_a_value_is_the_same_however_it_is_made(a: int, b: str, c: int | None, count: int) -> None:
    values = (a, b, c)[: max(1, count)]
    named = dict(zip(("a", "b", "c"), values, strict=False))
    assert _Plain(*values) == _Plain(**named)
    assert _Plain(*values).as_dict() == {"a": a, "b": "b", "c": None, **named}


def test_a_field_without_a_default_is_required_and_a_made_default_is_never_shared() -> None:
    with pytest.raises(TypeError, match="missing y"):
        _Point(1)
    with pytest.raises(TypeError, match="missing a"):
        _Plain()
    one, two = _Point(1, 2), _Point(1, 2)
    assert one == two and one.tags is not two.tags, "a Factory default is made for each object"
    assert _Point(1, 2).z == 0 and _Point(1, 2, 3).z == 3
    with pytest.raises(TypeError, match="at most"):
        _Plain(1, 2, 3, 4)
