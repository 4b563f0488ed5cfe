"""The human-scale mean from a few labels: the report's ``estimate`` object (prediction-powered inference).

When some valid cases have no human score, the judge's scores on every case
and the human scores on the labelled ones estimate what the humans would
have said on average, overall and per system (``data.system``), with
intervals (:mod:`geval_spec.analysis.ppi`, PPI++). Each cell reports:

- ``judge_only``: the judge's mean over the cell's valid cases, its scores
  mapped linearly from the rubric scale (0..1 for TCVA verdicts) onto the
  human scale (``data.human_scale``, else the labels' range). Biased
  whenever the judge's scale differs from the raters'.
- ``human_only``: the labels' mean and its interval: the labels alone.
- ``ppi``: the prediction-powered mean and its interval; ``lambda`` is the
  power-tuned weight of the judge (0: the labels alone), ``effective_labels``
  how many labels alone would be as precise, and ``labels_needed`` (with
  ``estimate.target_halfwidth``) how many labels reach that half-width.

Intervals are Student's t intervals on the rectified labels (sample
variances, ``n - 1`` degrees of freedom), at ``estimate.level`` (default
``bootstrap.level``); the t quantile is computed in the standard library
(:mod:`geval_spec.analysis.student_t`). ``differences`` holds the PPI difference ``b - a`` for
every pair of systems; systems are independent samples, so the variances add.

Cases without a valid judgment are left out and counted
(``excluded_invalid``); above 5% of the cases the estimate warns. A cell
with fewer than ``estimate.min_labels`` labels, or with all labels equal,
has no interval and a warning that says why. docs/estimate.md explains the
numbers; docs/estimate-math.md derives them.
"""

from __future__ import annotations

import re
from itertools import combinations
from typing import Any

import numpy as np
from pydantic import Field

from geval_spec.analysis.frame import Frame
from geval_spec.analysis.ppi import (
    REASON_CONSTANT_JUDGE,
    REASON_CONSTANT_LABELS,
    REASON_TOO_FEW_LABELS,
    REASON_ZERO_VARIANCE,
    MeanEstimate,
    difference,
    ppi_mean,
)
from geval_spec.analysis.result_base import Interval, Result, rounded
from geval_spec.analysis.student_t import t_quantile
from geval_spec.spec.sections import Spec

__all__ = ["EstimateBlock", "EstimateCell", "EstimateDifference", "JudgeOnly", "estimate", "student_t"]

METHOD = "ppi++"
INVALID_WARN_SHARE = 0.05  # above this share of cases without a valid judgment, the estimate warns


class JudgeOnly(Result):
    value: float | None


class EstimateCell(Result):
    """One cell (all cases, or one system): the three estimates and what the judge added."""

    OMIT_IF_NONE = frozenset({"labels_needed"})
    labelled: int
    unlabelled: int
    judge_only: JudgeOnly
    human_only: Interval
    ppi: Interval
    lam: float | None = Field(serialization_alias="lambda")
    effective_labels: float | None
    labels_needed: int | None = None


class EstimateDifference(Result):
    """The PPI difference ``b - a`` of two systems' means, with its interval."""

    a: str
    b: str
    value: float | None
    ci_low: float | None
    ci_high: float | None


class EstimateBlock(Result):
    """The report's ``estimate`` object (present only when some valid case is unlabelled)."""

    OMIT_IF_NONE = frozenset({"target_halfwidth", "systems", "differences"})
    method: str
    level: float
    min_labels: int
    target_halfwidth: float | None = None
    scale: tuple[float, float]  # the human scale every value is on
    labelled: int
    unlabelled: int
    excluded_invalid: int
    overall: EstimateCell
    systems: dict[str, EstimateCell] | None = None
    differences: list[EstimateDifference] | None = None
    warnings: list[str]


def student_t(level: float, df: int) -> float:
    """The two-sided critical value of Student's t with ``df`` degrees of freedom at ``level``."""
    return t_quantile(level, df)


def _natural(name: str) -> tuple[Any, ...]:
    """Sort key putting system '2' before '10'."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def judge_on_human_scale(frame: Frame) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The judge's scores mapped linearly from the rubric scale onto the human scale (NaN where not valid)."""
    lo, hi = frame.human_scale
    out: np.ndarray[Any, np.dtype[np.float64]] = lo + frame.norm_score() * (hi - lo)
    return out


def _cell(y: np.ndarray[Any, Any], f: np.ndarray[Any, Any], labelled: np.ndarray[Any, Any], spec: Spec,
          level: float) -> tuple[EstimateCell, MeanEstimate]:
    settings = spec.estimate
    min_labels = settings.min_labels if settings is not None else 10
    est = ppi_mean(y[labelled], f[labelled], f[~labelled], level=level, min_labels=min_labels, t_quantile=student_t)
    target = settings.target_halfwidth if settings is not None else None
    needed = est.labels_needed(target) if target is not None and est.std_error is not None else None
    h = est.human_only
    cell = EstimateCell(
        labelled=int(labelled.sum()), unlabelled=int((~labelled).sum()),
        judge_only=JudgeOnly(value=rounded(est.judge_only)),
        human_only=Interval(value=rounded(h.value), ci_low=rounded(h.ci_low), ci_high=rounded(h.ci_high)),
        ppi=Interval(value=rounded(est.value), ci_low=rounded(est.ci_low), ci_high=rounded(est.ci_high)),
        lam=rounded(est.lam), effective_labels=rounded(est.effective_labels, 1), labels_needed=needed)
    return cell, est


def _warnings(cells: list[tuple[str, MeanEstimate, np.ndarray[Any, Any]]], min_labels: int) -> list[str]:
    """Why cells have no interval: one warning for all the cells with too few labels, one per other cell."""
    out: list[str] = []
    few = [f"{where} ({est.n_labelled})" for where, est, _ in cells if est.reason == REASON_TOO_FEW_LABELS]
    if few:
        out.append(f"estimate: fewer than estimate.min_labels ({min_labels}) labelled cases, so no interval, for "
                   f"{', '.join(few)}; label more cases at random (geval-spec label-sample)")
    for where, est, y in cells:
        if est.reason == REASON_CONSTANT_LABELS:
            out.append(f"estimate, {where}: all {est.n_labelled} labels are equal ({float(y[0]):g}), so their "
                       "spread cannot be estimated: no interval; label more cases")
        elif est.reason == REASON_CONSTANT_JUDGE:
            out.append(f"estimate, {where}: the judge gave every case the same score, so it tells the cases "
                       "nothing apart: no PPI interval (the human-only one stands)")
        elif est.reason == REASON_ZERO_VARIANCE:
            out.append(f"estimate, {where}: the estimated variance is exactly 0: no interval")
    return out


def estimate(frame: Frame, spec: Spec) -> EstimateBlock | None:
    """The ``estimate`` object of a report, or None when every valid case is labelled."""
    valid = ~np.isnan(frame.score)
    has_label = ~np.isnan(frame.human)
    if not (valid & ~has_label).any():
        return None
    settings = spec.estimate
    level = settings.level if settings is not None and settings.level is not None else spec.bootstrap.level
    f_all, y_all = judge_on_human_scale(frame), np.asarray(frame.human, dtype=float)
    keep = np.flatnonzero(valid)
    y, f, labelled = y_all[keep], f_all[keep], has_label[keep]
    warnings: list[str] = []
    excluded = frame.n - int(keep.size)
    if frame.n and excluded / frame.n > INVALID_WARN_SHARE:
        warnings.append(f"estimate: {excluded} of {frame.n} cases ({excluded / frame.n:.1%}) have no valid "
                        "judgment and are left out; failures are rarely random, so the estimate may be biased")
    overall, overall_est = _cell(y, f, labelled, spec, level)
    reasons = [("all cases", overall_est, y[labelled])]
    systems: dict[str, EstimateCell] | None = None
    differences: list[EstimateDifference] | None = None
    if spec.data.system is not None:
        names = np.asarray([str(s) for s in frame.systems], dtype=object)[keep]
        systems, ests = {}, {}
        for name in sorted(set(names.tolist()), key=_natural):
            mask = names == name
            systems[name], ests[name] = _cell(y[mask], f[mask], labelled[mask], spec, level)
            reasons.append((f"system {name}", ests[name], y[mask & labelled]))
        differences = []
        for a, b in combinations(systems, 2):
            d = difference(ests[a], ests[b])
            differences.append(EstimateDifference(a=a, b=b, value=rounded(d.value), ci_low=rounded(d.ci_low),
                                                  ci_high=rounded(d.ci_high)))
    min_labels = settings.min_labels if settings is not None else 10
    warnings += _warnings(reasons, min_labels)
    return EstimateBlock(
        method=METHOD, level=level, min_labels=min_labels,
        target_halfwidth=settings.target_halfwidth if settings is not None else None,
        scale=(float(frame.human_scale[0]), float(frame.human_scale[1])),
        labelled=int(labelled.sum()), unlabelled=int((~labelled).sum()), excluded_invalid=excluded,
        overall=overall, systems=systems, differences=differences, warnings=warnings)
