"""Checks that need more than one key of a valid-typed spec.

Each check returns problems pointing at the key that is wrong: rubric anchors
inside the scale, one per score and no two alike; ordered TCVA weights;
fractions that sum to 1; the keys a scoring method needs; calibration and
bootstrap settings that the data can support; files that exist.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from geval_spec.errors import Problem
from geval_spec.plugins import load_plugins
from geval_spec.spec.project import display_path
from geval_spec.spec.sections import VERDICT_LEVELS, Spec, SplitByField, SplitByHash
from geval_spec.spec.template import CASE_VARS, PAIR_VARS, SPEC_VARS
from geval_spec.spec.yamldoc import YamlDocument


MAX_SCALE = 1e100  # |data.human_scale| bound: the analysis squares differences of scores on it (at 1e200, +-inf)
CASE_RESAMPLING = ("bootstrap.unit is case but the data has source groups (data.group): cases of a group are not "
                   "independent, so resampling cases makes the intervals too narrow (in a simulation with clustered "
                   "groups, ICC 0.4, 95% intervals covered 0.85-0.88 resampling cases, 0.91-0.95 resampling groups); "
                   "set bootstrap.unit: group (group level always resamples groups)")


def _judges(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """The judge or the judges of a panel."""
    out: list[Problem] = []
    p = doc.problem
    if spec.judge is None and not spec.judges:
        out.append(p((), "no judge: run needs --model (a litellm model string), or give 'judge' (one model) or "
                     "'judges' (a panel)", severity="warning", prefer_key=True))
    if spec.judge is not None and spec.judges:
        out.append(p(("judges",), "give either 'judge' or 'judges', not both", prefer_key=True))
    if spec.judges:
        labels = [j.label for j in spec.judges]
        for i, label in enumerate(labels):
            if labels.index(label) != i:
                out.append(p(("judges", i), f"two judges are labelled {label!r}; give them distinct 'name's"))
    return out


def _pairwise(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """Pairwise specs: two distinct candidate variables, a position swap only with them."""
    out: list[Problem] = []
    p = doc.problem
    method = spec.scoring.method
    if spec.pairwise is not None:
        if method not in ("direct", "samples"):
            out.append(p(("scoring", "method"), f"pairwise specs are scored direct or samples, not {method}"))
        for i, var in enumerate(spec.pairwise.candidates):
            if var not in spec.data.fields:
                out.append(p(("pairwise", "candidates", i), f"'{var}' is not a key of data.fields",
                             hint=f"data.fields has: {', '.join(spec.data.fields)}"))
        if spec.pairwise.candidates[0] == spec.pairwise.candidates[1]:
            out.append(p(("pairwise", "candidates"), "the two candidates must be different variables"))
    elif spec.bias.position_swap:
        out.append(p(("bias", "position_swap"), "position_swap needs a pairwise spec (two candidates per case)",
                     hint="add pairwise: {candidates: [answer_a, answer_b]}"))
    return out


def _rubric(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """Rubric anchors inside the scale, one per score, no two alike."""
    out: list[Problem] = []
    p = doc.problem
    raw = doc.data if isinstance(doc.data, dict) else {}
    method = spec.scoring.method
    if spec.rubric is None:
        if method != "verdicts" and spec.pairwise is None:
            out.append(p((), f"missing 'rubric': scoring.method {method} scores on a rubric", prefer_key=True))
    else:
        scale = spec.rubric.scale
        if scale.min >= scale.max:
            out.append(p(("rubric", "scale"), f"scale min ({scale.min}) must be below max ({scale.max})"))
        elif scale.max - scale.min > 100:
            out.append(p(("rubric", "scale"), "a scale of more than 101 scores is not a rubric"))
        else:
            raw_anchors = ((raw.get("rubric") or {}).get("anchors") or {}) if isinstance(raw.get("rubric"), dict) else {}
            seen: dict[int, object] = {}
            for key in raw_anchors if isinstance(raw_anchors, dict) else {}:
                try:
                    score = int(key)
                except (TypeError, ValueError):
                    continue
                if score in seen:
                    out.append(p(("rubric", "anchors", key),
                                 f"score {score} has two anchors ({seen[score]!r} and {key!r})", prefer_key=True))
                seen[score] = key
            for score in sorted(spec.rubric.anchors):
                if not scale.min <= score <= scale.max:
                    key = seen.get(score, score)
                    out.append(p(("rubric", "anchors", key),
                                 f"anchor {score} is outside the scale {scale.min}..{scale.max}", prefer_key=True))
            gaps = [s for s in range(scale.min, scale.max + 1) if s not in spec.rubric.anchors]
            if gaps:
                out.append(p(("rubric", "anchors"),
                             f"no anchor for score(s) {', '.join(map(str, gaps))}: anchors must cover the scale "
                             f"{scale.min}..{scale.max}", prefer_key=True))
            by_text: dict[str, int] = {}
            for score, anchor in sorted(spec.rubric.anchors.items()):
                text = " ".join(anchor.description.split()).lower()
                if not text:
                    out.append(p(("rubric", "anchors", seen.get(score, score), "description"),
                                 "anchor description is blank"))
                elif text in by_text:
                    out.append(p(("rubric", "anchors", seen.get(score, score), "description"),
                                 f"anchors {by_text[text]} and {score} have the same description; "
                                 "anchors must be disjoint"))
                else:
                    by_text[text] = score
    return out


def _scoring(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """What each scoring method needs from the judge."""
    out: list[Problem] = []
    p = doc.problem
    raw = doc.data if isinstance(doc.data, dict) else {}
    method = spec.scoring.method
    if method == "samples" and spec.scoring.samples is None:
        out.append(p(("scoring",), "scoring.method samples needs 'samples' (n >= 2)", prefer_key=True))
    if spec.scoring.fallback == "samples" and spec.scoring.samples is None:
        out.append(p(("scoring", "fallback"), "fallback samples needs scoring.samples (n >= 2)"))
    if method == "logprobs":
        for i, judge in enumerate(spec.panel):
            if judge.top_logprobs is None:
                where: tuple[str | int, ...] = ("judge",) if spec.judge is not None else ("judges", i)
                out.append(p(where, f"scoring.method logprobs needs top_logprobs on judge {judge.label!r}",
                             hint=f"set {'.'.join(map(str, where))}.top_logprobs: 20 (the usual value)",
                             prefer_key=True))
    if method == "samples" or spec.scoring.fallback == "samples":
        for i, judge in enumerate(spec.panel):
            if judge.temperature == 0:
                where = ("judge", "temperature") if spec.judge is not None else ("judges", i, "temperature")
                out.append(p(where, "sampling at temperature 0 gives the same score every time",
                             hint="G-Eval samples at temperature 1", severity="warning"))
    if method != "verdicts" and "aggregation" in raw:
        out.append(p(("aggregation",), f"aggregation applies to method verdicts only, not {method}",
                     prefer_key=True, severity="warning"))
    return out


def _weights(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """TCVA weights that never rise from fully to none."""
    out: list[Problem] = []
    p = doc.problem
    w = spec.aggregation.weights
    values = [getattr(w, level) for level in VERDICT_LEVELS]
    for (a, va), (b, vb) in zip(zip(VERDICT_LEVELS, values), zip(VERDICT_LEVELS[1:], values[1:])):
        if va < vb:
            out.append(p(("aggregation", "weights", b),
                         f"weights must not rise from {a} to {b} ({va} < {vb}); "
                         "order: fully >= mostly >= partially >= minor >= none"))
    return out


def _splits(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """Fractions that sum to 1, and a gate the splits and levels can support."""
    out: list[Problem] = []
    p = doc.problem
    raw = doc.data if isinstance(doc.data, dict) else {}
    split = spec.split
    if isinstance(split, SplitByHash):
        total = sum(split.fractions.values())
        if abs(total - 1.0) > 1e-9:
            out.append(p(("split", "fractions"), f"fractions sum to {total:g}, not 1"))
        for name, share in split.fractions.items():
            if share < 0:
                out.append(p(("split", "fractions", name), "a fraction cannot be negative"))
        if split.by == "group" and spec.data.group is None:
            out.append(p(("split", "by"), "split by group needs data.group", hint="or set split.by: id"))
    cal = spec.calibration
    if cal.split == "all" and split is not None:
        out.append(p(("calibration", "split"),
                     "the gate is judged on all cases, dev included: not on data unseen by tuning",
                     hint="set calibration.split: test (the TCVA sweep chooses on dev and measures on test)",
                     severity="warning"))
    if cal.split != "all":
        if split is None:
            out.append(p(("calibration", "split"),
                         f"the gate is judged on split {cal.split!r}, but the spec defines no splits",
                         hint="add split: {by: group, fractions: {dev: 0.5, test: 0.5}}, or set "
                              "calibration.split: all"))
        elif isinstance(split, SplitByHash) and split.fractions.get(cal.split, 0) <= 0:
            out.append(p(("calibration", "split"), f"split {cal.split!r} gets no cases from split.fractions"))
    if cal.level == "group" and spec.data.group is None:
        out.append(p(("calibration", "level"), "level group needs data.group"))
    if cal.level == "system" and spec.data.system is None:
        out.append(p(("calibration", "level"), "level system needs data.system"))
    if spec.bootstrap.unit == "group" and spec.data.group is None and "bootstrap" in raw:
        out.append(p(("bootstrap", "unit"), "unit group needs data.group; cases are resampled instead",
                     severity="warning"))
    if isinstance(split, SplitByField) and split.field in spec.data.fields.values():
        out.append(p(("split", "field"), "the split column is also a template variable", severity="warning"))
    return out


def _data(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """Template variables that are not reserved, a human scale and rater columns that make sense."""
    out: list[Problem] = []
    p = doc.problem
    reserved = set(SPEC_VARS + CASE_VARS + PAIR_VARS)
    for var in spec.data.fields:
        if var in reserved:
            out.append(p(("data", "fields", var), f"'{var}' is a reserved template variable; rename it",
                         prefer_key=True))
    hs = spec.data.human_scale
    if hs is not None and not all(math.isfinite(v) and abs(v) <= MAX_SCALE for v in (hs.min, hs.max)):
        out.append(p(("data", "human_scale"), f"human_scale min and max must be numbers within +-{MAX_SCALE:g} "
                                              "(beyond, squares of score differences overflow)"))
    elif hs is not None and hs.min >= hs.max:
        out.append(p(("data", "human_scale"), "human_scale min must be below max"))
    if isinstance(spec.data.human, list):
        if len(spec.data.human) != len(set(spec.data.human)):
            out.append(p(("data", "human"), "the same rater column is listed twice"))
        if not spec.data.human:
            out.append(p(("data", "human"), "list at least one human score column"))
    return out


def _language(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """A language some installed plugin checks, and penalties for kinds it finds."""
    out: list[Problem] = []
    p = doc.problem
    if spec.language is not None:
        registry = load_plugins()
        missing = registry.missing_language(spec.language.code)
        if missing is not None:
            out.append(p(("language", "code"), missing))
        else:
            kinds = sorted(k for k, prefix in registry.finding_kinds.items()
                           if registry.checker_for(spec.language.code) is registry.languages.get(prefix))
            for kind, amount in spec.language.penalty.items():
                if not (math.isfinite(amount) and amount >= 0):  # (one below 0 raised scores past the rubric's max)
                    out.append(p(("language", "penalty", kind), f"penalty {amount:g} for {kind!r} must be a number "
                                                                "of at least 0: it is subtracted per finding"))
                if kind not in kinds:
                    out.append(p(("language", "penalty", kind), f"unknown finding kind {kind!r}",
                                 hint=f"the {spec.language.code} checker finds: {', '.join(kinds) or 'nothing'}",
                                 prefer_key=True))
    return out


def halfwidth_problem(target: float, scale: tuple[float, float], source: str) -> str | None:
    """Why ``estimate.target_halfwidth`` cannot be meant on the human scale ``scale``, or None."""
    width = scale[1] - scale[0]
    if width > 0 and target > width:
        return (f"target_halfwidth {target:g} is larger than the whole human scale ({scale[0]:g}..{scale[1]:g}, "
                f"{source}): an interval that wide says nothing")
    return None


def _estimate(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """A target half-width that fits on the human scale (when data.human_scale gives it)."""
    e, hs = spec.estimate, spec.data.human_scale
    if e is None or e.target_halfwidth is None or hs is None:
        return []
    why = halfwidth_problem(e.target_halfwidth, (hs.min, hs.max), "data.human_scale")
    return [doc.problem(("estimate", "target_halfwidth"), why)] if why else []


CHECKS = (_judges, _pairwise, _rubric, _scoring, _weights, _splits, _data, _language, _estimate)


def semantic_problems(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """Every problem that needs more than one key, in the order of the spec's sections."""
    return [problem for check in CHECKS for problem in check(spec, doc)]


def file_problems(spec: Spec, doc: YamlDocument, base_dir: Path,
                  template_exists: Callable[[str], bool]) -> list[Problem]:
    out = []
    data_path = base_dir / spec.data.path
    if not data_path.is_file():
        out.append(doc.problem(("data", "path"), f"data file not found: {spec.data.path} "
                                                 f"(relative to {display_path(base_dir)})"))
    if spec.prompt.template is not None and not template_exists(spec.prompt.template):
        out.append(doc.problem(("prompt", "template"), f"template not found: {spec.prompt.template} "
                                                       f"(relative to {display_path(base_dir)})"))
    return out
