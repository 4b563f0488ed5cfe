"""Stage: analysis results -> a report (JSON, Markdown, self-contained HTML).

The report is committed to git and reviewed in pull requests, so it is
deterministic: the same inputs give the same bytes. There are no timestamps
or machine-dependent paths in it, numbers are rounded to fixed digits, and
every list has a fixed order. A new version of a spec then shows up in
``git diff`` as exactly what changed.

:func:`build` makes one JSON-ready dict (the contract's keys first); the
renderers only format it. Case text is escaped in Markdown and HTML.
"""

from __future__ import annotations

import html
import json
from typing import Any, Sequence

import numpy as np

from .analysis import (Frame, correlations, gate, level_result, levels_present,
                       splits_present, sweep, validity)
from .diagnostics import (diagnose, language_summary, length_quartiles, panel_summary, position_summary,
                          rounded)
from .runs import Loaded
from .stats import METRICS

TOP_DISAGREEMENTS = 10
EXCERPT = 160


def _estimate(est) -> dict[str, Any]:
    return {"value": rounded(est.value), "ci_low": rounded(est.ci_low), "ci_high": rounded(est.ci_high)}


def correlation_block(corr) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split, levels in corr.items():
        out[split] = {}
        for level, res in levels.items():
            entry: dict[str, Any] = {m: _estimate(res.estimates[m]) for m in METRICS}
            entry["n"] = res.n
            if level == "group":
                entry["skipped_groups"] = res.skipped
            out[split][level] = entry
    return out


def _cases_block(frame: Frame, splits: Sequence[str]) -> dict[str, Any]:
    n, valid, invalid, missing, rate = validity(frame)
    block: dict[str, Any] = {"n": n, "valid": valid, "invalid": invalid, "missing": missing, "validity": rounded(rate),
                             "labelled": int((~np.isnan(frame.human)).sum())}
    per_split = {}
    for split in splits:
        if split == "all":
            continue
        sn, sv, si, sm, sr = validity(frame, split)
        per_split[split] = {"n": sn, "valid": sv, "invalid": si, "missing": sm, "validity": rounded(sr)}
    if per_split:
        block["splits"] = per_split
    return block


def disagreements(frame: Frame, limit: int = TOP_DISAGREEMENTS) -> list[dict[str, Any]]:
    j, h = frame.norm_score(), frame.norm_human()
    keep = np.nonzero(~np.isnan(j) & ~np.isnan(h))[0]
    gaps = np.abs(j[keep] - h[keep])
    order = sorted(range(len(keep)), key=lambda k: (-round(float(gaps[k]), 6), frame.ids[keep[k]]))[:limit]
    out = []
    for k in order:
        i = int(keep[k])
        text = " ".join(frame.texts[i].split())
        out.append({"case_id": frame.ids[i], "split": frame.splits[i], "judge": rounded(j[i]), "human": rounded(h[i]),
                    "gap": rounded(float(gaps[k])), "candidate": text[:EXCERPT] + ("..." if len(text) > EXCERPT else "")})
    return out


def per_judge(frame: Frame, spec) -> dict[str, Any] | None:
    if len(frame.judge_scores) < 2:
        return None
    out: dict[str, Any] = {}
    split = spec.calibration.split if spec.calibration.split in splits_present(frame, spec) else "all"
    level = spec.calibration.level if spec.calibration.level in levels_present(frame) else "dataset"
    for name, scores in frame.judge_scores.items():
        res = level_result(frame, spec, split, level, scores=scores)
        st = frame.judge_status[name]
        out[name] = {"split": split, "level": level, "n": res.n,
                     "validity": rounded(st.count("valid") / len(st)) if st else None,
                     **{m: _estimate(res.estimates[m]) for m in METRICS}}
    return out


def sweep_block(sw) -> dict[str, Any]:
    return {"metric": sw.metric, "level": sw.level, "chosen_on": "dev", "chosen_temperature": sw.chosen,
            "grid": [{"temperature": r.temperature, "p": rounded(r.p), "dev": rounded(r.dev), "dev_n": r.dev_n}
                     for r in sw.rows],
            "test": None if sw.test is None else {"split": sw.test_split, **_estimate(sw.test), "n": sw.test.n}}


def sweep_markdown(s: dict[str, Any]) -> list[str]:
    lines = [f"{s['metric']} at {s['level']} level on dev for each temperature; the best one is chosen on dev and "
             "only then measured on test.", ""]
    lines += table(["T:", "p:", "dev:", "dev n:"], [
        [f"{row['temperature']:.2f}", f"{row['p']:.3f}",
         f3(row["dev"]) + (" (chosen)" if row["temperature"] == s["chosen_temperature"] else ""), row["dev_n"]]
        for row in s["grid"]])
    t = s["test"]
    lines.append("")
    if t:
        lines.append(f"Chosen T = {s['chosen_temperature']}: {s['metric']} on {t['split']} {est_md(t)} (n = {t['n']}).")
    else:
        lines.append("No temperature gives a defined correlation on dev.")
    return lines


def build(loaded: Loaded, temperature: float | None = None,
          extra: dict[str, Any] | None = None) -> tuple[dict[str, Any], Frame]:
    """The whole report as a JSON-ready dict with a fixed key order (and the frame it came from)."""
    source = loaded.source
    spec = source.spec
    frame = loaded.frame(temperature)
    corr = correlations(frame, spec)
    g = gate(frame, spec, corr)
    diag = diagnose(frame, spec)
    splits = splits_present(frame, spec)
    judges = sorted(frame.judge_scores) or list(source.run_judges)
    report: dict[str, Any] = {
        "spec": {"name": spec.name, "version": spec.version, "fingerprint": source.judging_fp,
                 "analysis_fingerprint": source.analysis_fp, "file": loaded.spec_file},
        "run": {"id": loaded.run.run_id, "kind": loaded.run.kind,
                "judge": judges[0] if len(judges) == 1 else judges, "method": spec.scoring.method,
                "ensemble": spec.ensemble if len(judges) > 1 else None,
                "temperature": rounded(frame.temperature), "data": source.data_display,
                "data_sha256": source.run_data_sha256},
        "cases": _cases_block(frame, splits),
        "correlation": correlation_block(corr),
        "gate": {"metric": g.metric, "level": g.level, "split": g.split, "threshold": g.threshold,
                 "value": rounded(g.value), "ci_low": rounded(g.ci_low), "ci_high": rounded(g.ci_high), "n": g.n,
                 "validity": rounded(g.validity), "min_validity": g.min_validity, "passed": g.passed, "reason": g.reason},
        "diagnostics": {"validity": diag.validity, "compression": diag.compression,
                        "length": {**diag.length, **({"quartiles": length_quartiles(frame)}
                                                     if spec.bias.length == "report" else {})},
                        "pass_mark": diag.pass_mark, "position": position_summary(loaded.judgments),
                        "language": language_summary(frame, spec, loaded.findings)},
        "sample_size": diag.sample_size,
        "agreement": diag.agreement,
        "judges": per_judge(frame, spec),
        "panel": panel_summary(frame, loaded.run.judges if isinstance(loaded.run.judges, list) else []),
        "sweep": None,
        "disagreements": disagreements(frame),
        "bootstrap": {"draws": spec.bootstrap.draws, "seed": spec.bootstrap.seed, "unit": spec.bootstrap.unit,
                      "level": spec.bootstrap.level},
        "warnings": list(frame.warnings),
    }
    if spec.scoring.method == "verdicts" and spec.split is not None:
        report["sweep"] = sweep_block(sweep(source, loaded.case_ids, loaded.judgments, findings=loaded.findings))
    if extra:
        report.update(extra)
    return report, frame


# -- JSON -------------------------------------------------------------------------------
def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# -- Markdown ------------------------------------------------------------------------------
def md_escape(text: Any) -> str:
    """Case text inside a Markdown table: no HTML, no table breaks, no emphasis surprises."""
    s = html.escape(str(text), quote=False)
    for ch in ("\\", "|", "`", "*", "_", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return s.replace("\n", " ")


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table; a column name ending in ':' is right-aligned. Cells are formatted already."""
    names = [c.rstrip(":") for c in columns]
    align = ["---:" if c.endswith(":") else "---" for c in columns]
    out = ["| " + " | ".join(names) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return out


def f3(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def est_md(e: dict[str, Any]) -> str:
    if e["value"] is None:
        return "-"
    if e["ci_low"] is None:
        return f3(e["value"])
    return f"{f3(e['value'])} [{f3(e['ci_low'])}, {f3(e['ci_high'])}]"


def to_markdown(r: dict[str, Any]) -> str:
    spec, run, cases, g = r["spec"], r["run"], r["cases"], r["gate"]
    judge = run["judge"] if isinstance(run["judge"], str) else ", ".join(run["judge"])
    lines = [f"# {spec['name']} v{spec['version']}: calibration report", ""]
    lines += [f"- spec: `{spec['file']}`, judging fingerprint `{spec['fingerprint'][:10]}`, "
              f"analysis fingerprint `{spec['analysis_fingerprint'][:10]}`",
              f"- run: `{run['id']}` ({run['kind']}), judge `{judge}`, method {run['method']}"
              + (f", temperature {run['temperature']}" if run["temperature"] is not None else ""),
              f"- data: `{run['data']}` (sha256 `{(run['data_sha256'] or '')[:12]}`)",
              f"- bootstrap: {r['bootstrap']['draws']} draws of {r['bootstrap']['unit']}s, seed "
              f"{r['bootstrap']['seed']}, {r['bootstrap']['level']:.0%} percentile intervals", ""]
    for w in r["warnings"]:
        lines += [f"> warning: {md_escape(w)}", ""]
    verdict = "PASSED" if g["passed"] else "FAILED"
    ci = f" [{f3(g['ci_low'])}, {f3(g['ci_high'])}]" if g["ci_low"] is not None else ""
    lines += [f"## Gate: {verdict}", "",
              f"{g['metric']} at {g['level']} level on the {g['split']} split: {f3(g['value'])}{ci} "
              f"(n = {g['n']}), threshold {g['threshold']}; validity {f3(g['validity'])}, "
              f"minimum {g['min_validity']}.", "", f"{verdict.lower()}: {g['reason']}", ""]

    lines += ["## Cases", ""] + table(
        ["split", "cases:", "valid:", "invalid:", "missing:", "validity:"],
        [[split, c["n"], c["valid"], c["invalid"], c["missing"], f3(c["validity"])]
         for split, c in [("all", cases), *(cases.get("splits") or {}).items()]])
    lines += ["", f"{cases['labelled']} of {cases['n']} cases have a human score. Invalid and missing judgments stay "
                  "in every denominator.", ""]
    reasons = r["diagnostics"]["validity"]["reasons"]
    if reasons:
        lines += table(["not valid because", "cases:"], [[md_escape(k), v] for k, v in reasons.items()])
        lines.append("")

    lines += ["## Correlation with human scores", ""] + table(
        ["split", "level", "n:", "spearman:", "pearson:", "kendall:"],
        [[split, level, f"{e['n']}" + (f" (+{e['skipped_groups']} skipped)" if e.get("skipped_groups") else ""),
          est_md(e["spearman"]), est_md(e["pearson"]), est_md(e["kendall"])]
         for split, levels in r["correlation"].items() for level, e in levels.items()])
    lines += ["", "n counts cases with a valid judgment and a human score (groups at group level, systems at system "
                  "level). Group level is the mean of per-group correlations; groups where either side is constant "
                  "are skipped.", ""]

    if r.get("judges"):
        lines += ["### Per judge", ""] + table(
            ["judge", "validity:", "n:", "spearman:", "pearson:", "kendall:"],
            [[md_escape(name), f3(e["validity"]), e["n"], est_md(e["spearman"]), est_md(e["pearson"]),
              est_md(e["kendall"])] for name, e in r["judges"].items()])
        lines.append("")
        p = r.get("panel") or {}
        if p.get("alpha_interval") is not None or "n" in p:
            lines += [f"Agreement between the judges: Krippendorff's alpha (interval) {f3(p.get('alpha_interval'))} "
                      f"over {p.get('n')} cases judged by at least two of them. The panel's score is the "
                      f"{r['run'].get('ensemble', 'mean')} of its judges.", ""]
    p = r.get("panel") or {}
    if p.get("self_preference"):
        lines += ["### Self-preference", "",
                  "Judge minus human score (0..1) on candidates of the judge's own model family and on the others.", ""]
        lines += table(["judge", "family", "own n:", "own gap:", "other n:", "other gap:", "difference:"],
                       [[md_escape(row["judge"]), md_escape(row["family"]), row["own_n"], f3(row["own_gap"]),
                         row["other_n"], f3(row["other_gap"]), f3(row["self_preference"])]
                        for row in p["self_preference"]])
        lines.append("")
        for flag in p.get("flags", []):
            lines += [f"> self-preference: {md_escape(flag)}", ""]

    d = r["diagnostics"]
    c = d["compression"]
    lines += ["## Diagnostics", "", "### Scale compression", ""]
    if c.get("note"):
        lines += [c["note"], ""]
    else:
        lines += [f"Spread on a 0..1 scale: judge {f3(c['judge_sd'])}, humans {f3(c['human_sd'])} "
                  f"(ratio {f3(c['sd_ratio'])}); scores at the ends of the scale: judge "
                  f"{f3(c['judge_extreme_share'])}, humans {f3(c['human_extreme_share'])}.", ""]
        lines += [f"- {md_escape(x)}" for x in c["reasons"]] or ["No sign of compression."]
        if c["suggestion"]:
            lines += ["", f"Suggestion: {c['suggestion']}"]
        lines.append("")
    lb = d["length"]
    lines += ["### Length bias", ""]
    if lb.get("judge_vs_length") is None:
        lines += [lb.get("note") or "not computed", ""]
    else:
        lines += [f"Spearman with the candidate's length in words: judge {f3(lb['judge_vs_length'])}, humans "
                  f"{f3(lb['human_vs_length'])}, difference {f3(lb['difference'])}."
                  + (f" {lb['note']}." if lb.get("note") else ""), ""]
    if lb.get("quartiles"):
        lines += ["By quarter of candidate length (scores on 0..1):", ""] + table(
            ["quarter:", "words", "n:", "judge:", "human:", "gap:"],
            [[q["quartile"], q["words"], q["n"], f3(q["judge"]), f3(q["human"]), f"{q['gap']:+.3f}"]
             for q in lb["quartiles"]])
        lines.append("")
    pos = d.get("position")
    if pos:
        lines += ["### Position bias", "",
                  f"Both orders valid for {pos['both_orders_valid']} cases; the judge picked the same candidate in "
                  f"both orders for {pos['consistent']} (position consistency {f3(pos['consistency'])}). "
                  f"Resolution: {pos['rule']}.", ""]
    lang = d.get("language")
    if lang:
        lines += [f"### Language pre-checks ({lang['code']}, formality {lang['formality']})", "",
                  f"{lang['cases_flagged']} of {lang['cases']} cases have findings. Mean human score (0..1): "
                  f"flagged {f3(lang['human_flagged'])}, clean {f3(lang['human_clean'])}."
                  + (f" Penalty per finding: {', '.join(f'{k} {v}' for k, v in lang['penalty'].items())}."
                     if lang["penalty"] else ""), ""]
        if lang["kinds"]:
            lines += table(["kind", "cases:", "findings:", "example"],
                           [[kind, k["cases"], k["findings"],
                             f"{md_escape(k['examples'][0]['case_id'])}: {md_escape(k['examples'][0]['message'])}"]
                            for kind, k in lang["kinds"].items()])
            lines.append("")
    pm = d["pass_mark"]
    if pm:
        o = pm["overall"]
        lines += ["### Accuracy at the pass mark", "",
                  f"A case is correct when judge and human differ by at most {pm['pass_mark']} on a 0..1 scale.", ""]
        lines += table(["category", "n:", "validity:", "accuracy:", "accuracy when valid:"],
                       [[md_escape(name), m["n"], f3(m["validity"]), f3(m["accuracy"]), f3(m["accuracy_when_valid"])]
                        for name, m in [("all", o), *pm["categories"].items()]])
        lines += ["", f"Mean accuracy over categories: {f3(pm['macro_category_accuracy'])}.", ""]

    ss = r["sample_size"]
    lines += ["## Sample size", ""]
    if ss["required"] is None:
        lines += [ss["method"], ""]
    else:
        lines += [f"To tell {ss['alternative']} from 0.5: {ss['required']} cases ({ss['method']}).",
                  f"The {ss['split']} split has {ss['available']} usable cases: "
                  + ("enough." if ss["enough"] else "**not enough**; the gate's verdict is fragile."), "",
                  f"Formula: `{ss['formula']}`", ""]
    if r.get("agreement"):
        a = r["agreement"]
        lines += ["## Human agreement", "",
                  f"Krippendorff's alpha over {len(a['raters'])} raters and {a['n']} cases: interval "
                  f"{f3(a['alpha_interval'])}, ordinal {f3(a['alpha_ordinal'])}.", ""]
        if a.get("warning"):
            lines += [f"> warning: {a['warning']}", ""]
    if r.get("sweep"):
        lines += ["## TCVA temperature sweep", ""] + sweep_markdown(r["sweep"]) + [""]
    if r["disagreements"]:
        lines += ["## Largest disagreements", "", "Judge and human scores on a 0..1 scale.", ""] + table(
            ["case", "split", "judge:", "human:", "gap:", "candidate"],
            [[md_escape(x["case_id"]), x["split"] or "-", f3(x["judge"]), f3(x["human"]), f3(x["gap"]),
              md_escape(x["candidate"])] for x in r["disagreements"]])
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- HTML ------------------------------------------------------------------------------
def to_html(r: dict[str, Any], frame: Frame) -> str:
    """One self-contained file: inline CSS, inline SVG plots, no scripts, nothing loaded from elsewhere."""
    from . import mdhtml, plots

    body = mdhtml.render(to_markdown(r))
    figures = "".join(f"<figure><figcaption>{html.escape(title)}</figcaption>{svg}</figure>"
                      for title, svg in plots.all_plots(frame, r).items())
    title = html.escape(f"{r['spec']['name']} v{r['spec']['version']}: calibration report")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">\n"
            f"<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n{body}\n"
            f"<section class=\"plots\"><h2>Plots</h2>{figures}</section>\n</main>\n</body>\n</html>\n")


CSS = ("body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;background:#fafafa;color:#1a1a1a}"
       "main{max-width:1100px;margin:0 auto;padding:24px}table{border-collapse:collapse;margin:8px 0 16px}"
       "td,th{border:1px solid #ddd;padding:4px 8px;font-size:14px}th{background:#f0f0f0}"
       "code{background:#eee;padding:1px 4px;border-radius:3px}blockquote{border-left:4px solid #e0a800;margin:8px 0;"
       "padding:4px 12px;background:#fff8e1}figure{display:inline-block;margin:8px;vertical-align:top;background:#fff;"
       "border:1px solid #ddd;padding:8px}figcaption{font-weight:600;margin-bottom:4px}svg{max-width:100%;height:auto}"
       "h2{border-bottom:1px solid #ddd;padding-bottom:4px}")
