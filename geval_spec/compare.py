"""Stage: two runs (or two spec versions) -> what changed, by how much, and whether it is noise.

Each side is a run id, or a spec REF that stands for the newest completed run
with that REF's judging fingerprint on the same data (its own analysis
settings apply: a version that only changes aggregation reuses the other's
judgments and sends nothing).

The comparison uses B's analysis settings (splits, groups, bootstrap,
calibration) for both sides and the cases both runs judged. For every split
and level it gives each correlation for A and for B, the difference B - A
and a paired bootstrap interval of the difference: every draw resamples the
same units for both sides, and only cases valid on both sides and labelled
by humans are used. Validity is compared separately.

Per-case agreement with the human label: a case agrees when its judgment is
valid and the judge's and the human's scores, both on 0..1, differ by at most
``calibration.pass_mark`` (0.25 when unset: one step of a 1..5 rubric).
Invalid and missing judgments disagree. The difference in agreement rates
gets seed 003's paired bootstrap (on whole groups with ``unit: group``).

The regression gate: B regressed when it is worse than A on the calibration
metric at the calibration level and split, and the whole interval of the
difference lies below ``-margin``.
"""

from __future__ import annotations

import difflib
import io
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from .analysis import Frame, levels_present, splits_present
from .hygiene import paired_resample
from .diagnostics import rounded
from .report import f3, md_escape, table
from .runs import Loaded
from .stats import METRICS, paired_difference

DEFAULT_TOLERANCE = 0.25
TOP_MOVED = 10


def resolved_yaml(resolved: dict[str, Any]) -> list[str]:
    """The resolved spec (all defaults filled, steps resolved) as stable YAML lines."""
    from ruamel.yaml import YAML

    spec = resolved.get("spec") or {}
    data: dict[str, Any] = {"spec": spec}
    if isinstance(spec.get("steps"), dict):  # generated steps: show the frozen ones too
        data["generated_steps"] = resolved.get("steps")
    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    y.representer.sort_base_mapping_type_on_output = False
    y.width = 4096
    buf = io.StringIO()
    y.dump(data, buf)
    lines = buf.getvalue().splitlines()
    template = (resolved.get("template") or {})
    if template.get("text") is not None:
        lines += [f"template: {template.get('name')}"] + [f"  | {t}" for t in template["text"].splitlines()]
    return lines


def change_class(a: Loaded, b: Loaded) -> str:
    if a.source.judging_fp != b.source.judging_fp:
        return "judging"
    if a.source.analysis_fp != b.source.analysis_fp:
        return "analysis"
    return "metadata"


CLASS_TEXT = {"judging": "new judgments needed: what the judge is sent differs",
              "analysis": "analysis only: recomputed from the same kind of judgments at zero cost",
              "metadata": "metadata only: the same judging and analysis"}


@dataclass(frozen=True)
class Aligned:
    ids: list[str]
    a: np.ndarray  # A's scores, NaN unless valid
    b: np.ndarray
    a_status: list[str]
    b_status: list[str]
    frame: Frame  # B's frame restricted to the common cases


def align(fa: Frame, fb: Frame) -> Aligned:
    index_a = {cid: i for i, cid in enumerate(fa.ids)}
    keep = [i for i, cid in enumerate(fb.ids) if cid in index_a]
    ia = [index_a[fb.ids[i]] for i in keep]
    sub = _subframe(fb, keep)
    return Aligned(ids=[fb.ids[i] for i in keep], a=np.asarray(fa.score)[ia], b=np.asarray(fb.score)[keep],
                   a_status=[fa.status[i] for i in ia], b_status=[fb.status[i] for i in keep], frame=sub)


def _subframe(f: Frame, keep: list[int]) -> Frame:
    pick = lambda seq: tuple(seq[i] for i in keep)  # noqa: E731
    return Frame(ids=pick(f.ids), groups=pick(f.groups), systems=pick(f.systems), categories=pick(f.categories),
                 families=pick(f.families), splits=pick(f.splits), human=np.asarray(f.human)[keep],
                 raters=np.asarray(f.raters)[keep], score=np.asarray(f.score)[keep], status=pick(f.status),
                 reasons=pick(f.reasons), lengths=np.asarray(f.lengths)[keep], texts=pick(f.texts),
                 scale=f.scale, human_scale=f.human_scale, temperature=f.temperature, warnings=f.warnings)


def _norm(scores: np.ndarray, scale: tuple[float, float]) -> np.ndarray:
    lo, hi = scale
    return (scores - lo) / (hi - lo) if hi > lo else scores


def compare(a: Loaded, b: Loaded, margin: float | None = None) -> dict[str, Any]:
    spec = b.source.spec
    fa = a.frame()
    fb = b.frame()
    al = align(fa, fb)
    frame = al.frame
    warnings = list(dict.fromkeys(fa.warnings + fb.warnings))
    if a.source.run_data_sha256 and b.source.run_data_sha256 and a.source.run_data_sha256 != b.source.run_data_sha256:
        warnings.append("A and B were judged on different data files; only their common case ids are compared")
    if len(al.ids) < max(len(fa.ids), len(fb.ids)):
        warnings.append(f"{len(al.ids)} cases are in both runs (A {len(fa.ids)}, B {len(fb.ids)}); "
                        "only those are compared")
    if fa.scale != fb.scale:
        warnings.append(f"A's scores are on {fa.scale}, B's on {fb.scale}: correlations compare, raw scores do not")
    b_split = spec.split
    if a.source.spec.split != b_split:
        warnings.append("A and B define splits differently; B's splits are used for both")

    h = np.asarray(frame.human)
    both = ~np.isnan(al.a) & ~np.isnan(al.b) & ~np.isnan(h)
    corr: dict[str, Any] = {}
    bs = spec.bootstrap
    for split in splits_present(frame, spec):
        corr[split] = {}
        m = frame.mask(split) & both
        groups = [g if g is not None else i for g, i in zip(np.asarray(frame.groups, dtype=object)[m],
                                                             np.asarray(frame.ids, dtype=object)[m])]
        units = groups if bs.unit == "group" and any(g is not None for g in frame.groups) else \
            list(np.asarray(frame.ids, dtype=object)[m])
        systems = list(np.asarray(frame.systems, dtype=object)[m])
        for level in levels_present(frame):
            entry: dict[str, Any] = {}
            n = 0
            for metric in METRICS:
                d = paired_difference(al.a[m], al.b[m], h[m], metric, level, units=units, draws=bs.draws,
                                      seed=bs.seed, conf=bs.level, groups=groups,
                                      systems=systems if level == "system" else None)
                entry[metric] = {"a": rounded(d.a), "b": rounded(d.b), "difference": rounded(d.diff), "ci_low": rounded(d.ci_low),
                                 "ci_high": rounded(d.ci_high)}
                n = d.n
            entry["n"] = n
            corr[split][level] = entry

    # per-case agreement with the human label
    tol = spec.calibration.pass_mark if spec.calibration.pass_mark is not None else DEFAULT_TOLERANCE
    hn = _norm(h, frame.human_scale)
    an, bn = _norm(al.a, fa.scale), _norm(al.b, fb.scale)
    labelled = ~np.isnan(hn)
    with np.errstate(invalid="ignore"):
        agree_a = np.where(np.isnan(an), False, np.abs(an - hn) <= tol + 1e-12) & labelled
        agree_b = np.where(np.isnan(bn), False, np.abs(bn - hn) <= tol + 1e-12) & labelled
    agreement: dict[str, Any] = {"tolerance": tol, "definition": (
        f"valid and |judge - human| <= {tol} on a 0..1 scale; invalid or missing judgments disagree"),
        "n": int(labelled.sum())}
    if labelled.sum() >= 2:
        da = agree_a[labelled].astype(float)
        db = agree_b[labelled].astype(float)
        unit_groups = [g if g is not None else i for g, i, k in zip(frame.groups, frame.ids, labelled) if k] \
            if bs.unit == "group" and any(g is not None for g in frame.groups) else None
        diff, lo, hi, _ = paired_resample(db - da, bs.draws, bs.seed, groups=unit_groups, level=bs.level)
        agreement.update({"a": rounded(float(da.mean())), "b": rounded(float(db.mean())), "difference": rounded(diff),
                          "ci_low": rounded(lo), "ci_high": rounded(hi),
                          "resampled": "groups" if unit_groups is not None else "cases"})

    # validity
    va = sum(1 for s in al.a_status if s == "valid")
    vb = sum(1 for s in al.b_status if s == "valid")
    n_common = len(al.ids)
    newly_invalid = sorted(cid for cid, sa, sb in zip(al.ids, al.a_status, al.b_status) if sa == "valid" != sb)
    newly_valid = sorted(cid for cid, sa, sb in zip(al.ids, al.a_status, al.b_status) if sb == "valid" != sa)
    validity = {"n": n_common, "a": rounded(va / n_common) if n_common else None,
                "b": rounded(vb / n_common) if n_common else None,
                "difference": rounded((vb - va) / n_common) if n_common else None,
                "newly_invalid": len(newly_invalid), "newly_valid": len(newly_valid),
                "newly_invalid_cases": newly_invalid[:10], "newly_valid_cases": newly_valid[:10]}

    # cases that moved most (0..1 scale)
    moved = []
    ok = ~np.isnan(an) & ~np.isnan(bn)
    shift = np.where(ok, bn - an, np.nan)
    order = sorted((i for i in range(n_common) if ok[i]), key=lambda i: (-round(abs(float(shift[i])), 6), al.ids[i]))
    for i in order[:TOP_MOVED]:
        if abs(shift[i]) < 1e-9:
            break
        moved.append({"case_id": al.ids[i], "split": frame.splits[i], "a": rounded(float(an[i])), "b": rounded(float(bn[i])),
                      "shift": rounded(float(shift[i])), "human": rounded(float(hn[i])) if labelled[i] else None})

    # regression gate
    cal = spec.calibration
    m = margin if margin is not None else cal.margin
    entry = corr.get(cal.split, {}).get(cal.level, {}).get(cal.metric)
    if entry is None or entry["difference"] is None:
        regression = {"metric": cal.metric, "level": cal.level, "split": cal.split, "margin": m,
                      "difference": None, "ci_low": None, "ci_high": None, "regressed": False,
                      "reason": "not comparable: the split or level is missing, or a correlation is undefined"}
    else:
        regressed = entry["difference"] < 0 and entry["ci_high"] is not None and entry["ci_high"] < -m
        if regressed:
            reason = (f"B is worse: {cal.metric} {entry['difference']:+.3f}, interval [{entry['ci_low']:.3f}, "
                      f"{entry['ci_high']:.3f}] lies entirely below -{m}")
        elif entry["difference"] < 0:
            reason = (f"B is lower by {-entry['difference']:.3f}, but the interval [{entry['ci_low']:.3f}, "
                      f"{entry['ci_high']:.3f}] reaches -{m} or above: not a significant regression")
        else:
            reason = f"B is not worse ({cal.metric} {entry['difference']:+.3f})"
        regression = {"metric": cal.metric, "level": cal.level, "split": cal.split, "margin": m,
                      "difference": entry["difference"], "ci_low": entry["ci_low"], "ci_high": entry["ci_high"],
                      "regressed": bool(regressed), "reason": reason}

    def side(x: Loaded) -> dict[str, Any]:
        s = x.source.spec
        return {"ref": x.label, "run": x.run.run_id, "spec": s.name, "version": s.version, "file": x.spec_file,
                "judging_fingerprint": x.source.judging_fp, "analysis_fingerprint": x.source.analysis_fp,
                "method": s.scoring.method, "temperature": rounded(fa.temperature if x is a else fb.temperature)}

    cls = change_class(a, b)
    diff = list(difflib.unified_diff(resolved_yaml(a.resolved), resolved_yaml(b.resolved), "A", "B", lineterm="",
                                     n=2))
    return {"a": side(a), "b": side(b), "change": {"class": cls, "meaning": CLASS_TEXT[cls]},
            "spec_diff": diff, "cases": n_common, "correlation": corr, "agreement": agreement,
            "validity": validity, "moved": moved, "regression": regression,
            "bootstrap": {"draws": bs.draws, "seed": bs.seed, "unit": bs.unit, "level": bs.level},
            "warnings": warnings}


def to_json(c: dict[str, Any]) -> str:
    return json.dumps(c, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _d(e: dict[str, Any]) -> str:
    if e["difference"] is None:
        return "-"
    ci = f" [{e['ci_low']:+.3f}, {e['ci_high']:+.3f}]" if e["ci_low"] is not None else ""
    return f"{e['difference']:+.3f}{ci}"


def to_markdown(c: dict[str, Any]) -> str:
    a, b, r = c["a"], c["b"], c["regression"]
    lines = [f"# Compare: {md_escape(a['ref'])} -> {md_escape(b['ref'])}", "",
             f"- A: `{a['run']}`, {a['spec']} v{a['version']} (`{a['file']}`), judging `{a['judging_fingerprint'][:10]}`, "
             f"analysis `{a['analysis_fingerprint'][:10]}`",
             f"- B: `{b['run']}`, {b['spec']} v{b['version']} (`{b['file']}`), judging `{b['judging_fingerprint'][:10]}`, "
             f"analysis `{b['analysis_fingerprint'][:10]}`",
             f"- change: **{c['change']['class']}** ({c['change']['meaning']})",
             f"- {c['cases']} cases in both runs; B's splits, groups and bootstrap ({c['bootstrap']['draws']} draws of "
             f"{c['bootstrap']['unit']}s, seed {c['bootstrap']['seed']}) are used for both", ""]
    for w in c["warnings"]:
        lines += [f"> warning: {md_escape(w)}", ""]
    verdict = "REGRESSION" if r["regressed"] else "no significant regression"
    lines += [f"## Verdict: {verdict}", "", f"{r['metric']} at {r['level']} level on {r['split']}, margin {r['margin']}: "
              f"{md_escape(r['reason'])}.", ""]
    lines += ["## Correlation with human scores", "",
              "B - A with a paired bootstrap interval; n counts cases valid on both sides with a human score.", ""]
    lines += table(["split", "level", "n:", "spearman A:", "spearman B:", "B - A:", "pearson B - A:", "kendall B - A:"],
                   [[split, level, e["n"], f3(e["spearman"]["a"]), f3(e["spearman"]["b"]), _d(e["spearman"]),
                     _d(e["pearson"]), _d(e["kendall"])]
                    for split, levels in c["correlation"].items() for level, e in levels.items()])
    lines.append("")
    ag = c["agreement"]
    lines += ["## Agreement with the human label", "", f"A case agrees when it is {ag['definition']}.", ""]
    if "a" in ag:
        lines += [f"A {f3(ag['a'])}, B {f3(ag['b'])}: {_d(ag)} over {ag['n']} labelled cases "
                  f"(seed 003's paired bootstrap, resampling {ag['resampled']}).", ""]
    v = c["validity"]
    lines += ["## Validity", "", f"A {f3(v['a'])}, B {f3(v['b'])} ({v['difference']:+.3f}); "
              f"{v['newly_invalid']} case(s) newly invalid, {v['newly_valid']} newly valid.", ""]
    if v["newly_invalid_cases"]:
        lines += ["Newly invalid: " + ", ".join(f"`{md_escape(x)}`" for x in v["newly_invalid_cases"]), ""]
    if c["moved"]:
        lines += ["## Cases that moved most", "", "Scores on a 0..1 scale.", ""] + table(
            ["case", "split", "A:", "B:", "shift:", "human:"],
            [[md_escape(x["case_id"]), x["split"] or "-", f3(x["a"]), f3(x["b"]), f"{x['shift']:+.3f}", f3(x["human"])]
             for x in c["moved"]])
        lines.append("")
    lines += ["## Spec diff", ""]
    if c["spec_diff"]:
        fence = "`" * max(3, 1 + max((len(run) for line in c["spec_diff"]
                                      for run in _backtick_runs(line)), default=0))
        lines += [f"{fence}diff"] + c["spec_diff"] + [fence]
    else:
        lines.append("The resolved specs are identical.")
    return "\n".join(lines).rstrip() + "\n"


def _backtick_runs(line: str) -> list[str]:
    import re

    return re.findall(r"`+", line)
