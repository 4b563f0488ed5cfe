"""The base of every typed analysis result: :class:`Result`, :class:`Interval` and :func:`rounded`.

Kept apart from :mod:`geval_spec.analysis.results` so that results defined
next to the code that makes them (:mod:`geval_spec.analysis.estimate`) can
be part of the report without an import cycle.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

__all__ = ["Interval", "Result", "rounded"]


def rounded(x: float | np.floating[Any] | None, digits: int = 4) -> float | None:
    """Fixed rounding for reports: None for missing or non-finite values."""
    if x is None:
        return None
    value = float(x)
    return round(value, digits) if math.isfinite(value) else None


class Result(BaseModel):
    """Base of every result: frozen, no unknown fields, some keys left out when they do not apply."""

    # defer_build: a model's validator is built when it is first used, not at import (about 25 ms of every
    # command that imports the results; `run` uses a few of them, `report` all).
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True)
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset()

    def omitted(self) -> set[str]:
        """The keys this value leaves out of its JSON: by default, those of OMIT_IF_NONE that are None."""
        return {key for key in self.OMIT_IF_NONE if getattr(self, key) is None}

    @model_serializer(mode="wrap")
    def _omit(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in self.omitted():
            data.pop(key, None)
        return data


class Interval(Result):
    value: float | None
    ci_low: float | None
    ci_high: float | None
