"""The TCVA temperature sweep: re-aggregate stored verdicts at many temperatures, choose on dev, measure on test.

Only the aggregation depends on the temperature, so the sweep sends nothing:
every temperature is a re-aggregation of the same stored verdicts
(:func:`geval_spec.judge.tcva.tcva_matrix`, vectorised).

The chosen temperature is always measured on ``test``, which shares no case
with dev, whatever split the gate is judged on (``all`` contains dev, and
``dev`` is where the choice was made). Without test cases it is not measured.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from geval_spec.analysis.frame import (
    Findings,
    Source,
    build_frame,
    levels_present,
    penalty_cut,
    rescore_verdicts,
    splits_present,
)
from geval_spec.analysis.gate import level_result
from geval_spec.analysis.resolve import Loaded
from geval_spec.analysis.results import SweepBlock, SweepReport, SweepRow, SweepTest, rounded
from geval_spec.dataset.cases import Dataset
from geval_spec.errors import InputError, Problem
from geval_spec.judge.tcva import temperature_to_p
from geval_spec.judge.types import Judgment


MEASURED_ON = "test"  # never the gate's split when that is all (it contains dev) or dev


def default_grid() -> list[float]:
    return [round(0.1 + 0.05 * k, 2) for k in range(19)]


def sweep(source: Source, run_case_ids: Sequence[str], judgments: Sequence[Judgment],
          grid: Sequence[float] | None = None, dataset: Dataset | None = None,
          with_test_ci: bool = True, findings: Findings | None = None) -> SweepBlock:
    """Evaluate TCVA temperatures on dev, choose the best there, report it on test."""
    spec = source.spec
    grid = list(grid or default_grid())
    frame = build_frame(source, run_case_ids, judgments, temperature=grid[0], dataset=dataset)
    cal = spec.calibration
    level = cal.level if cal.level in levels_present(frame) else "dataset"
    in_frame = set(frame.ids)
    js = [j for j in judgments if j.case_id in in_frame]
    scores = rescore_verdicts(js, spec, grid)  # [T, judgment]
    position = {j.case_id: k for k, j in enumerate(js)}
    order = np.asarray([position.get(cid, -1) for cid in frame.ids])
    cut, floor = penalty_cut(spec, frame.ids, findings)
    rows = []
    best: tuple[float, float] | None = None
    per_t = []
    for k, t in enumerate(grid):
        s = np.where(order >= 0, scores[k][np.maximum(order, 0)], np.nan)
        if cut is not None:
            s = np.maximum(s - cut, floor)
        per_t.append(s)
        res = level_result(frame, spec, "dev", level, scores=s, with_ci=False, metrics=(cal.metric,))
        value = res.estimates[cal.metric].value
        rows.append(SweepRow(temperature=t, p=rounded(temperature_to_p(t)), dev=rounded(value), dev_n=res.n))
        if value is not None and (best is None or value > best[1] + 1e-12):
            best = (t, value)
    chosen = best[0] if best else None
    test = None
    if chosen is not None and MEASURED_ON in splits_present(frame, spec):
        est = level_result(frame, spec, MEASURED_ON, level, scores=per_t[grid.index(chosen)],
                           with_ci=with_test_ci, metrics=(cal.metric,)).estimates[cal.metric]
        test = SweepTest(split=MEASURED_ON, value=rounded(est.value), ci_low=rounded(est.ci_low),
                         ci_high=rounded(est.ci_high), n=est.n)
    return SweepBlock(metric=cal.metric, level=level, chosen_on="dev", measured_on=MEASURED_ON,
                      chosen_temperature=chosen, grid=rows, test=test)


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
    block = sweep(loaded.source, loaded.case_ids, loaded.judgments, findings=loaded.findings)
    return SweepReport(spec=spec.name, run=loaded.run.run_id, **dict(block))
