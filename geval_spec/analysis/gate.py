"""Correlations per split and level, and the gate: is the judge good enough on data not used for tuning?

The gate compares the calibration metric at the calibration level and split
with the threshold, and also requires the spec's minimum validity (invalid
output stays in the denominator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from geval_spec.analysis.correlation import METRICS, Estimate, bootstrap, point
from geval_spec.analysis.frame import (
    Array,
    Findings,
    Frame,
    Source,
    build_frame,
    counts,
    levels_present,
    splits_present,
)
from geval_spec.analysis.resolve import load
from geval_spec.analysis.results import GateBlock, rounded
from geval_spec.judge.types import Judgment
from geval_spec.spec.project import Project
from geval_spec.spec.sections import Spec
from geval_spec.store.db import Store


@dataclass(frozen=True)
class LevelResult:
    estimates: Mapping[str, Estimate]  # metric -> estimate
    n: int
    skipped: int = 0


def units_of(frame: Frame, spec: Spec, keep: np.ndarray) -> tuple[list[object], list[object]]:
    """(resampling units, groups) of the kept cases: a case without a group is its own group."""
    groups = [g if g is not None else i for g, i in zip(np.asarray(frame.groups, dtype=object)[keep],
                                                         np.asarray(frame.ids, dtype=object)[keep])]
    ids = list(np.asarray(frame.ids, dtype=object)[keep])
    by_group = spec.bootstrap.unit == "group" and any(g is not None for g in frame.groups)
    return (groups if by_group else ids), groups


def level_result(frame: Frame, spec: Spec, split: str, level: str, scores: Array | None = None,
                 with_ci: bool = True, metrics: Sequence[str] = METRICS) -> LevelResult:
    score = frame.score if scores is None else scores
    keep = frame.mask(split) & ~np.isnan(score) & ~np.isnan(frame.human)
    x, y = score[keep], frame.human[keep]
    units, groups = units_of(frame, spec, keep)
    systems = list(np.asarray(frame.systems, dtype=object)[keep]) if level == "system" else None
    b = spec.bootstrap
    estimates = {}
    n = skipped = 0
    for metric in metrics:
        if with_ci:
            est = bootstrap(x, y, metric, level, units=units, draws=b.draws, seed=b.seed, conf=b.level,
                            groups=groups, systems=systems)
        else:
            value, n_, sk = point(x, y, metric, level, groups, systems)
            est = Estimate(value if math.isfinite(value) else None, None, None, n_, sk)
        estimates[metric] = est
        n, skipped = est.n, est.skipped
    return LevelResult(estimates=estimates, n=n, skipped=skipped)


def correlations(frame: Frame, spec: Spec) -> dict[str, dict[str, LevelResult]]:
    return {split: {level: level_result(frame, spec, split, level) for level in levels_present(frame)}
            for split in splits_present(frame, spec)}


def gate(frame: Frame, spec: Spec, corr: Mapping[str, Mapping[str, LevelResult]]) -> GateBlock:
    cal = spec.calibration
    rate = counts(frame, cal.split if cal.split in corr else "all").validity

    def verdict(value: float | None, est: Estimate | None, n: int, passed: bool, reason: str) -> GateBlock:
        return GateBlock(metric=cal.metric, level=cal.level, split=cal.split, threshold=cal.threshold,
                         value=rounded(value), ci_low=rounded(est.ci_low) if est else None,
                         ci_high=rounded(est.ci_high) if est else None, n=n, validity=rounded(rate),
                         min_validity=cal.min_validity, passed=passed, reason=reason)

    level = corr.get(cal.split, {}).get(cal.level)
    if level is None:
        why = (f"split {cal.split!r} has no cases" if cal.split not in corr else
               f"level {cal.level!r} is not available (data.{cal.level} missing or too few systems)")
        return verdict(None, None, 0, False, why)
    est = level.estimates[cal.metric]
    if est.value is None:
        return verdict(None, None, level.n, False, "the correlation is undefined (too few cases or a constant side)")
    passed_corr = est.value >= cal.threshold
    passed_valid = rate >= cal.min_validity
    if passed_corr and passed_valid:
        reason = f"{cal.metric} {est.value:.3f} >= {cal.threshold} and validity {rate:.3f} >= {cal.min_validity}"
    elif not passed_corr:
        reason = f"{cal.metric} {est.value:.3f} < threshold {cal.threshold}"
    else:
        reason = f"validity {rate:.3f} < min_validity {cal.min_validity}"
    return verdict(est.value, est, level.n, passed_corr and passed_valid, reason)


def gate_only(source: Source, run_case_ids: Sequence[str], judgments: Sequence[Judgment],
              findings: Findings | None = None) -> GateBlock:
    """The gate alone: what ``run`` checks at its end.

    Only the gate's metric at its split and level, and only its value: the
    verdict does not depend on the interval, which ``report`` computes.
    """
    spec = source.spec
    frame = build_frame(source, run_case_ids, judgments, findings=findings)
    cal = spec.calibration
    corr: dict[str, dict[str, LevelResult]] = {}
    if cal.split in splits_present(frame, spec) and cal.level in levels_present(frame):
        corr[cal.split] = {cal.level: level_result(frame, spec, cal.split, cal.level, with_ci=False,
                                                   metrics=(cal.metric,))}
    return gate(frame, spec, corr)


def gate_after_run(store: Store, project: Project, run_id: str, run_split: str | None) -> GateBlock | None:
    """The gate of a run just made (its value only), or None when the run does not cover the gate's split."""
    run = store.get_run(run_id)
    if run is None:
        return None
    cal = run.resolved.spec.calibration
    if run_split is not None and run_split not in ("all", cal.split) and cal.split != "all":
        return None
    loaded = load(store, project, run_id)
    return gate_only(loaded.source, loaded.case_ids, loaded.judgments, loaded.findings)
