"""Frozen values: :func:`frozen` makes a class a frozen dataclass whose repr, equality and hash are shared.

``@frozen`` is ``@dataclass(frozen=True)`` with the same ``__repr__``, ``__eq__`` and ``__hash__``: they read
the fields dataclasses lists (``compare`` and ``repr`` as a field says), as the methods dataclasses writes do. Only
the way they are made differs: dataclasses writes Python source for each method of each class and compiles it
(about 50 us a method in Python 3.11), a cost every process pays for every class it imports, before any work.
These three are made once, here, for every class: a command that imports 60 such classes starts about 10 ms
sooner (BENCHMARKS.md, scale, twenty-second session). ``__init__``, ``__setattr__`` and ``__delattr__`` are
still dataclasses' own.
"""

from __future__ import annotations

import dataclasses
import sys
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:  # (frozen_default is typing's own from Python 3.12; typing_extensions' stubs have it for 3.11)
    from typing_extensions import dataclass_transform
else:  # (at run time it only records its arguments; Python 3.11's takes any keyword)
    from typing import dataclass_transform

__all__ = ["frozen"]

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def frozen(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True)``, with the shared ``__repr__``, ``__eq__`` and ``__hash__`` (see the module
    docstring); a method the class defines itself is kept where dataclasses keeps it (a class that defines
    ``__eq__`` alone gets the fields' ``__hash__``, as from dataclasses)."""
    own = dict(cls.__dict__)
    # dataclasses' rule: a __hash__ the class sets is kept, but not the None Python sets for a class that defines
    # __eq__ alone (the fields' hash is added then too)
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    made = dataclasses.dataclass(frozen=True, repr=False, eq=False)(cls)
    listed = dataclasses.fields(made)  # type: ignore[arg-type]
    if "__repr__" not in own:
        _method(made, _repr_of([f.name for f in listed if f.repr]))
    if "__eq__" not in own:
        compared = [f.name for f in listed if f.compare]
        _method(made, _eq_by_field(compared) if _BY_FIELD else _eq_of(_key(compared)))
    if not explicit_hash:  # (a field's hash, when given, says whether it is hashed; else its compare)
        _method(made, _hash_of(_key([f.name for f in listed if (f.compare if f.hash is None else f.hash)])))
    return made


def _method(cls: type, fn: Callable[..., Any]) -> None:
    """Set ``fn`` on ``cls`` under its name, named as dataclasses names the methods it writes."""
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    setattr(cls, fn.__name__, fn)


def _key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of a value's fields ``names`` (those dataclasses' methods compare, or hash)."""
    if not names:
        return lambda self: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda self: (get(self),)
    return attrgetter(*names)


# Python 3.13's dataclasses compare field by field (``self.a == other.a and ...``, after ``self is other``);
# before, as tuples (``(self.a, ...) == (other.a, ...)``, where a field that is the same object is equal, NaN too)
_BY_FIELD = sys.version_info >= (3, 13)


def _eq_of(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    """``__eq__`` as dataclasses writes it before Python 3.13."""
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _eq_by_field(names: list[str]) -> Callable[[Any, Any], Any]:
    """``__eq__`` as dataclasses writes it from Python 3.13 (what ``and`` gives: the first false comparison)."""
    def __eq__(self: Any, other: Any) -> Any:
        if self is other:
            return True
        if other.__class__ is self.__class__:
            result: Any = True
            for name in names:
                result = getattr(self, name) == getattr(other, name)
                if not result:
                    return result
            return result
        return NotImplemented

    return __eq__


def _hash_of(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


_SHOWING: set[tuple[int, int]] = set()  # (id of the value, thread) whose repr is being made: a cycle shows "..."


def _repr_of(names: list[str]) -> Callable[[Any], str]:
    import threading

    get = threading.get_ident

    def __repr__(self: Any) -> str:
        mark = (id(self), get())
        if mark in _SHOWING:
            return "..."
        _SHOWING.add(mark)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            _SHOWING.discard(mark)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__
