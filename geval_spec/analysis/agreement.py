"""Agreement: between human raters (is the label trustworthy?) and between the judges of a panel.

- **Human agreement**: Krippendorff's alpha (interval and ordinal) between the
  rater columns, when ``data.human`` lists several.
- **Panel agreement**: Krippendorff's alpha (interval) between the judges of
  a panel over the cases at least two of them judged.
- **Self-preference**: where the data names each candidate's model family,
  each judge's gap to the humans on its own family's candidates against the
  others (a judge that flatters its own family is flagged).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

import numpy as np

from geval_spec.analysis.frame import Frame, to_unit
from geval_spec.analysis.results import Agreement, Panel, SelfPreference, rounded
from geval_spec.spec.sections import Spec
from geval_spec.store.records import RunJudge

LOW_ALPHA = 0.667  # Krippendorff's lowest level for tentative conclusions
SELF_PREFERENCE_GAP = 0.1
SELF_PREFERENCE_MIN_CASES = 5
FAMILIES = (("gpt", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"), ("chatgpt", "openai"),
            ("claude", "anthropic"), ("gemini", "google"), ("gemma", "google"), ("llama", "meta"),
            ("mistral", "mistral"), ("mixtral", "mistral"), ("qwen", "qwen"), ("deepseek", "deepseek"),
            ("command", "cohere"), ("phi", "microsoft"), ("grok", "xai"))


def _alpha(data: np.ndarray[Any, Any], level: Literal["interval", "ordinal"]) -> float:
    import krippendorff

    try:
        return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
    except (ValueError, ZeroDivisionError):
        return math.nan


def human_agreement(frame: Frame, spec: Spec) -> Agreement | None:
    raters = spec.data.human
    if isinstance(raters, str) or len(raters) < 2:
        return None
    data = np.asarray(frame.raters, dtype=float).T  # raters x units
    data = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    interval, ordinal = rounded(_alpha(data, "interval")), rounded(_alpha(data, "ordinal"))
    low = [(k, v) for k, v in (("alpha_interval", interval), ("alpha_ordinal", ordinal))
           if v is not None and v < LOW_ALPHA]
    warning = (f"human agreement is low ({', '.join(f'{k} {v}' for k, v in low)} < {LOW_ALPHA}): "
               "the human labels are too noisy to hold a judge to a high bar") if low else None
    return Agreement(raters=list(raters), n=int(data.shape[1]), alpha_interval=interval, alpha_ordinal=ordinal,
                     warning=warning)


def model_family(model: str) -> str:
    """A judge's model family from its model string (openai/gpt-4.1-mini -> openai)."""
    name = model.lower().split("/")[-1]
    for prefix, family in FAMILIES:
        if name.startswith(prefix):
            return family
    return model.lower().split("/")[0] if "/" in model else name.split("-")[0]


def _self_preference(frame: Frame, judges: Sequence[RunJudge]) -> tuple[list[SelfPreference], list[str]]:
    info = {j.label: j for j in judges}
    fams = frame.families
    h = frame.norm_human()
    rows, flags = [], []
    for name, scores in frame.judge_scores.items():
        j = info.get(name, RunJudge(name))
        family = (j.family or model_family(j.model or name)).lower()
        gap = to_unit(scores, frame.scale) - h
        own = np.asarray([f is not None and f.lower() == family for f in fams]) & ~np.isnan(gap)
        other = np.asarray([f is not None and f.lower() != family for f in fams]) & ~np.isnan(gap)
        own_gap = rounded(float(gap[own].mean())) if own.any() else None
        other_gap = rounded(float(gap[other].mean())) if other.any() else None
        preference = rounded(own_gap - other_gap) if own_gap is not None and other_gap is not None else None
        flag = bool(preference is not None and preference > SELF_PREFERENCE_GAP
                    and own.sum() >= SELF_PREFERENCE_MIN_CASES)
        if flag:
            flags.append(f"{name} ({family}) scores its own family's candidates {preference:.2f} "
                         f"higher relative to the humans than other candidates ({int(own.sum())} own cases)")
        rows.append(SelfPreference(judge=name, family=family, own_n=int(own.sum()), other_n=int(other.sum()),
                                   own_gap=own_gap, other_gap=other_gap, self_preference=preference, flag=flag))
    return rows, flags


def panel_summary(frame: Frame, judges: Sequence[RunJudge]) -> Panel | None:
    """Agreement between the judges of a panel, and self-preference where case metadata names model families."""
    names = list(frame.judge_scores)
    fields: dict[str, Any] = {}
    if len(names) >= 2:
        data = np.vstack([frame.judge_scores[n] for n in names])
        usable = (~np.isnan(data)).sum(axis=0) >= 2
        fields.update(judges=names, n=int(usable.sum()), alpha_interval=rounded(_alpha(data[:, usable], "interval")))
    if any(f is not None for f in frame.families):
        fields["self_preference"], fields["flags"] = _self_preference(frame, judges)
    return Panel(**fields) if fields else None
