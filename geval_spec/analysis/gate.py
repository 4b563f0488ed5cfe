"""Correlations per split and level, and the gate: is the judge good enough on data not used for tuning?

The gate compares the calibration metric at the calibration level and split
with the threshold, and also requires the spec's minimum validity (invalid
output stays in the denominator). ``calibration.rule`` says what is compared:
the metric's value (``point``, the default) or the lower end of its
bootstrap interval (``lower_bound``: the gate passes only when the whole
interval clears the threshold). Next to the verdict the gate says when the
interval contains the threshold (it could flip with another sample) and when
it was not judged on unseen data (split ``all``, or ``dev``).
"""

from __future__ import annotations

import math
import os
from typing import Mapping, Sequence

import numpy as np

from geval_spec.analysis.correlation import METRICS, Estimate, bootstrap_metrics, point
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
from geval_spec.analysis.result_base import rounded
from geval_spec.analysis.verdict import GateBlock
from geval_spec.dataset.cases import Dataset
from geval_spec.judge.types import Judgment
from geval_spec.spec.project import Project
from geval_spec.spec.sections import Spec
from geval_spec.store.db import Store
from geval_spec.values import frozen


@frozen
class LevelResult:
    """The estimates of every metric at one level, and the units they rest on."""

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
    shared = bootstrap_metrics(x, y, metrics, level, units=units, draws=b.draws, seed=b.seed, conf=b.level,
                               groups=groups, systems=systems) if with_ci else {}
    for metric in metrics:
        if with_ci:
            est = shared[metric]
        else:
            value, n_, sk = point(x, y, metric, level, groups, systems)
            est = Estimate(value if math.isfinite(value) else None, None, None, n_, sk)
        estimates[metric] = est
        n, skipped = est.n, est.skipped
    return LevelResult(estimates=estimates, n=n, skipped=skipped)


THREADED_FROM = 2_000  # cases from which correlations() bootstraps on two threads


def correlations(frame: Frame, spec: Spec) -> dict[str, dict[str, LevelResult]]:
    """Every split and level's estimates with their bootstrap intervals. Each pair draws from its own generator
    (seeded with bootstrap.seed), so they are computed side by side on two threads, NumPy's work letting the GIL
    go: the same numbers, sooner (a 10,000-case report: BENCHMARKS.md, scale), from THREADED_FROM cases on."""
    pairs = [(split, level) for split in splits_present(frame, spec) for level in levels_present(frame)]

    def one(pair: tuple[str, str]) -> LevelResult:
        return level_result(frame, spec, pair[0], pair[1])

    if len(frame.ids) < THREADED_FROM:  # (a small report's bootstrap is quicker than the threads' start-up)
        results = [one(pair) for pair in pairs]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(2, len(pairs), os.cpu_count() or 1)) as pool:
            results = list(pool.map(one, pairs))
    out: dict[str, dict[str, LevelResult]] = {}
    for (split, level), result in zip(pairs, results):
        out.setdefault(split, {})[level] = result
    return out


def _notes(spec: Spec, est: Estimate | None) -> tuple[bool | None, bool, list[str]]:
    """(could flip, judged on unseen data, the notes that say so)."""
    cal = spec.calibration
    notes = []
    flip = None
    if est is not None and est.ci_low is not None and est.ci_high is not None:
        flip = est.ci_low <= cal.threshold <= est.ci_high
        if flip:
            notes.append(f"could flip with another sample: the interval [{est.ci_low:.3f}, {est.ci_high:.3f}] "
                         f"contains the threshold {cal.threshold}")
    unseen = cal.split == "test"
    if spec.split is None:
        notes.append("not judged on unseen data: the spec defines no splits, so the gate is judged on all cases "
                     "(add split and set calibration.split: test)")
    elif not unseen:
        where = "all includes dev" if cal.split == "all" else "dev is the split tuning chooses on"
        notes.append(f"not judged on unseen data: calibration.split {where} (set calibration.split: test)")
    return flip, unseen, notes


def _verdict(spec: Spec, est: Estimate, rate: float) -> tuple[bool, str]:
    """Pass or fail by the spec's rule, and why."""
    cal = spec.calibration
    if cal.rule == "lower_bound":
        if est.ci_low is None:
            return False, f"rule lower_bound needs the interval of {cal.metric}, and it is undefined"
        compared, what = est.ci_low, f"{cal.metric}'s lower bound"
    else:
        compared, what = float(est.value or 0.0), cal.metric
    passed_corr = compared >= cal.threshold
    passed_valid = rate >= cal.min_validity
    if passed_corr and passed_valid:
        return True, f"{what} {compared:.3f} >= {cal.threshold} and validity {rate:.3f} >= {cal.min_validity}"
    if not passed_corr:
        return False, f"{what} {compared:.3f} < threshold {cal.threshold}"
    return False, f"validity {rate:.3f} < min_validity {cal.min_validity}"


def gate(frame: Frame, spec: Spec, corr: Mapping[str, Mapping[str, LevelResult]]) -> GateBlock:
    cal = spec.calibration
    rate = counts(frame, cal.split if cal.split in corr else "all").validity

    def verdict(est: Estimate | None, n: int, passed: bool, reason: str) -> GateBlock:
        flip, unseen, notes = _notes(spec, est)
        return GateBlock(metric=cal.metric, level=cal.level, split=cal.split, threshold=cal.threshold, rule=cal.rule,
                         value=rounded(est.value) if est else None, ci_low=rounded(est.ci_low) if est else None,
                         ci_high=rounded(est.ci_high) if est else None, n=n, validity=rounded(rate),
                         min_validity=cal.min_validity, passed=passed, reason=reason, could_flip=flip,
                         unseen_data=unseen, notes=notes)

    level = corr.get(cal.split, {}).get(cal.level)
    if level is None:
        why = (f"split {cal.split!r} has no cases" if cal.split not in corr else
               f"level {cal.level!r} is not available (data.{cal.level} missing or too few systems)")
        return verdict(None, 0, False, why)
    est = level.estimates[cal.metric]
    if est.value is None:
        return verdict(None, level.n, False, "the correlation is undefined (too few cases or a constant side)")
    passed, reason = _verdict(spec, est, rate)
    return verdict(est, level.n, passed, reason)


def gate_only(source: Source, run_case_ids: Sequence[str], judgments: Sequence[Judgment],
              findings: Findings | None = None, dataset: Dataset | None = None) -> GateBlock:
    """The gate alone: what ``run`` checks at its end.

    Only the gate's metric at its split and level, and with ``rule: point``
    only its value (the point verdict does not depend on the interval, which
    ``report`` computes, so ``could_flip`` is None); ``rule: lower_bound``
    needs the interval.
    """
    spec = source.spec
    frame = build_frame(source, run_case_ids, judgments, findings=findings, dataset=dataset)
    cal = spec.calibration
    corr: dict[str, dict[str, LevelResult]] = {}
    if cal.split in splits_present(frame, spec) and cal.level in levels_present(frame):
        corr[cal.split] = {cal.level: level_result(frame, spec, cal.split, cal.level,
                                                   with_ci=cal.rule == "lower_bound", metrics=(cal.metric,))}
    return gate(frame, spec, corr)


def gate_after_run(store: Store, project: Project, run_id: str, run_split: str | None,
                   dataset: Dataset | None = None) -> GateBlock | None:
    """The gate of a run just made (its value only), or None when the run does not cover the gate's split.

    ``dataset``: the run's data as the run read it (read again when None); its cases' texts are not needed
    (:meth:`~geval_spec.dataset.cases.Dataset.without_texts`): the gate reads scores, labels, groups and splits.
    """
    run = store.get_run(run_id)
    if run is None:
        return None
    cal = run.resolved.spec.calibration
    if run_split not in (None, "all", cal.split):  # a run of one split covers a gate on all cases no more
        return None
    loaded = load(store, project, run_id, lean=True)
    same = dataset is not None and dataset.sha256 == run.data_sha256
    return gate_only(loaded.source, loaded.case_ids, loaded.judgments, loaded.findings, dataset if same else None)
