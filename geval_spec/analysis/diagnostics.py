"""Judge diagnostics: what makes a correlation misleading.

- **Scale compression** (central tendency): the judge's spread against the
  humans' on a common 0..1 scale, the share of scores at the ends of the
  scale, and a flag when Spearman is high but Pearson clearly lower (the judge
  ranks well but squeezes its scores together).
- **Length bias**: Spearman of the judge's score with the candidate's length
  in words, the same for the humans, and the difference: a judge that
  rewards length more than humans do is verbose-biased; with ``bias.length:
  report`` also the mean scores per quarter of length.
- **Validity**: invalid and missing judgments and why (they stay in every
  denominator).
- **Pass-mark summary** (with ``calibration.pass_mark``): a case is correct
  when its judge and human scores, both on 0..1, differ by at most the pass
  mark; then validity, accuracy, accuracy among valid cases, and the mean
  over categories, as :func:`geval_spec.analysis.hygiene.summarize_eval`
  defines them.
- **Samples** (method samples): the share of samples that did not parse,
  and the cases made invalid by ``scoring.min_valid_samples`` (applied when
  the frame is built, so changing it costs no judge call).
- **Logprobs**: mean and maximum ``ambiguous_mass`` (probability on
  alternatives that could start a longer score, off the path the model
  took) and the mean and lowest ``valid_mass`` of the valid judgments.
- **Position bias** (pairwise specs with a position swap) and the **language
  pre-checks**: how often the orders agree; how many cases were flagged and
  how humans scored them.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from geval_spec.analysis.correlation import correlation
from geval_spec.analysis.frame import Findings, Frame, counts, min_valid_samples, too_few_samples
from geval_spec.analysis.hygiene import summary
from geval_spec.analysis.results import (
    Accuracy,
    Compression,
    FindingExample,
    FindingKind,
    LanguageBlock,
    LengthBias,
    LengthTooFew,
    LogprobsBlock,
    PassMark,
    Position,
    Quartile,
    SamplesBlock,
    TooFew,
    ValidityBlock,
    rounded,
)
from geval_spec.judge.scoring import PAIRWISE_RULE
from geval_spec.judge.types import Judgment
from geval_spec.spec.sections import Spec

EXTREME = 0.05  # within 5% of either end of the 0..1 scale
COMPRESSION_RATIO = 0.6
RANK_LINEAR_GAP = 0.15
LENGTH_GAP = 0.2
SUGGESTION = ("Give the rubric's end anchors sharp, checkable conditions (what must be true for the top "
              "score, what alone earns the bottom one), add examples for the extremes, or judge pairs "
              "and convert preferences to ranks.")


def compression(frame: Frame) -> Compression | TooFew:
    keep = ~np.isnan(frame.score) & ~np.isnan(frame.human)
    j, h = frame.norm_score()[keep], frame.norm_human()[keep]
    if j.size < 3:
        return TooFew(n=int(j.size), flag=False, note="too few cases")
    jsd, hsd = float(np.std(j)), float(np.std(h))
    ratio = jsd / hsd if hsd > 0 else None
    sp, pe = correlation(j, h, "spearman"), correlation(j, h, "pearson")
    ext_j = float(np.mean((j <= EXTREME) | (j >= 1 - EXTREME)))
    ext_h = float(np.mean((h <= EXTREME) | (h >= 1 - EXTREME)))
    flags = []
    if ratio is not None and ratio < COMPRESSION_RATIO:
        flags.append(f"the judge's spread is {ratio:.2f} x the humans' (below {COMPRESSION_RATIO})")
    if math.isfinite(sp) and math.isfinite(pe) and sp >= 0.5 and sp - pe >= RANK_LINEAR_GAP:
        flags.append(f"Spearman {sp:.2f} is well above Pearson {pe:.2f}: it ranks right but squeezes the scale")
    if ext_j + 0.15 < ext_h:
        flags.append(f"the judge uses the ends of the scale less ({ext_j:.0%}) than the humans ({ext_h:.0%})")
    return Compression(n=int(j.size), judge_sd=rounded(jsd), human_sd=rounded(hsd), sd_ratio=rounded(ratio),
                       judge_extreme_share=rounded(ext_j), human_extreme_share=rounded(ext_h),
                       spearman=rounded(sp), pearson=rounded(pe), flag=bool(flags), reasons=flags,
                       suggestion=SUGGESTION if flags else None)


def length_quartiles(frame: Frame) -> list[Quartile]:
    """Mean judge and human score (0..1) per quarter of candidate length: does the judge's gap grow with length?"""
    keep = ~np.isnan(frame.score) & ~np.isnan(frame.human)
    if keep.sum() < 8:
        return []
    lengths = frame.lengths[keep]
    j, h = frame.norm_score()[keep], frame.norm_human()[keep]
    edges = np.quantile(lengths, [0.25, 0.5, 0.75])
    bins = np.searchsorted(edges, lengths, side="right")
    out = []
    for q in range(4):
        m = bins == q
        if m.any():
            out.append(Quartile(quartile=q + 1, words=f"{int(lengths[m].min())}-{int(lengths[m].max())}",
                                n=int(m.sum()), judge=rounded(float(j[m].mean())), human=rounded(float(h[m].mean())),
                                gap=rounded(float(j[m].mean() - h[m].mean()))))
    return out


def length_bias(frame: Frame, quartiles: bool = False) -> LengthBias | LengthTooFew:
    keep = ~np.isnan(frame.score) & ~np.isnan(frame.human)
    by_quarter = length_quartiles(frame) if quartiles else None
    if keep.sum() < 3 or np.ptp(frame.lengths[keep]) == 0:
        return LengthTooFew(n=int(keep.sum()), flag=False, note="too few cases or equal lengths",
                            quartiles=by_quarter)
    jl = correlation(frame.score[keep], frame.lengths[keep], "spearman")
    hl = correlation(frame.human[keep], frame.lengths[keep], "spearman")
    diff = jl - hl if math.isfinite(jl) and math.isfinite(hl) else math.nan
    flag = math.isfinite(diff) and diff > LENGTH_GAP
    return LengthBias(n=int(keep.sum()), judge_vs_length=rounded(jl), human_vs_length=rounded(hl),
                      difference=rounded(diff), flag=bool(flag),
                      note=("the judge rewards length more than the humans do: add a clause against padding "
                            "(bias.length: penalize)") if flag else None, quartiles=by_quarter)


def validity_report(frame: Frame) -> ValidityBlock:
    c = counts(frame)
    reasons: dict[str, int] = {}
    for status, reason in zip(frame.status, frame.reasons):
        if status != "valid":
            key = (reason or status).split(" (after")[0]
            reasons[key] = reasons.get(key, 0) + 1
    return ValidityBlock(n=c.n, valid=c.valid, invalid=c.invalid, missing=c.missing, validity=rounded(c.validity),
                         reasons=dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))))


def _accuracy(m: dict[str, Any]) -> Accuracy:
    return Accuracy(n=m["n"], validity=rounded(m["validity"]), accuracy=rounded(m["accuracy"]),
                    accuracy_when_valid=rounded(m["accuracy_when_valid"]))


def pass_mark_summary(frame: Frame, spec: Spec) -> PassMark | None:
    mark = spec.calibration.pass_mark
    if mark is None:
        return None
    j, h = frame.norm_score(), frame.norm_human()
    rows = []
    for i in range(frame.n):
        if np.isnan(frame.human[i]):
            continue
        valid = frame.status[i] == "valid"
        correct = valid and abs(j[i] - h[i]) <= mark + 1e-12
        rows.append((frame.categories[i] or "all", valid, bool(correct)))
    if not rows:
        return None
    out = summary(rows)
    return PassMark(pass_mark=mark, overall=_accuracy(out["overall"]),
                    categories={k: _accuracy(v) for k, v in out["groups"].items()},
                    macro_category_accuracy=rounded(out["macro_group_accuracy"]))


def language_summary(frame: Frame, spec: Spec, findings: Findings) -> LanguageBlock | None:
    """How many cases the pre-checks flagged, by kind, and how humans scored them."""
    if spec.language is None:
        return None
    index = {cid: i for i, cid in enumerate(frame.ids)}
    cases_of: dict[str, set[str]] = {}
    totals: dict[str, int] = {}
    examples: dict[str, list[FindingExample]] = {}
    flagged = np.zeros(frame.n, dtype=bool)
    for cid, items in findings.items():
        if cid not in index:
            continue
        flagged[index[cid]] = True
        for f in items:
            cases_of.setdefault(f.kind, set()).add(cid)
            totals[f.kind] = totals.get(f.kind, 0) + 1
            shown = examples.setdefault(f.kind, [])
            if len(shown) < 3:
                shown.append(FindingExample(case_id=cid, text=f.text, message=f.message))
    h = frame.norm_human()
    with_h = h[flagged & ~np.isnan(h)]
    without_h = h[~flagged & ~np.isnan(h)]
    return LanguageBlock(code=spec.language.code, formality=spec.language.formality,
                         cases_flagged=int(flagged.sum()), cases=frame.n,
                         kinds={k: FindingKind(cases=len(cases_of[k]), findings=totals[k], examples=examples[k])
                                for k in sorted(cases_of)},
                         human_flagged=rounded(float(with_h.mean())) if with_h.size else None,
                         human_clean=rounded(float(without_h.mean())) if without_h.size else None,
                         penalty=dict(spec.language.penalty))


def position_summary(judgments: Sequence[Judgment]) -> Position | None:
    """Pairwise specs with position swap: how often both orders agree."""
    both = [j for j in judgments if j.valid and j.details.consistent is not None]
    if not both and not any(j.details.swapped for j in judgments):
        return None
    consistent = sum(1 for j in both if j.details.consistent)
    return Position(both_orders_valid=len(both), consistent=consistent,
                    consistency=rounded(consistent / len(both)) if both else None,
                    one_order_only=sum(1 for j in judgments if j.valid and j.details.consistent is None),
                    rule=PAIRWISE_RULE)


def samples_summary(judgments: Sequence[Judgment], spec: Spec) -> SamplesBlock | None:
    """The invalid-sample rate of samples judgments, and how many fell below scoring.min_valid_samples."""
    sampled = [j for j in judgments if j.method == "samples" and j.samples]
    if not sampled:
        return None
    drawn = sum(len(j.samples or ()) for j in sampled)
    bad = sum(1 for j in sampled for v in j.samples or () if v is None)
    return SamplesBlock(judgments=len(sampled), samples=drawn, invalid_samples=bad,
                        invalid_rate=rounded(bad / drawn) if drawn else None,
                        min_valid_samples=min_valid_samples(spec, max(len(j.samples or ()) for j in sampled)),
                        below_minimum=sum(1 for j in sampled if j.valid and too_few_samples(j, spec) is not None))


def logprobs_summary(judgments: Sequence[Judgment]) -> LogprobsBlock | None:
    """Mean and maximum ambiguous mass, mean and lowest valid mass, of the valid logprobs judgments."""
    read = [j for j in judgments if j.method == "logprobs" and j.valid and j.valid_mass is not None]
    if not read:
        return None
    ambiguous = [j.details.ambiguous_mass or 0.0 for j in read]
    mass = [float(j.valid_mass or 0.0) for j in read]
    return LogprobsBlock(judgments=len(read), ambiguous_mass_mean=rounded(sum(ambiguous) / len(read)),
                         ambiguous_mass_max=rounded(max(ambiguous)), valid_mass_mean=rounded(sum(mass) / len(read)),
                         valid_mass_min=rounded(min(mass)))
