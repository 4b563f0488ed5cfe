"""geval_spec.values.frozen behaves as @dataclass(frozen=True): the same repr, equality, hash and errors."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geval_spec.values import frozen


def _pair(body: dict, name: str = "V"):
    """The same class body made by dataclasses and by frozen (the same qualname, so their reprs compare)."""
    ns_a = dict(body)
    ns_b = dict(body)
    a = dataclass(frozen=True)(type(name, (), ns_a))
    b = frozen(type(name, (), ns_b))
    return a, b


def _body(names: list[str], options: dict[str, dict]) -> dict:
    annotations = {n: "object" for n in names}
    body: dict = {"__annotations__": annotations}
    for n in names:
        if n in options:
            body[n] = field(**options[n])
    return body


values = st.none() | st.integers() | st.text(max_size=4) | st.floats(allow_nan=True) | \
    st.tuples(st.integers(), st.text(max_size=2)) | st.lists(st.integers(), max_size=2)
shapes = st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4).flatmap(
    lambda names: st.tuples(st.just(names), st.fixed_dictionaries(
        {}, optional={n: st.sampled_from([{"repr": False}, {"compare": False}, {"repr": False, "compare": False},
                                          {"hash": False}]) for n in names})))


@settings(max_examples=300, deadline=None)
@given(shapes, st.data())
def test_frozen_values_repr_compare_and_hash_as_dataclasses_do(shape, data):
    names, options = shape
    a_cls, b_cls = _pair(_body(names, options))
    args1 = [data.draw(values) for _ in names]
    args2 = [data.draw(st.sampled_from([v, data.draw(values)])) for v in args1]
    a1, a2, b1, b2 = a_cls(*args1), a_cls(*args2), b_cls(*args1), b_cls(*args2)
    assert repr(b1) == repr(a1) and repr(b2) == repr(a2)
    assert (b1 == b2) == (a1 == a2) and (b1 != b2) == (a1 != a2)
    assert (b1 == b1) == (a1 == a1)  # (NaN: compared by identity first, inside the tuple)
    assert b1.__eq__(object()) is NotImplemented and b1 != args1
    assert (b1 == a1) is False  # another class, as between two dataclasses
    try:
        expected = hash(a1)
    except TypeError:  # a list among the compared fields
        with pytest.raises(TypeError):
            hash(b1)
    else:
        assert hash(b1) == expected
    assert [f.name for f in dataclasses.fields(b_cls)] == names and dataclasses.is_dataclass(b1)
    if names:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(b1, names[0], 1)
        assert dataclasses.replace(b1, **{names[0]: 7}) == b_cls(7, *args1[1:])


def test_a_value_that_holds_itself_shows_dots_as_dataclasses_does():
    a_cls, b_cls = _pair(_body(["x"], {}), "Loop")
    box_a, box_b = [], []
    a, b = a_cls(box_a), b_cls(box_b)
    box_a.append(a)
    box_b.append(b)
    assert repr(b) == repr(a) == "Loop(x=[...])"


def test_methods_a_class_defines_itself_are_kept():
    @frozen
    class Own:
        x: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 3

    assert repr(Own(1)) == "own" and Own(1) == 5 and hash(Own(2)) == 3


def test_frozen_values_pickle_and_keep_their_class_docstring():
    value = _Picklable(1, "a")
    assert pickle.loads(pickle.dumps(value)) == value
    assert _Picklable.__doc__ == "A value to pickle."


@frozen
class _Picklable:
    """A value to pickle."""

    n: int
    s: str


def test_a_class_that_defines_eq_alone_gets_the_fields_hash_as_from_dataclasses():
    def eq(self, other):
        return isinstance(other, type(self)) and self.x == other.x

    a_cls, b_cls = _pair({"__annotations__": {"x": "int"}, "__eq__": eq}, "Eq")
    assert b_cls.__hash__ is not None and hash(b_cls(3)) == hash(a_cls(3))
    assert b_cls(3) == b_cls(3) and b_cls.__eq__ is eq


def test_the_shared_methods_are_named_as_dataclasses_names_its_own():
    a_cls, b_cls = _pair(_body(["a"], {}), "Named")
    for name in ("__repr__", "__eq__", "__hash__"):
        assert getattr(b_cls, name).__qualname__ == getattr(a_cls, name).__qualname__ == f"Named.{name}"


class _Odd:
    """A field value whose == answers something that is not a bool."""

    def __init__(self, answer):
        self.answer = answer

    def __eq__(self, other):
        return self.answer


@pytest.mark.parametrize("first, second", [(float("nan"), 1), (1, 2), (_Odd(0), 5), (_Odd("yes"), 1),
                                           (_Odd([]), _Odd("x"))])
def test_field_by_field_equality_is_python_3_13s(first, second):
    """From Python 3.13 dataclasses compare field by field (``self is other``, then ``a == a and b == b``, which
    gives the first false comparison); values.frozen does the same there. Compared here with that code itself,
    on any Python."""
    from geval_spec.values import _eq_by_field

    namespace: dict = {}
    exec("def reference(self, other):\n"
         "    if self is other:\n        return True\n"
         "    if other.__class__ is self.__class__:\n        return self.a == other.a and self.b == other.b\n"
         "    return NotImplemented\n", namespace)
    reference, ours = namespace["reference"], _eq_by_field(["a", "b"])
    cls = dataclass(frozen=True, eq=False)(type("P", (), {"__annotations__": {"a": "object", "b": "object"}}))
    x, same, other = cls(first, second), cls(first, second), cls(first, 7)
    for left, right in ((x, x), (x, same), (x, other), (x, 3)):
        assert ours(left, right) == reference(left, right) or ours(left, right) is reference(left, right)


_NAN = float("nan")


@pytest.mark.parametrize("first, second", [((_NAN,), (_NAN,)), ((_NAN, 1), (_NAN, 1)), ((_NAN,), (float("nan"),)),
                                           ((_Odd(0),), (_Odd(0),)), ((1, _Odd("yes")), (1, 2)),
                                           ((_Odd([]), 2), (3, 2))])
def test_equality_where_a_field_is_nan_or_answers_oddly_is_dataclasses_own(first, second):
    """The cases where the two ways dataclasses has compared differ (a field that is the same NaN object, a
    field whose == is no bool): values.frozen answers as the running Python's dataclasses."""
    names = ["a", "b"][:len(first)]
    a_cls, b_cls = _pair(_body(names, {}))
    a1, a2, b1, b2 = a_cls(*first), a_cls(*second), b_cls(*first), b_cls(*second)
    assert (b1 == b2) == (a1 == a2) and (b1 == b1) == (a1 == a1) and (b1 != b2) == (a1 != a2)
