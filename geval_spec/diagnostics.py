"""Judge diagnostics: what makes a correlation misleading, and how much data it needs.

- **Scale compression** (central tendency): the judge's spread against the
  humans' on a common 0..1 scale, the share of scores at the ends of the
  scale, and a flag when Spearman is high but Pearson clearly lower (the judge
  ranks well but squeezes its scores together).
- **Length bias**: Spearman of the judge's score with the candidate's length
  in words, the same for the humans, and the difference: a judge that
  rewards length more than humans do is verbose-biased.
- **Validity**: invalid and missing judgments and why (they stay in every
  denominator).
- **Pass-mark summary** (with ``calibration.pass_mark``): a case is correct
  when its judge and human scores, both on 0..1, differ by at most the pass
  mark; then validity, accuracy, accuracy among valid cases, and the mean
  over categories, as :func:`geval_spec.hygiene.summarize_eval` defines them.
- **Human agreement**: Krippendorff's alpha (interval and ordinal) between
  the rater columns, when the spec lists several.
- **Sample size**: cases needed to tell the gate's threshold from 0.5
  (:func:`geval_spec.stats.required_n`), and whether the gate's split has them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .analysis import Frame, validity
from .hygiene import summary
from .model import Spec
from .stats import correlation, required_n

EXTREME = 0.05  # within 5% of either end of the 0..1 scale
COMPRESSION_RATIO = 0.6
RANK_LINEAR_GAP = 0.15
LENGTH_GAP = 0.2
LOW_ALPHA = 0.667  # Krippendorff's lowest level for tentative conclusions


def rounded(x: Any, digits: int = 4) -> Any:
    """Fixed rounding for reports (None for missing or non-finite values); other types pass through."""
    if x is None:
        return None
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else round(float(x), digits)
    return x


def compression(frame: Frame) -> dict[str, Any]:
    keep = ~np.isnan(frame.score) & ~np.isnan(frame.human)
    j, h = frame.norm_score()[keep], frame.norm_human()[keep]
    if j.size < 3:
        return {"n": int(j.size), "flag": False, "note": "too few cases"}
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
    suggestion = None
    if flags:
        suggestion = ("Give the rubric's end anchors sharp, checkable conditions (what must be true for the top "
                      "score, what alone earns the bottom one), add examples for the extremes, or judge pairs "
                      "and convert preferences to ranks.")
    return {"n": int(j.size), "judge_sd": rounded(jsd), "human_sd": rounded(hsd), "sd_ratio": rounded(ratio),
            "judge_extreme_share": rounded(ext_j), "human_extreme_share": rounded(ext_h), "spearman": rounded(sp),
            "pearson": rounded(pe), "flag": bool(flags), "reasons": flags, "suggestion": suggestion}


def length_bias(frame: Frame) -> dict[str, Any]:
    keep = ~np.isnan(frame.score) & ~np.isnan(frame.human)
    if keep.sum() < 3 or np.ptp(frame.lengths[keep]) == 0:
        return {"n": int(keep.sum()), "flag": False, "note": "too few cases or equal lengths"}
    jl = correlation(frame.score[keep], frame.lengths[keep], "spearman")
    hl = correlation(frame.human[keep], frame.lengths[keep], "spearman")
    diff = jl - hl if math.isfinite(jl) and math.isfinite(hl) else math.nan
    flag = math.isfinite(diff) and diff > LENGTH_GAP
    return {"n": int(keep.sum()), "judge_vs_length": rounded(jl), "human_vs_length": rounded(hl), "difference": rounded(diff),
            "flag": bool(flag),
            "note": ("the judge rewards length more than the humans do: add a clause against padding "
                     "(bias.length: penalize)") if flag else None}


def validity_report(frame: Frame) -> dict[str, Any]:
    n, valid, invalid, missing, rate = validity(frame)
    reasons: dict[str, int] = {}
    for status, reason in zip(frame.status, frame.reasons):
        if status != "valid":
            key = (reason or status).split(" (after")[0]
            reasons[key] = reasons.get(key, 0) + 1
    return {"n": n, "valid": valid, "invalid": invalid, "missing": missing, "validity": rounded(rate),
            "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))}


def pass_mark_summary(frame: Frame, spec: Spec) -> dict[str, Any] | None:
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

    def rounded(m: dict) -> dict:
        return {k: (rounded(v) if isinstance(v, float) else v) for k, v in m.items()}

    return {"pass_mark": mark, "overall": rounded(out["overall"]),
            "categories": {k: rounded(v) for k, v in out["groups"].items()},
            "macro_category_accuracy": rounded(out["macro_group_accuracy"])}


def agreement(frame: Frame, spec: Spec) -> dict[str, Any] | None:
    raters = spec.data.human
    if isinstance(raters, str) or len(raters) < 2:
        return None
    import krippendorff

    data = np.asarray(frame.raters, dtype=float).T  # raters x units
    has_two = (~np.isnan(data)).sum(axis=0) >= 2
    data = data[:, has_two]
    out: dict[str, Any] = {"raters": list(raters), "n": int(data.shape[1])}
    for level in ("interval", "ordinal"):
        try:
            value = float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
        except (ValueError, ZeroDivisionError):
            value = math.nan
        out[f"alpha_{level}"] = rounded(value)
    low = [k for k in ("alpha_interval", "alpha_ordinal") if out[k] is not None and out[k] < LOW_ALPHA]
    out["warning"] = (f"human agreement is low ({', '.join(f'{k} {out[k]}' for k in low)} < {LOW_ALPHA}): "
                      "the human labels are too noisy to hold a judge to a high bar") if low else None
    return out


def sample_size(frame: Frame, spec: Spec) -> dict[str, Any]:
    cal = spec.calibration
    split = cal.split
    keep = frame.usable(split) if split == "all" or any(s == split for s in frame.splits) else np.zeros(frame.n, bool)
    available = int(keep.sum())
    units = available
    if cal.level == "group":
        units = len({g for g, k in zip(frame.groups, keep) if k and g is not None})
    elif cal.level == "system":
        units = len({s for s, k in zip(frame.systems, keep) if k and s is not None})
    base = {"split": split, "level": cal.level, "available": available, "available_units": units,
            "alpha": 0.05, "power": 0.8, "null": 0.5, "alternative": cal.threshold}
    if cal.threshold <= 0.5:
        return {**base, "required": None, "enough": None, "formula": None,
                "method": "not applicable: the threshold must exceed 0.5 to be told apart from 0.5"}
    n, formula = required_n(cal.threshold, 0.5, cal.metric)
    var = {"spearman": "Bonett-Wright variance (1 + r^2/2)/(n - 3)", "pearson": "variance 1/(n - 3)",
           "kendall": "Fieller variance 0.437/(n - 4)"}[cal.metric]
    method = (f"Fisher z, two-sided alpha 0.05, power 0.8, {cal.metric} with the {var}; "
              f"H0 rho = 0.5 against rho = {cal.threshold}")
    if cal.level != "dataset":
        method += f"; counted in cases, the gate's level is {cal.level} ({units} units)"
    return {**base, "required": n, "enough": available >= n, "formula": formula, "method": method}


def audit(spec: Spec, dataset) -> dict[str, Any]:
    """What ``geval-spec audit`` shows before any judge call: splits, human agreement, sample size."""
    from .analysis import Frame
    from .splits import assign_splits, audit as split_audit

    cases = dataset.cases
    splits = assign_splits(spec, cases)
    report = split_audit(spec, cases, splits) if spec.split is not None else {
        "counts": {}, "duplicate_ids": [], "overlapping_groups": {}, "missing_splits": []}
    humans = np.asarray([[np.nan if h is None else h for h in c.human] for c in cases], dtype=float)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            human = np.nanmean(humans, axis=1)
    labelled = ~np.isnan(human)
    frame = Frame(ids=tuple(c.id for c in cases), groups=tuple(c.group for c in cases),
                  systems=tuple(c.system for c in cases), categories=tuple(c.category for c in cases),
                  families=tuple(c.family for c in cases), splits=tuple(splits[c.id] for c in cases),
                  human=human, raters=humans, score=np.where(labelled, 0.0, np.nan), status=("valid",) * len(cases),
                  reasons=(None,) * len(cases), lengths=np.zeros(len(cases)), texts=("",) * len(cases))
    size = sample_size(frame, spec)  # "available": human-labelled cases in the gate's split
    groups_total = len({c.group for c in cases if c.group is not None})
    return {"splits": {**report, "by": _split_by(spec), "groups": groups_total},
            "agreement": agreement(frame, spec), "sample_size": size,
            "cases": {"n": len(cases), "labelled": int(labelled.sum())}}


def _split_by(spec: Spec) -> str | None:
    if spec.split is None:
        return None
    return f"column {spec.split.field}" if hasattr(spec.split, "field") else f"hash of {spec.split.by}"


def length_quartiles(frame: Frame) -> list[dict[str, Any]]:
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
            out.append({"quartile": q + 1, "words": f"{int(lengths[m].min())}-{int(lengths[m].max())}", "n": int(m.sum()),
                        "judge": rounded(float(j[m].mean())), "human": rounded(float(h[m].mean())),
                        "gap": rounded(float(j[m].mean() - h[m].mean()))})
    return out


def language_summary(frame: Frame, spec: Spec, findings: dict[str, list[dict]]) -> dict[str, Any] | None:
    """How many cases the pre-checks flagged, by kind, and how humans scored them."""
    if spec.language is None:
        return None
    index = {cid: i for i, cid in enumerate(frame.ids)}
    kinds: dict[str, dict[str, Any]] = {}
    flagged = np.zeros(frame.n, dtype=bool)
    for cid, items in findings.items():
        if cid not in index:
            continue
        flagged[index[cid]] = True
        for f in items:
            k = kinds.setdefault(f["kind"], {"cases": set(), "findings": 0, "examples": []})
            k["cases"].add(cid)
            k["findings"] += 1
            if len(k["examples"]) < 3:
                k["examples"].append({"case_id": cid, "text": f["text"], "message": f["message"]})
    h = frame.norm_human()
    with_h = h[flagged & ~np.isnan(h)]
    without_h = h[~flagged & ~np.isnan(h)]
    return {"code": spec.language.code, "formality": spec.language.formality,
            "cases_flagged": int(flagged.sum()), "cases": frame.n,
            "kinds": {k: {"cases": len(v["cases"]), "findings": v["findings"], "examples": v["examples"]}
                      for k, v in sorted(kinds.items())},
            "human_flagged": rounded(float(with_h.mean())) if with_h.size else None,
            "human_clean": rounded(float(without_h.mean())) if without_h.size else None,
            "penalty": dict(spec.language.penalty)}


def position_summary(judgments) -> dict[str, Any] | None:
    """Pairwise specs with position swap: how often both orders agree."""
    both = [j for j in judgments if j.valid and j.details.get("consistent") is not None]
    if not both and not any("order_ba" in j.details for j in judgments):
        return None
    consistent = sum(1 for j in both if j.details["consistent"])
    return {"both_orders_valid": len(both), "consistent": consistent,
            "consistency": rounded(consistent / len(both)) if both else None,
            "one_order_only": sum(1 for j in judgments if j.valid and j.details.get("consistent") is None),
            "rule": "the mean of both orders: orders that disagree give a tie (0.5)"}


FAMILIES = (("gpt", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"), ("chatgpt", "openai"),
            ("claude", "anthropic"), ("gemini", "google"), ("gemma", "google"), ("llama", "meta"),
            ("mistral", "mistral"), ("mixtral", "mistral"), ("qwen", "qwen"), ("deepseek", "deepseek"),
            ("command", "cohere"), ("phi", "microsoft"), ("grok", "xai"))


def model_family(model: str) -> str:
    """A judge's model family from its model string (openai/gpt-4.1-mini -> openai)."""
    name = model.lower().split("/")[-1]
    for prefix, family in FAMILIES:
        if name.startswith(prefix):
            return family
    return model.lower().split("/")[0] if "/" in model else name.split("-")[0]


def panel_summary(frame: Frame, judges: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Agreement between the judges of a panel, and self-preference where case metadata names model families."""
    names = list(frame.judge_scores)
    out: dict[str, Any] = {}
    if len(names) >= 2:
        import krippendorff

        data = np.vstack([frame.judge_scores[n] for n in names])
        usable = (~np.isnan(data)).sum(axis=0) >= 2
        try:
            alpha = float(krippendorff.alpha(reliability_data=data[:, usable], level_of_measurement="interval"))
        except (ValueError, ZeroDivisionError):
            alpha = math.nan
        out.update({"judges": names, "n": int(usable.sum()), "alpha_interval": rounded(alpha)})
    fams = [f for f in frame.families]
    flags = []
    if any(f is not None for f in fams):
        info = {(j.get("name") or j.get("model")): j for j in judges if isinstance(j, dict)}
        h = frame.norm_human()
        rows = []
        for name, scores in frame.judge_scores.items():
            j = info.get(name, {})
            family = (j.get("family") or model_family(j.get("model", name))).lower()
            lo, hi = frame.scale
            js = (scores - lo) / (hi - lo) if hi > lo else scores
            gap = js - h
            own = np.asarray([f is not None and f.lower() == family for f in fams]) & ~np.isnan(gap)
            other = np.asarray([f is not None and f.lower() != family for f in fams]) & ~np.isnan(gap)
            row = {"judge": name, "family": family, "own_n": int(own.sum()), "other_n": int(other.sum()),
                   "own_gap": rounded(float(gap[own].mean())) if own.any() else None,
                   "other_gap": rounded(float(gap[other].mean())) if other.any() else None}
            row["self_preference"] = (rounded(row["own_gap"] - row["other_gap"])
                                      if row["own_gap"] is not None and row["other_gap"] is not None else None)
            row["flag"] = bool(row["self_preference"] is not None and row["self_preference"] > 0.1 and own.sum() >= 5)
            if row["flag"]:
                flags.append(f"{name} ({family}) scores its own family's candidates {row['self_preference']:.2f} "
                             f"higher relative to the humans than other candidates ({row['own_n']} own cases)")
            rows.append(row)
        out["self_preference"] = rows
        out["flags"] = flags
    return out or None


@dataclass(frozen=True)
class Diagnostics:
    compression: dict[str, Any]
    length: dict[str, Any]
    validity: dict[str, Any]
    pass_mark: dict[str, Any] | None
    agreement: dict[str, Any] | None
    sample_size: dict[str, Any]


def diagnose(frame: Frame, spec: Spec) -> Diagnostics:
    return Diagnostics(compression=compression(frame), length=length_bias(frame), validity=validity_report(frame),
                       pass_mark=pass_mark_summary(frame, spec), agreement=agreement(frame, spec),
                       sample_size=sample_size(frame, spec))
