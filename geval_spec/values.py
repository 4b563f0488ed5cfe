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
from typing import Any, Callable, TypeVar

if sys.version_info >= (3, 12):  # (frozen_default: typing's own from Python 3.12)
    from typing import dataclass_transform
else:
    from typing_extensions import dataclass_transform

__all__ = ["frozen"]

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def frozen(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True)``, with the shared ``__repr__``, ``__eq__`` and ``__hash__`` (see the module
    docstring); a method the class defines itself is kept, as dataclasses keeps it."""
    own = set(cls.__dict__)
    made = dataclasses.dataclass(frozen=True, repr=False, eq=False)(cls)
    listed = dataclasses.fields(made)  # type: ignore[arg-type]
    if "__repr__" not in own:
        setattr(made, "__repr__", _repr_of([f.name for f in listed if f.repr]))
    if "__eq__" not in own:
        setattr(made, "__eq__", _eq_of(_key([f.name for f in listed if f.compare])))
        if "__hash__" not in own:  # (a field's hash, when given, says whether it is hashed; else its compare)
            hashed = [f.name for f in listed if (f.compare if f.hash is None else f.hash)]
            setattr(made, "__hash__", _hash_of(_key(hashed)))
    return made


def _key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of a value's fields ``names`` (those dataclasses' methods compare, or hash)."""
    if not names:
        return lambda self: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda self: (get(self),)
    return attrgetter(*names)


def _eq_of(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
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
