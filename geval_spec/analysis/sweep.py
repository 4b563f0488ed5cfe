"""The TCVA temperature sweep: re-aggregate stored verdicts at many temperatures, choose on dev, measure on test.

Only the aggregation depends on the temperature, so the sweep sends nothing:
every temperature is a re-aggregation of the same stored verdicts
(:func:`geval_spec.judge.tcva.tcva_matrix`, vectorised).

The chosen temperature is always measured on ``test``, which shares no case
with dev, whatever split the gate is judged on (``all`` contains dev, and
``dev`` is where the choice was made). Without test cases it is not measured.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from geval_spec.analysis.correlation import Difference, Estimate, paired_difference
from geval_spec.analysis.frame import (
    Array,
    Findings,
    Frame,
    Source,
    build_frame,
    levels_present,
    penalty_cut,
    rescore_verdicts,
    splits_present,
)
from geval_spec.analysis.gate import level_result, units_of
from geval_spec.analysis.resolve import Loaded
from geval_spec.analysis.results import Interval, SweepBlock, SweepReport, SweepRow, SweepTest, rounded
from geval_spec.dataset.cases import Dataset
from geval_spec.errors import InputError, Problem
from geval_spec.judge.tcva import temperature_to_p
from geval_spec.judge.types import Judgment
from geval_spec.spec.sections import Spec
from geval_spec.values import frozen


MEASURED_ON = "test"  # never the gate's split when that is all (it contains dev) or dev


def default_grid() -> list[float]:
    return [round(0.1 + 0.05 * k, 2) for k in range(19)]


def _rescored(frame: Frame, judgments: Sequence[Judgment], spec: Spec, temperatures: Sequence[float],
              findings: Findings | None) -> dict[float, Array]:
    """The frame's scores at each temperature, re-aggregated from the stored verdicts."""
    in_frame = set(frame.ids)
    js = [j for j in judgments if j.case_id in in_frame]
    scores = rescore_verdicts(js, spec, temperatures)  # [T, judgment]
    position = {j.case_id: k for k, j in enumerate(js)}
    order = np.asarray([position.get(cid, -1) for cid in frame.ids])
    cut, floor = penalty_cut(spec, frame.ids, findings)
    out = {}
    for k, t in enumerate(temperatures):
        s = np.where(order >= 0, scores[k][np.maximum(order, 0)], np.nan)
        out[t] = np.maximum(s - cut, floor) if cut is not None else s
    return out


@frozen
class Choice:
    """Which temperature is kept, and the evidence on dev."""

    chosen: float | None
    told_apart: bool | None  # None: the best is the spec's own temperature, or nothing to compare
    own: Estimate  # the spec's temperature on dev, with its interval
    difference: Difference | None  # best - own on dev, paired


def choose(frame: Frame, spec: Spec, level: str, scores: Mapping[float, Array], best: float | None,
           with_ci: bool = True) -> Choice:
    """The best temperature on dev if a paired bootstrap tells it apart from the spec's own, else the spec's own.

    Told apart means: the interval of best - own on dev (every draw resamples
    the same units for both temperatures) lies entirely above 0.
    """
    cal, b = spec.calibration, spec.bootstrap
    own_t = spec.aggregation.temperature
    own = level_result(frame, spec, "dev", level, scores=scores[own_t], with_ci=with_ci,
                       metrics=(cal.metric,)).estimates[cal.metric]
    if best is None or best == own_t:
        return Choice(chosen=best, told_apart=None, own=own, difference=None)
    if own.value is None:  # the spec's temperature gives no correlation on dev: nothing to keep
        return Choice(chosen=best, told_apart=None, own=own, difference=None)
    keep = frame.mask("dev") & ~np.isnan(scores[own_t]) & ~np.isnan(scores[best]) & ~np.isnan(frame.human)
    units, groups = units_of(frame, spec, keep)
    systems = list(np.asarray(frame.systems, dtype=object)[keep]) if level == "system" else None
    d = paired_difference(scores[own_t][keep], scores[best][keep], frame.human[keep], cal.metric, level,
                          units=units, draws=b.draws, seed=b.seed, conf=b.level, groups=groups, systems=systems)
    apart = d.ci_low is not None and d.ci_low > 0
    return Choice(chosen=best if apart else own_t, told_apart=apart, own=own, difference=d)


def sweep(source: Source, run_case_ids: Sequence[str], judgments: Sequence[Judgment],
          grid: Sequence[float] | None = None, dataset: Dataset | None = None,
          with_test_ci: bool = True, findings: Findings | None = None) -> SweepBlock:
    """Evaluate TCVA temperatures on dev, choose there (the spec's own unless the best is told apart), measure on test."""
    spec = source.spec
    grid = list(grid or default_grid())
    own_t = spec.aggregation.temperature
    frame = build_frame(source, run_case_ids, judgments, temperature=grid[0], dataset=dataset)
    scores = _rescored(frame, judgments, spec, grid + ([own_t] if own_t not in grid else []), findings)
    cal = spec.calibration
    level = cal.level if cal.level in levels_present(frame) else "dataset"
    rows = []
    best: tuple[float, float] | None = None
    for t in grid:
        res = level_result(frame, spec, "dev", level, scores=scores[t], with_ci=False, metrics=(cal.metric,))
        value = res.estimates[cal.metric].value
        rows.append(SweepRow(temperature=t, p=rounded(temperature_to_p(t)), dev=rounded(value), dev_n=res.n))
        if value is not None and (best is None or value > best[1] + 1e-12):
            best = (t, value)
    choice = choose(frame, spec, level, scores, best[0] if best else None, with_ci=with_test_ci)
    test = None
    if choice.chosen is not None and MEASURED_ON in splits_present(frame, spec):
        est = level_result(frame, spec, MEASURED_ON, level, scores=scores[choice.chosen],
                           with_ci=with_test_ci, metrics=(cal.metric,)).estimates[cal.metric]
        test = SweepTest(split=MEASURED_ON, value=rounded(est.value), ci_low=rounded(est.ci_low),
                         ci_high=rounded(est.ci_high), n=est.n)
    values = [row.dev for row in rows if row.dev is not None]
    d = choice.difference
    return SweepBlock(
        metric=cal.metric, level=level, chosen_on="dev", measured_on=MEASURED_ON, spec_temperature=own_t,
        best_temperature=best[0] if best else None, chosen_temperature=choice.chosen, told_apart=choice.told_apart,
        dev_range=[min(values), max(values)] if values else None,
        dev_at_spec=Interval(value=rounded(choice.own.value), ci_low=rounded(choice.own.ci_low),
                             ci_high=rounded(choice.own.ci_high)),
        best_minus_spec=Interval(value=rounded(d.diff), ci_low=rounded(d.ci_low), ci_high=rounded(d.ci_high))
        if d is not None else None,
        grid=rows, test=test)


def sweep_report(loaded: Loaded) -> SweepReport:
    """``geval-spec sweep``: the sweep of a loaded run (TCVA verdicts and a dev split are needed)."""
    spec = loaded.source.spec
    if spec.scoring.method != "verdicts":
        raise InputError(problems=[Problem(f"sweep re-aggregates TCVA verdicts; {spec.name} uses method "
                                           f"{spec.scoring.method}")])
    if spec.split is None:
        raise InputError(problems=[Problem(f"sweep chooses the temperature on the dev split; {spec.name} "
                                           "defines no splits",
                                           hint="add split: {by: group, fractions: {dev: 0.5, test: 0.5}}")])
    if all(j.verdicts is None for j in loaded.judgments):
        raise InputError(problems=[Problem(
            f"run {loaded.run.run_id} stores no verdicts (an import of score or error lines): there are no "
            "verdicts to re-aggregate at other temperatures",
            hint="import the verdicts themselves (one 'verdicts' line per case), or run the spec")])
    block = sweep(loaded.source, loaded.case_ids, loaded.judgments, findings=loaded.findings)
    return SweepReport(spec=spec.name, run=loaded.run.run_id, **dict(block))
