"""Stage: stored judgments + the spec's analysis settings -> calibration results.

Everything here is computed from what the store already holds; nothing is
sent to a judge. A :class:`Frame` lines up one row per case of the run: its
group, system, category and split (from the *current* analysis settings),
its human score, the judge's score (re-aggregated from stored TCVA verdicts
at the requested temperature, or a panel's ensemble) and whether the
judgment is valid, invalid or missing.

Invalid and missing judgments stay in the case counts and the validity rate.
Correlations can only use cases with both a valid score and a human score;
their ``n`` says how many that was, and the gate also requires the spec's
minimum validity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .data import Case, Dataset, load_dataset
from .errors import Problem
from .model import Spec
from .scoring import Judgment
from .splits import assign_splits
from .stats import METRICS, Estimate, bootstrap, point
from .tcva import DEFAULT_WEIGHTS, tcva_matrix

SPLIT_NAMES = ("all", "examples", "dev", "test")


@dataclass(frozen=True)
class Source:
    """What an analysis reads: the spec whose analysis settings apply, the run, the data."""

    spec: Spec
    run_id: str
    judging_fp: str
    analysis_fp: str
    data_path: Path
    data_display: str
    run_data_sha256: str | None = None
    run_judges: tuple[str, ...] = ()
    key_problem: Callable[[tuple, str], Problem] | None = None

    def problem(self, path: tuple, message: str) -> Problem:
        if self.key_problem is not None:
            return self.key_problem(path, message)
        return Problem(message, key=".".join(map(str, path)) or None)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Frame:
    ids: tuple[str, ...]
    groups: tuple[str | None, ...]
    systems: tuple[str | None, ...]
    categories: tuple[str | None, ...]
    families: tuple[str | None, ...]
    splits: tuple[str | None, ...]
    human: np.ndarray  # mean of the raters present, NaN when none
    raters: np.ndarray  # cases x rater columns, NaN where missing
    score: np.ndarray  # judge (or panel ensemble) score, NaN unless valid
    status: tuple[str, ...]  # valid | invalid | missing
    reasons: tuple[str | None, ...]
    lengths: np.ndarray  # words in the candidate
    texts: tuple[str, ...]  # the candidate, for tables of cases
    judge_scores: Mapping[str, np.ndarray] = field(default_factory=dict)
    judge_status: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    scale: tuple[float, float] = (0.0, 1.0)
    human_scale: tuple[float, float] = (0.0, 1.0)
    temperature: float | None = None
    warnings: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.ids)

    def mask(self, split: str) -> np.ndarray:
        if split == "all":
            return np.ones(self.n, dtype=bool)
        return np.asarray([s == split for s in self.splits], dtype=bool)

    def usable(self, split: str = "all") -> np.ndarray:
        return self.mask(split) & ~np.isnan(self.score) & ~np.isnan(self.human)

    def norm_score(self) -> np.ndarray:
        lo, hi = self.scale
        return (self.score - lo) / (hi - lo) if hi > lo else self.score

    def norm_human(self) -> np.ndarray:
        lo, hi = self.human_scale
        return (self.human - lo) / (hi - lo) if hi > lo else self.human


def candidate_field(spec: Spec) -> str:
    return "candidate" if "candidate" in spec.data.fields else next(iter(spec.data.fields))


def rescore_verdicts(judgments: Sequence[Judgment], spec: Spec, temperatures: Sequence[float]) -> np.ndarray:
    """TCVA scores [temperature, judgment] from stored verdicts; NaN where invalid."""
    agg = spec.aggregation
    weights = agg.weights.model_dump() if agg is not None else DEFAULT_WEIGHTS
    idx, w = [], []
    for i, j in enumerate(judgments):
        for v in j.verdicts or ():
            idx.append(i)
            w.append(weights[v.verdict])
    scores = tcva_matrix(np.asarray(idx, dtype=np.int64), np.asarray(w, dtype=float), len(judgments),
                         list(temperatures), none_penalty=agg.none_penalty)
    empty_value = {"invalid": math.nan, "zero": 0.0, "one": 1.0}[agg.on_empty]
    for i, j in enumerate(judgments):
        if j.verdicts is None:
            scores[:, i] = math.nan
        elif len(j.verdicts) == 0:
            scores[:, i] = empty_value
    return scores


def penalty_cut(spec: Spec, ids: Sequence[str],
                findings: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> tuple[np.ndarray | None, float]:
    """``language.penalty``: score to subtract per case (None when nothing applies), and the scale's floor."""
    penalty = dict(spec.language.penalty) if spec.language is not None else {}
    lo = float(spec.rubric.scale.min) if spec.rubric is not None and spec.scoring.method != "verdicts" else 0.0
    if not penalty or not findings:
        return None, lo
    cut = np.asarray([sum(penalty.get(f["kind"], 0.0) for f in findings.get(cid, ())) for cid in ids], dtype=float)
    return (cut if cut.any() else None), lo


def build_frame(source: Source, run_case_ids: Sequence[str], judgments: Sequence[Judgment],
                temperature: float | None = None, dataset: Dataset | None = None,
                findings: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Frame:
    spec = source.spec
    if dataset is None:
        dataset = load_dataset(spec, source.data_path, source.data_display, source.problem)
    warnings: list[str] = []
    if source.run_data_sha256 and dataset.sha256 != source.run_data_sha256:
        warnings.append(f"{source.data_display} changed since run {source.run_id}: human scores, groups and "
                        "splits are read from the current file")
    by_id = dataset.by_id()
    cases: list[Case] = []
    gone = [c for c in run_case_ids if c not in by_id]
    if gone:
        warnings.append(f"{len(gone)} case(s) of the run are no longer in {source.data_display} and are left out")
    cases = [by_id[c] for c in run_case_ids if c in by_id]
    splits = assign_splits(spec, tuple(cases))
    method = spec.scoring.method
    t = temperature if temperature is not None else (spec.aggregation.temperature if method == "verdicts" else None)

    judges = list(dict.fromkeys(j.judge for j in judgments)) or list(source.run_judges)
    per_judge: dict[str, dict[str, Judgment]] = {name: {} for name in judges}
    for j in judgments:
        per_judge[j.judge][j.case_id] = j
    index = {c.id: i for i, c in enumerate(cases)}
    judge_scores: dict[str, np.ndarray] = {}
    judge_status: dict[str, tuple[str, ...]] = {}
    judge_reasons: dict[str, list[str | None]] = {}
    for name in judges:
        scores = np.full(len(cases), np.nan)
        status = ["missing"] * len(cases)
        reasons: list[str | None] = ["no judgment"] * len(cases)
        found = [per_judge[name][c.id] for c in cases if c.id in per_judge[name]]
        verdict_scores = None
        if any(j.method == "verdicts" for j in found):
            verdict_scores = rescore_verdicts(found, spec, [t if t is not None else 0.5])[0]
        for k, j in enumerate(found):
            i = index[j.case_id]
            if j.method == "verdicts" and verdict_scores is not None and j.verdicts is not None:
                value = verdict_scores[k]
                if math.isnan(value):
                    status[i], reasons[i] = "invalid", j.reason or "no statements (aggregation.on_empty: invalid)"
                else:
                    scores[i], status[i], reasons[i] = value, "valid", None
            elif j.valid and j.score is not None:
                scores[i], status[i], reasons[i] = j.score, "valid", None
            else:
                status[i], reasons[i] = "invalid", j.reason or "invalid"
        judge_scores[name] = _frozen(scores)
        judge_status[name] = tuple(status)
        judge_reasons[name] = reasons

    if len(judges) == 1:
        name = judges[0]
        score = judge_scores[name]
        status = judge_status[name]
        reasons = tuple(judge_reasons[name])
    else:
        stack = np.vstack([judge_scores[n] for n in judges]) if judges else np.full((1, len(cases)), np.nan)
        with np.errstate(all="ignore"):
            import warnings as _w

            with _w.catch_warnings():
                _w.simplefilter("ignore", RuntimeWarning)
                score = (np.nanmedian(stack, axis=0) if spec.ensemble == "median" else np.nanmean(stack, axis=0))
        status_l, reasons_l = [], []
        for i in range(len(cases)):
            states = [judge_status[n][i] for n in judges]
            if "valid" in states:
                status_l.append("valid")
                reasons_l.append(None)
            elif all(s == "missing" for s in states):
                status_l.append("missing")
                reasons_l.append("no judgment")
            else:
                status_l.append("invalid")
                reasons_l.append("; ".join(f"{n}: {judge_reasons[n][i]}" for n in judges))
        status, reasons = tuple(status_l), tuple(reasons_l)
        score = _frozen(np.asarray(score, dtype=float))

    cut, lo = penalty_cut(spec, [c.id for c in cases], findings)
    if cut is not None:
        score = _frozen(np.maximum(np.asarray(score) - cut, lo))
        judge_scores = {n: _frozen(np.maximum(np.asarray(v) - cut, lo)) for n, v in judge_scores.items()}
    humans = np.asarray([[np.nan if h is None else h for h in c.human] for c in cases], dtype=float).reshape(
        len(cases), -1)
    with np.errstate(all="ignore"):
        import warnings as _w

        with _w.catch_warnings():
            _w.simplefilter("ignore", RuntimeWarning)
            human = np.nanmean(humans, axis=1) if humans.size else np.full(len(cases), np.nan)
    cand = candidate_field(spec)
    texts = tuple(c.fields.get(cand, "") for c in cases)
    lengths = np.asarray([len(t.split()) for t in texts], dtype=float)
    if spec.rubric is not None and method != "verdicts":
        scale = (float(spec.rubric.scale.min), float(spec.rubric.scale.max))
    else:
        scale = (0.0, 1.0)
    if spec.data.human_scale is not None:
        hscale = (spec.data.human_scale.min, spec.data.human_scale.max)
    else:
        finite = human[~np.isnan(human)]
        hscale = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    return Frame(
        ids=tuple(c.id for c in cases), groups=tuple(c.group for c in cases),
        systems=tuple(c.system for c in cases), categories=tuple(c.category for c in cases),
        families=tuple(c.family for c in cases), splits=tuple(splits[c.id] for c in cases),
        human=_frozen(np.asarray(human, dtype=float)), raters=_frozen(humans), score=score, status=status,
        reasons=reasons, lengths=_frozen(lengths), texts=texts, judge_scores=judge_scores,
        judge_status=judge_status, scale=scale, human_scale=hscale, temperature=t, warnings=tuple(warnings))


# -- calibration --------------------------------------------------------------------------
@dataclass(frozen=True)
class LevelResult:
    estimates: Mapping[str, Estimate]  # metric -> estimate
    n: int
    skipped: int = 0


@dataclass(frozen=True)
class Gate:
    metric: str
    level: str
    split: str
    threshold: float
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    validity: float
    min_validity: float
    passed: bool
    reason: str


def splits_present(frame: Frame, spec: Spec) -> list[str]:
    out = ["all"]
    if spec.split is not None:
        for name in ("dev", "test"):
            if any(s == name for s in frame.splits):
                out.append(name)
    return out


def levels_present(frame: Frame) -> list[str]:
    out = ["dataset"]
    if any(g is not None for g in frame.groups):
        out.append("group")
    if len({s for s in frame.systems if s is not None}) >= 3:
        out.append("system")
    return out


def level_result(frame: Frame, spec: Spec, split: str, level: str, scores: np.ndarray | None = None,
                 with_ci: bool = True, metrics: Sequence[str] = METRICS) -> LevelResult:
    score = frame.score if scores is None else scores
    keep = frame.mask(split) & ~np.isnan(score) & ~np.isnan(frame.human)
    x, y = score[keep], frame.human[keep]
    groups = [g if g is not None else i for g, i in zip(np.asarray(frame.groups, dtype=object)[keep],
                                                         np.asarray(frame.ids, dtype=object)[keep])]
    systems = list(np.asarray(frame.systems, dtype=object)[keep]) if level == "system" else None
    ids = list(np.asarray(frame.ids, dtype=object)[keep])
    b = spec.bootstrap
    units = groups if (b.unit == "group" and any(g is not None for g in frame.groups)) else ids
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


def validity(frame: Frame, split: str = "all") -> tuple[int, int, int, int, float]:
    mask = frame.mask(split)
    st = [s for s, m in zip(frame.status, mask) if m]
    n = len(st)
    valid = st.count("valid")
    invalid = st.count("invalid")
    missing = st.count("missing")
    return n, valid, invalid, missing, (valid / n if n else 0.0)


def gate(frame: Frame, spec: Spec, corr: Mapping[str, Mapping[str, LevelResult]]) -> Gate:
    cal = spec.calibration
    n, valid, _, _, rate = validity(frame, cal.split if cal.split in corr else "all")
    level = corr.get(cal.split, {}).get(cal.level)
    if level is None:
        why = (f"split {cal.split!r} has no cases" if cal.split not in corr else
               f"level {cal.level!r} is not available (data.{cal.level} missing or too few systems)")
        return Gate(cal.metric, cal.level, cal.split, cal.threshold, None, None, None, 0, rate, cal.min_validity,
                    False, why)
    est = level.estimates[cal.metric]
    if est.value is None:
        return Gate(cal.metric, cal.level, cal.split, cal.threshold, None, None, None, level.n, rate,
                    cal.min_validity, False, "the correlation is undefined (too few cases or a constant side)")
    passed_corr = est.value >= cal.threshold
    passed_valid = rate >= cal.min_validity
    if passed_corr and passed_valid:
        reason = f"{cal.metric} {est.value:.3f} >= {cal.threshold} and validity {rate:.3f} >= {cal.min_validity}"
    elif not passed_corr:
        reason = f"{cal.metric} {est.value:.3f} < threshold {cal.threshold}"
    else:
        reason = f"validity {rate:.3f} < min_validity {cal.min_validity}"
    return Gate(cal.metric, cal.level, cal.split, cal.threshold, est.value, est.ci_low, est.ci_high, level.n, rate,
                cal.min_validity, passed_corr and passed_valid, reason)


def gate_only(source: Source, run_case_ids: Sequence[str], judgments: Sequence[Judgment],
              findings: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Gate:
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


# -- TCVA temperature sweep ------------------------------------------------------------------
@dataclass(frozen=True)
class SweepRow:
    temperature: float
    p: float
    dev: float | None
    dev_n: int


@dataclass(frozen=True)
class Sweep:
    metric: str
    level: str
    rows: tuple[SweepRow, ...]
    chosen: float | None
    test: Estimate | None
    test_split: str


def default_grid() -> list[float]:
    return [round(0.1 + 0.05 * k, 2) for k in range(19)]


def sweep(source: Source, run_case_ids: Sequence[str], judgments: Sequence[Judgment],
          grid: Sequence[float] | None = None, dataset: Dataset | None = None,
          with_test_ci: bool = True, findings: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Sweep:
    """Evaluate TCVA temperatures on dev, choose the best there, report it on test."""
    from .tcva import temperature_to_p

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
        rows.append(SweepRow(temperature=t, p=temperature_to_p(t), dev=value, dev_n=res.n))
        if value is not None and (best is None or value > best[1] + 1e-12):
            best = (t, value)
    chosen = best[0] if best else None
    test = None
    if chosen is not None:
        s = per_t[grid.index(chosen)]
        test = level_result(frame, spec, cal.split if cal.split != "dev" else "test", level, scores=s,
                            with_ci=with_test_ci, metrics=(cal.metric,)).estimates[cal.metric]
    return Sweep(metric=cal.metric, level=level, rows=tuple(rows), chosen=chosen, test=test,
                 test_split=cal.split if cal.split != "dev" else "test")
