"""A loaded run -> its :class:`~geval_spec.analysis.results.Calibration` report.

The report is committed to git and reviewed in pull requests, so it is
deterministic: the same inputs give the same value, and so the same bytes in
every format. There are no timestamps or machine-dependent paths in it,
numbers are rounded to fixed digits, and every list has a fixed order. A new
version of a spec then shows up in ``git diff`` as exactly what changed.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from geval_spec.analysis.agreement import human_agreement, panel_summary
from geval_spec.analysis.correlation import METRICS, Estimate, group_values
from geval_spec.analysis.diagnostics import (
    compression,
    language_summary,
    length_bias,
    logprobs_summary,
    pass_mark_summary,
    position_summary,
    samples_summary,
    validity_report,
)
from geval_spec.analysis.estimate import EstimateBlock, estimate
from geval_spec.analysis.frame import Frame, Source, case_resampling_warning, counts, levels_present, splits_present
from geval_spec.analysis.gate import LevelResult, correlations, gate, level_result
from geval_spec.analysis.resolve import Loaded
from geval_spec.analysis.results import (
    BootstrapInfo,
    Calibration,
    CasesBlock,
    Correlations,
    Diagnostics,
    Disagreement,
    Interval,
    LevelEntry,
    PerJudge,
    PlotData,
    RunBlock,
    SpecInfo,
    SplitCases,
    rounded,
)
from geval_spec.analysis.samplesize import HALFWIDTH, sample_size
from geval_spec.analysis.sweep import sweep
from geval_spec.errors import SpecError
from geval_spec.spec.checks import halfwidth_problem
from geval_spec.spec.sections import Spec

TOP_DISAGREEMENTS = 10
EXCERPT = 160


def interval(est: Estimate) -> Interval:
    return Interval(value=rounded(est.value), ci_low=rounded(est.ci_low), ci_high=rounded(est.ci_high))


def correlation_block(corr: dict[str, dict[str, LevelResult]]) -> Correlations:
    return {split: {level: LevelEntry(**{m: interval(res.estimates[m]) for m in METRICS}, n=res.n,
                                      skipped_groups=res.skipped if level == "group" else None)
                    for level, res in levels.items()}
            for split, levels in corr.items()}


def _cases_block(frame: Frame, splits: Sequence[str]) -> CasesBlock:
    c = counts(frame)
    per_split = {}
    for split in splits:
        if split != "all":
            s = counts(frame, split)
            per_split[split] = SplitCases(n=s.n, valid=s.valid, invalid=s.invalid, missing=s.missing,
                                          validity=rounded(s.validity))
    return CasesBlock(n=c.n, valid=c.valid, invalid=c.invalid, missing=c.missing, validity=rounded(c.validity),
                      labelled=int((~np.isnan(frame.human)).sum()), splits=per_split or None)


def disagreements(frame: Frame, limit: int = TOP_DISAGREEMENTS) -> list[Disagreement]:
    j, h = frame.norm_score(), frame.norm_human()
    keep = np.nonzero(~np.isnan(j) & ~np.isnan(h))[0]
    gaps = np.abs(j[keep] - h[keep])
    order = sorted(range(len(keep)), key=lambda k: (-round(float(gaps[k]), 6), frame.ids[keep[k]]))[:limit]
    out = []
    for k in order:
        i = int(keep[k])
        text = " ".join(frame.texts[i].split())
        out.append(Disagreement(case_id=frame.ids[i], split=frame.splits[i], judge=rounded(j[i]), human=rounded(h[i]),
                                gap=rounded(float(gaps[k])),
                                candidate=text[:EXCERPT] + ("..." if len(text) > EXCERPT else "")))
    return out


def per_judge(frame: Frame, spec: Spec) -> dict[str, PerJudge] | None:
    if len(frame.judge_scores) < 2:
        return None
    out = {}
    split = spec.calibration.split if spec.calibration.split in splits_present(frame, spec) else "all"
    level = spec.calibration.level if spec.calibration.level in levels_present(frame) else "dataset"
    for name, scores in frame.judge_scores.items():
        res = level_result(frame, spec, split, level, scores=scores)
        st = frame.judge_status[name]
        out[name] = PerJudge(split=split, level=level, n=res.n,
                             validity=rounded(st.count("valid") / len(st)) if st else None,
                             **{m: interval(res.estimates[m]) for m in METRICS})
    return out


def plot_data(frame: Frame, metric: str) -> PlotData:
    keep = ~np.isnan(frame.score) & ~np.isnan(frame.human)
    values: tuple[float, ...] = ()
    skipped = 0
    if any(g is not None for g in frame.groups):
        groups = [g if g is not None else i for g, i, k in zip(frame.groups, frame.ids, keep) if k]
        per_group, _, skipped = group_values(frame.score[keep], frame.human[keep], groups, metric)
        values = tuple(float(v) for v in np.sort(per_group[~np.isnan(per_group)]))
    return PlotData(judge=tuple(float(v) for v in frame.norm_score()), human=tuple(float(v) for v in frame.norm_human()),
                    splits=frame.splits, group_values=values, groups_skipped=skipped)


def build(loaded: Loaded, temperature: float | None = None, halfwidth: float = HALFWIDTH) -> Calibration:
    """The whole report of a loaded run, at ``temperature`` for TCVA verdicts (default: the spec's).

    ``halfwidth``: the interval half-width the sample-size plan is for.
    """
    source = loaded.source
    spec = source.spec
    frame = loaded.frame(temperature)
    corr = correlations(frame, spec)
    cases = set(frame.ids)
    in_frame = [j for j in loaded.judgments if j.case_id in cases]
    judges = sorted(frame.judge_scores) or list(source.run_judges)
    diagnostics = Diagnostics(validity=validity_report(frame), compression=compression(frame),
                              length=length_bias(frame, quartiles=spec.bias.length == "report"),
                              pass_mark=pass_mark_summary(frame, spec), position=position_summary(loaded.judgments),
                              language=language_summary(frame, spec, loaded.findings),
                              samples=samples_summary(in_frame, spec), logprobs=logprobs_summary(in_frame))
    swept = None
    if spec.scoring.method == "verdicts" and spec.split is not None:
        swept = sweep(source, loaded.case_ids, loaded.judgments, findings=loaded.findings)
    b = spec.bootstrap
    gated = corr.get(spec.calibration.split, {}).get(spec.calibration.level)
    observed = gated.estimates[spec.calibration.metric].value if gated is not None else None
    return Calibration(
        spec=SpecInfo(name=spec.name, version=spec.version, fingerprint=source.judging_fp,
                      analysis_fingerprint=source.analysis_fp, file=loaded.spec_file),
        run=RunBlock(id=loaded.run.run_id, kind=loaded.run.kind, judge=judges[0] if len(judges) == 1 else judges,
                     method=spec.scoring.method, ensemble=spec.ensemble if len(judges) > 1 else None,
                     temperature=rounded(frame.temperature), data=source.data_display,
                     data_sha256=source.run_data_sha256),
        cases=_cases_block(frame, splits_present(frame, spec)), correlation=correlation_block(corr),
        gate=gate(frame, spec, corr), diagnostics=diagnostics, sample_size=sample_size(frame, spec, observed, halfwidth),
        agreement=human_agreement(frame, spec), judges=per_judge(frame, spec),
        panel=panel_summary(frame, loaded.run.judges), sweep=swept, disagreements=disagreements(frame),
        bootstrap=BootstrapInfo(draws=b.draws, seed=b.seed, unit=b.unit, level=b.level),
        warnings=_warnings(frame, spec), estimate=_estimate(frame, source),
        plot=plot_data(frame, spec.calibration.metric))


def _estimate(frame: Frame, source: Source) -> EstimateBlock | None:
    """The estimate, or None when every valid case is labelled; a target half-width wider than the scale is an error."""
    block = estimate(frame, source.spec)
    target = source.spec.estimate.target_halfwidth if source.spec.estimate is not None else None
    if block is not None and target is not None:
        how = "data.human_scale" if source.spec.data.human_scale is not None else \
            "the range of the human scores, since data.human_scale is not set"
        why = halfwidth_problem(target, frame.human_scale, how)
        if why:
            raise SpecError(problems=[source.problem(("estimate", "target_halfwidth"), why)])
    return block


def _warnings(frame: Frame, spec: Spec) -> list[str]:
    resampling = case_resampling_warning(spec, frame.groups)
    return list(frame.warnings) + ([resampling] if resampling else [])
