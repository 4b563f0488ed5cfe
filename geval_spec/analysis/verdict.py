"""The gate's verdict (:class:`GateBlock`): part of the report, and what ``run`` prints and saves at its end.

Kept apart from :mod:`geval_spec.analysis.results` so that ``run`` judges its gate without building the report's
models or importing the estimate's code (about 33 ms of every run; BENCHMARKS.md, scale, twenty-second session).
"""

from __future__ import annotations

from geval_spec.analysis.result_base import Result

__all__ = ["GateBlock"]


class GateBlock(Result):
    """The gate's verdict and how sure it is.

    ``rule`` says what is compared with the threshold: the value (point) or
    the lower end of its interval (lower_bound). ``could_flip`` is True when
    the interval contains the threshold (another sample could give the other
    verdict), None when no interval was computed. ``unseen_data`` is False
    unless the gate is judged on test, the split nothing was tuned on.
    """

    metric: str
    level: str
    split: str
    threshold: float
    rule: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    validity: float | None
    min_validity: float
    passed: bool
    reason: str
    could_flip: bool | None
    unseen_data: bool
    notes: list[str]

    @property
    def summary(self) -> str:
        """The one line ``run`` and ``report`` print: the verdict, its reason and how sure it is."""
        return "; ".join([f"gate {'passed' if self.passed else 'FAILED'}: {self.reason}", *self.notes])
