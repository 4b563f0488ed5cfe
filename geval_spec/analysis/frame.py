"""Stored judgments + the spec's analysis settings -> a :class:`Frame`, one row per case of the run.

Everything here is computed from what the store already holds; nothing is
sent to a judge. A frame lines up, for every case of the run: its group,
system, category and split (from the *current* analysis settings), its human
score, the judge's score (re-aggregated from stored TCVA verdicts at the
requested temperature, or a panel's ensemble) and whether the judgment is
valid, invalid or missing.

Invalid and missing judgments stay in the case counts and the validity rate.
Correlations can only use cases with both a valid score and a human score.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from geval_spec.dataset.cases import Case, Dataset, load_dataset
from geval_spec.dataset.splits import assign_splits
from geval_spec.errors import Problem
from geval_spec.judge.tcva import DEFAULT_WEIGHTS, tcva_matrix
from geval_spec.judge.types import Judgment
from geval_spec.plugins import Finding
from geval_spec.spec.checks import CASE_RESAMPLING
from geval_spec.spec.sections import Spec
from geval_spec.spec.yamldoc import Path as KeyPath
from geval_spec.values import frozen

Status = Literal["valid", "invalid", "missing"]
Findings = Mapping[str, Sequence[Finding]]
Array = np.ndarray[Any, np.dtype[np.float64]]


@frozen
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
    key_problem: Callable[[KeyPath, str], Problem] | None = None

    def problem(self, path: KeyPath, message: str) -> Problem:
        if self.key_problem is not None:
            return self.key_problem(path, message)
        return Problem(message, key=".".join(map(str, path)) or None)


def _frozen(a: Any) -> Array:
    out: Array = np.asarray(a, dtype=float)
    out.setflags(write=False)
    return out


@frozen
class Frame:
    """A run's cases as columns for analysis: ids, labels, splits, human and judge scores."""

    ids: tuple[str, ...]
    groups: tuple[str | None, ...]
    systems: tuple[str | None, ...]
    categories: tuple[str | None, ...]
    families: tuple[str | None, ...]
    splits: tuple[str | None, ...]
    human: Array  # mean of the raters present, NaN when none
    raters: Array  # cases x rater columns, NaN where missing
    score: Array  # judge (or panel ensemble) score, NaN unless valid
    status: tuple[Status, ...]
    reasons: tuple[str | None, ...]
    lengths: Array  # words in the candidate
    texts: tuple[str, ...]  # the candidate, for tables of cases
    judge_scores: Mapping[str, Array] = field(default_factory=dict)
    judge_status: Mapping[str, tuple[Status, ...]] = field(default_factory=dict)
    scale: tuple[float, float] = (0.0, 1.0)
    human_scale: tuple[float, float] = (0.0, 1.0)
    temperature: float | None = None
    warnings: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.ids)

    def mask(self, split: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
        if split == "all":
            return np.ones(self.n, dtype=bool)
        return np.asarray([s == split for s in self.splits], dtype=bool)

    def usable(self, split: str = "all") -> np.ndarray[Any, np.dtype[np.bool_]]:
        return self.mask(split) & ~np.isnan(self.score) & ~np.isnan(self.human)

    def norm_score(self) -> Array:
        return to_unit(self.score, self.scale)

    def norm_human(self) -> Array:
        return to_unit(self.human, self.human_scale)

    def subset(self, keep: Sequence[int]) -> "Frame":
        """The frame of the cases at positions ``keep`` (panel columns are left out)."""
        def pick(seq: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(seq[i] for i in keep)

        return Frame(ids=pick(self.ids), groups=pick(self.groups), systems=pick(self.systems),
                     categories=pick(self.categories), families=pick(self.families), splits=pick(self.splits),
                     human=_frozen(self.human[list(keep)]), raters=_frozen(self.raters[list(keep)]),
                     score=_frozen(self.score[list(keep)]), status=pick(self.status), reasons=pick(self.reasons),
                     lengths=_frozen(self.lengths[list(keep)]), texts=pick(self.texts), scale=self.scale,
                     human_scale=self.human_scale, temperature=self.temperature, warnings=self.warnings)


def to_unit(values: Array, scale: tuple[float, float]) -> Array:
    """Values on ``scale`` mapped onto 0..1."""
    lo, hi = scale
    out: Array = (values - lo) / (hi - lo) if hi > lo else np.where(np.isnan(values), np.nan, 0.5)
    return out


def nanmean_rows(values: Array) -> Array:
    """Row means ignoring NaN; NaN for rows with no value (without numpy's warning)."""
    if not values.size:
        return np.full(values.shape[0], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out: Array = np.nanmean(values, axis=1)
    return out


def rescore_verdicts(judgments: Sequence[Judgment], spec: Spec, temperatures: Sequence[float]) -> Array:
    """TCVA scores [temperature, judgment] from stored verdicts; NaN where invalid."""
    agg = spec.aggregation
    weights = agg.weights.model_dump() if agg is not None else DEFAULT_WEIGHTS
    idx, w = [], []
    for i, j in enumerate(judgments):
        for v in j.verdicts or ():
            idx.append(i)
            w.append(weights[v.verdict])
    scores: Array = tcva_matrix(np.asarray(idx, dtype=np.int64), np.asarray(w, dtype=float), len(judgments),
                                list(temperatures), none_penalty=agg.none_penalty)
    empty_value = {"invalid": math.nan, "zero": 0.0, "one": 1.0}[agg.on_empty]
    for i, j in enumerate(judgments):
        if j.verdicts is None:
            scores[:, i] = math.nan
        elif len(j.verdicts) == 0:
            scores[:, i] = empty_value
    return scores


def penalty_cut(spec: Spec, ids: Sequence[str], findings: Findings | None) -> tuple[Array | None, float]:
    """``language.penalty``: score to subtract per case (None when nothing applies), and the scale's floor."""
    penalty = dict(spec.language.penalty) if spec.language is not None else {}
    lo = float(spec.rubric.scale.min) if spec.rubric is not None and spec.scoring.method != "verdicts" else 0.0
    if not penalty or not findings:
        return None, lo
    cut = np.asarray([sum(penalty.get(f.kind, 0.0) for f in findings.get(cid, ())) for cid in ids], dtype=float)
    return (cut if cut.any() else None), lo


def min_valid_samples(spec: Spec, drawn: int) -> int:
    """scoring.min_valid_samples, by default half of scoring.samples (else of the samples drawn), rounded up."""
    if spec.scoring.min_valid_samples is not None:
        return spec.scoring.min_valid_samples
    return math.ceil((spec.scoring.samples or drawn) / 2)


def too_few_samples(j: Judgment, spec: Spec) -> str | None:
    """Why a samples judgment is invalid under scoring.min_valid_samples (applied here, at analysis time), or None."""
    if j.method != "samples" or not j.samples:
        return None
    parsed = sum(1 for v in j.samples if v is not None)
    needed = min_valid_samples(spec, len(j.samples))
    if parsed >= needed:
        return None
    if needed > len(j.samples):  # (a judgment made with fewer samples than the spec now asks to parse)
        return f"scoring.min_valid_samples asks for {needed} parsed samples; this judgment has {len(j.samples)}"
    return f"fewer than {needed} of {len(j.samples)} samples parsed (scoring.min_valid_samples)"


@frozen
class _Column:
    """One judge's scores, statuses and reasons over the frame's cases."""

    scores: Array
    status: tuple[Status, ...]
    reasons: tuple[str | None, ...]


def _judge_column(found: Sequence[Judgment], index: Mapping[str, int], n: int, spec: Spec,
                  temperature: float | None) -> _Column:
    scores = np.full(n, np.nan)
    status: list[Status] = ["missing"] * n
    reasons: list[str | None] = ["no judgment"] * n
    verdict_scores = None
    if any(j.method == "verdicts" for j in found):
        verdict_scores = rescore_verdicts(found, spec, [temperature if temperature is not None else 0.5])[0]
    for k, j in enumerate(found):
        i = index[j.case_id]
        if j.method == "verdicts" and verdict_scores is not None and j.verdicts is not None:
            value = verdict_scores[k]
            if math.isnan(value):
                status[i], reasons[i] = "invalid", j.reason or "no statements (aggregation.on_empty: invalid)"
            else:
                scores[i], status[i], reasons[i] = value, "valid", None
        elif j.valid and j.score is not None and (short := too_few_samples(j, spec)) is not None:
            status[i], reasons[i] = "invalid", short
        elif j.valid and j.score is not None:
            scores[i], status[i], reasons[i] = j.score, "valid", None
        else:
            status[i], reasons[i] = "invalid", j.reason or "invalid"
    return _Column(_frozen(scores), tuple(status), tuple(reasons))


def _ensemble(columns: Mapping[str, _Column], n: int, how: str) -> _Column:
    """A panel's score per case (mean or median of its valid judges) and status."""
    names = list(columns)
    stack = np.vstack([columns[name].scores for name in names]) if names else np.full((1, n), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        score = np.nanmedian(stack, axis=0) if how == "median" else np.nanmean(stack, axis=0)
    status: list[Status] = []
    reasons: list[str | None] = []
    for i in range(n):
        states = [columns[name].status[i] for name in names]
        if "valid" in states:
            status.append("valid")
            reasons.append(None)
        elif all(s == "missing" for s in states):
            status.append("missing")
            reasons.append("no judgment")
        else:
            status.append("invalid")
            reasons.append("; ".join(f"{name}: {columns[name].reasons[i]}" for name in names))
    return _Column(_frozen(score), tuple(status), tuple(reasons))


def _cases_of(source: Source, run_case_ids: Sequence[str], dataset: Dataset) -> tuple[list[Case], list[str]]:
    notes = []
    if source.run_data_sha256 and dataset.sha256 != source.run_data_sha256:
        notes.append(f"{source.data_display} changed since run {source.run_id}: human scores, groups and "
                     "splits are read from the current file")
    by_id = dataset.by_id()
    gone = [c for c in run_case_ids if c not in by_id]
    if gone:
        notes.append(f"{len(gone)} case(s) of the run are no longer in {source.data_display} and are left out")
    return [by_id[c] for c in run_case_ids if c in by_id], notes


def _human_scale(spec: Spec, human: Array, scale: tuple[float, float], notes: list[str]) -> tuple[float, float]:
    """``data.human_scale``, else the labels' range; when every label is the same (no range), the judge's scale
    if it holds that value, else one unit around it; without any label, the judge's scale (a note says so in
    both cases): mapped onto 0..1 raw values were kept."""
    if spec.data.human_scale is not None:
        return (spec.data.human_scale.min, spec.data.human_scale.max)
    finite = human[~np.isnan(human)]
    if not finite.size:  # (was 0..1, which no one had said: a judge mean of 3 on 1..5 read as 0.5)
        notes.append(f"no case has a human score and data.human_scale is not set: the human scale is taken as the "
                     f"judge's, {scale[0]:g}..{scale[1]:g}; set data.human_scale to say which scale labels will be on")
        return scale
    lo, hi = float(finite.min()), float(finite.max())
    if hi > lo:
        return (lo, hi)
    fallback = scale if scale[0] <= lo <= scale[1] else (lo - 0.5, hi + 0.5)
    notes.append(f"every human score is {lo:g} and data.human_scale is not set: human scores are placed on "
                 f"{fallback[0]:g}..{fallback[1]:g}; set data.human_scale to say which scale they are on")
    return fallback


def build_frame(source: Source, run_case_ids: Sequence[str], judgments: Sequence[Judgment],
                temperature: float | None = None, dataset: Dataset | None = None,
                findings: Findings | None = None) -> Frame:
    spec = source.spec
    if dataset is None:
        dataset = load_dataset(spec, source.data_path, source.data_display, source.problem)
    cases, notes = _cases_of(source, run_case_ids, dataset)
    splits = assign_splits(spec, tuple(cases))
    method = spec.scoring.method
    t = temperature if temperature is not None else (spec.aggregation.temperature if method == "verdicts" else None)
    if temperature is not None and method == "verdicts" and all(j.verdicts is None for j in judgments):
        notes.append(f"--temperature {temperature:g} changes nothing here: this run stores no verdicts "
                     "(an import of score or error lines), and its scores are reported as stored")
    judges = list(dict.fromkeys(j.judge for j in judgments)) or list(source.run_judges)
    per_judge: dict[str, list[Judgment]] = {name: [] for name in judges}
    in_run = {c.id for c in cases}
    for j in judgments:
        if j.case_id in in_run:
            per_judge[j.judge].append(j)
    index = {c.id: i for i, c in enumerate(cases)}
    columns = {name: _judge_column(per_judge[name], index, len(cases), spec, t) for name in judges}
    overall = columns[judges[0]] if len(judges) == 1 else _ensemble(columns, len(cases), spec.ensemble)
    score = overall.scores
    judge_scores = {name: c.scores for name, c in columns.items()}
    cut, lo = penalty_cut(spec, [c.id for c in cases], findings)
    if cut is not None:
        score = _frozen(np.maximum(score - cut, lo))
        judge_scores = {n: _frozen(np.maximum(v - cut, lo)) for n, v in judge_scores.items()}
    humans = np.asarray([[np.nan if h is None else h for h in c.human] for c in cases], dtype=float).reshape(
        len(cases), -1)
    human = nanmean_rows(humans)
    texts = tuple(c.fields.get(spec.candidate_field, "") for c in cases)
    scale = (float(spec.rubric.scale.min), float(spec.rubric.scale.max)) \
        if spec.rubric is not None and method != "verdicts" else (0.0, 1.0)
    hscale = _human_scale(spec, human, scale, notes)
    return Frame(
        ids=tuple(c.id for c in cases), groups=tuple(c.group for c in cases),
        systems=tuple(c.system for c in cases), categories=tuple(c.category for c in cases),
        families=tuple(c.family for c in cases), splits=tuple(splits[c.id] for c in cases),
        human=_frozen(human), raters=_frozen(humans), score=score, status=overall.status, reasons=overall.reasons,
        lengths=_frozen([len(text.split()) for text in texts]), texts=texts, judge_scores=judge_scores,
        judge_status={name: c.status for name, c in columns.items()}, scale=scale, human_scale=hscale,
        temperature=t, warnings=tuple(notes))


def case_resampling_warning(spec: Spec, groups: Sequence[str | None]) -> str | None:
    """The warning for ``bootstrap.unit: case`` when the cases have groups, else None."""
    if spec.bootstrap.unit == "case" and any(g is not None for g in groups):
        return CASE_RESAMPLING
    return None


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


@frozen
class Counts:
    """Cases of a split by status (invalid and missing stay in the denominator)."""

    n: int
    valid: int
    invalid: int
    missing: int

    @property
    def validity(self) -> float:
        return self.valid / self.n if self.n else 0.0


def counts(frame: Frame, split: str = "all") -> Counts:
    st = [s for s, m in zip(frame.status, frame.mask(split)) if m]
    return Counts(len(st), st.count("valid"), st.count("invalid"), st.count("missing"))
