"""A :class:`~geval_spec.analysis.results.Calibration` as Markdown (the report reviewed in pull requests)."""

from __future__ import annotations

from geval_spec.analysis.results import (Accuracy, Calibration, Compression, Diagnostics, LengthTooFew, SampleSize,
                                         SweepBlock)
from geval_spec.output.estimate import estimate_markdown
from geval_spec.output.markdown import document, est_md, f3, md_code, md_escape, table


def _header(r: Calibration) -> list[str]:
    spec, run, b = r.spec, r.run, r.bootstrap
    judge = run.judge if isinstance(run.judge, str) else ", ".join(run.judge)
    lines = [f"# {spec.name} v{spec.version}: calibration report", "",
             f"- spec: {md_code(spec.file)}, judging fingerprint `{spec.fingerprint[:10]}`, "
             f"analysis fingerprint `{spec.analysis_fingerprint[:10]}`",
             f"- run: {md_code(run.id)} ({run.kind}), judge {md_code(judge)}, method {run.method}"
             + (f", temperature {run.temperature}" if run.temperature is not None else ""),
             f"- data: {md_code(run.data)} (sha256 `{(run.data_sha256 or '')[:12]}`)",
             f"- bootstrap: {b.draws} draws of {b.unit}s, seed {b.seed}, {b.level:.0%} percentile intervals", ""]
    for w in r.warnings:
        lines += [f"> warning: {md_escape(w)}", ""]
    return lines


def _categories(by_name: dict[str, Accuracy]) -> list[tuple[str, Accuracy]]:
    """The categories' rows; none without data.category (its one category, "all", is the overall row again)."""
    return [] if list(by_name) == ["all"] else list(by_name.items())


RULE_TEXT = {"point": "the value is compared", "lower_bound": "the interval's lower end is compared"}


def _gate(r: Calibration) -> list[str]:
    g = r.gate
    verdict = "PASSED" if g.passed else "FAILED"
    ci = f" [{f3(g.ci_low)}, {f3(g.ci_high)}]" if g.ci_low is not None else ""
    lines = [f"## Gate: {verdict}", "",
             f"{g.metric} at {g.level} level on the {g.split} split: {f3(g.value)}{ci} (n = {g.n}), threshold "
             f"{g.threshold}, rule {g.rule} ({RULE_TEXT.get(g.rule, g.rule)}); validity {f3(g.validity)}, minimum "
             f"{g.min_validity}.", "", f"{verdict.lower()}: {g.reason}", ""]
    if g.could_flip:
        lines += [f"**Could flip with another sample**: the interval{ci} contains the threshold {g.threshold}.", ""]
    elif g.could_flip is False and g.ci_low is not None and g.ci_high is not None:
        side = "above" if g.ci_low > g.threshold else "below"
        lines += [f"The whole interval{ci} lies {side} the threshold {g.threshold}: the verdict is unlikely "
                  "to flip with another sample of this size.", ""]
    for note in g.notes:
        if note.startswith("not judged on unseen data"):
            lines += [f"> warning: {md_escape(note)}", ""]
    return lines


def _cases(r: Calibration) -> list[str]:
    cases = r.cases
    rows = [["all", cases.n, cases.valid, cases.invalid, cases.missing, f3(cases.validity)]]
    rows += [[split, c.n, c.valid, c.invalid, c.missing, f3(c.validity)] for split, c in (cases.splits or {}).items()]
    lines = ["## Cases", ""] + table(["split", "cases:", "valid:", "invalid:", "missing:", "validity:"], rows)
    lines += ["", f"{cases.labelled} of {cases.n} cases have a human score. Invalid and missing judgments stay "
                  "in every denominator.", ""]
    reasons = r.diagnostics.validity.reasons
    if reasons:
        lines += table(["not valid because", "cases:"], [[md_escape(k), v] for k, v in reasons.items()]) + [""]
    return lines


def _correlation(r: Calibration) -> list[str]:
    rows = [[split, level, f"{e.n}" + (f" (+{e.skipped_groups} skipped)" if e.skipped_groups else ""),
             est_md(e.spearman), est_md(e.pearson), est_md(e.kendall)]
            for split, levels in r.correlation.items() for level, e in levels.items()]
    return (["## Correlation with human scores", ""]
            + table(["split", "level", "n:", "spearman:", "pearson:", "kendall:"], rows)
            + ["", "n counts cases with a valid judgment and a human score (groups at group level, systems at system "
                   "level). Group level is the mean of per-group correlations; groups where either side is constant "
                   "are skipped.", ""]
            + ([f"Calibration uses the {r.cases.labelled} labelled of {r.cases.n} cases; the estimate below uses "
                "the unlabelled ones too.", ""] if r.cases.labelled < r.cases.n else []))


def _judges(r: Calibration) -> list[str]:
    lines: list[str] = []
    p = r.panel
    if r.judges:
        lines += ["### Per judge", ""] + table(
            ["judge", "validity:", "n:", "spearman:", "pearson:", "kendall:"],
            [[md_escape(name), f3(e.validity), e.n, est_md(e.spearman), est_md(e.pearson), est_md(e.kendall)]
             for name, e in r.judges.items()]) + [""]
        if p is not None and p.judges is not None:
            lines += [f"Agreement between the judges: Krippendorff's alpha (interval) {f3(p.alpha_interval)} "
                      f"over {p.n} cases judged by at least two of them. The panel's score is the "
                      f"{r.run.ensemble} of its judges.", ""]
    if p is not None and p.self_preference:
        lines += ["### Self-preference", "",
                  "Judge minus human score (0..1) on candidates of the judge's own model family and on the others.", ""]
        lines += table(["judge", "family", "own n:", "own gap:", "other n:", "other gap:", "difference:"],
                       [[md_escape(row.judge), md_escape(row.family), row.own_n, f3(row.own_gap), row.other_n,
                         f3(row.other_gap), f3(row.self_preference)] for row in p.self_preference]) + [""]
        for flag in p.flags or []:
            lines += [f"> self-preference: {md_escape(flag)}", ""]
    return lines


def _bias(d: Diagnostics) -> list[str]:
    c = d.compression
    lines = ["## Diagnostics", "", "### Scale compression", ""]
    if not isinstance(c, Compression):
        lines += [c.note, ""]
    else:
        lines += [f"Spread on a 0..1 scale: judge {f3(c.judge_sd)}, humans {f3(c.human_sd)} "
                  f"(ratio {f3(c.sd_ratio)}); scores at the ends of the scale: judge "
                  f"{f3(c.judge_extreme_share)}, humans {f3(c.human_extreme_share)}.", ""]
        lines += [f"- {md_escape(x)}" for x in c.reasons] or ["No sign of compression."]
        if c.suggestion:
            lines += ["", f"Suggestion: {c.suggestion}"]
        lines.append("")
    lb = d.length
    lines += ["### Length bias", ""]
    if isinstance(lb, LengthTooFew) or lb.judge_vs_length is None:
        lines += [lb.note or "not computed", ""]
    else:
        lines += [f"Spearman with the candidate's length in words: judge {f3(lb.judge_vs_length)}, humans "
                  f"{f3(lb.human_vs_length)}, difference {f3(lb.difference)}."
                  + (f" {lb.note}." if lb.note else ""), ""]
    if lb.quartiles:
        lines += ["By quarter of candidate length (scores on 0..1):", ""] + table(
            ["quarter:", "words", "n:", "judge:", "human:", "gap:"],
            [[q.quartile, q.words, q.n, f3(q.judge), f3(q.human), f"{q.gap:+.3f}" if q.gap is not None else "-"]
             for q in lb.quartiles]) + [""]
    if d.position:
        pos = d.position
        lines += ["### Position bias", "",
                  f"Both orders valid for {pos.both_orders_valid} cases; the judge picked the same candidate in "
                  f"both orders for {pos.consistent} (position consistency {f3(pos.consistency)}). "
                  f"Resolution: {pos.rule}.", ""]
    return lines


def _scoring(d: Diagnostics) -> list[str]:
    lines: list[str] = []
    sm = d.samples
    if sm:
        lines += ["### Samples", "",
                  f"{sm.invalid_samples} of {sm.samples} samples did not parse (invalid-sample rate "
                  f"{f3(sm.invalid_rate)}) over {sm.judgments} judgments. A case needs {sm.min_valid_samples} "
                  f"parsed samples (scoring.min_valid_samples); {sm.below_minimum} had fewer and count as invalid.",
                  ""]
    lp = d.logprobs
    if lp:
        lines += ["### Logprobs", "",
                  f"Over {lp.judgments} valid judgments: ambiguous mass (alternatives that could start a longer "
                  f"score, off the path the model took) mean {f3(lp.ambiguous_mass_mean)}, max "
                  f"{f3(lp.ambiguous_mass_max)}; mass on the scale's scores mean {f3(lp.valid_mass_mean)}, lowest "
                  f"{f3(lp.valid_mass_min)}.", ""]
    return lines


def _checks(d: Diagnostics) -> list[str]:
    lines: list[str] = []
    lang = d.language
    if lang:
        penalty = f" Penalty per finding: {', '.join(f'{k} {v}' for k, v in lang.penalty.items())}." \
            if lang.penalty else ""
        lines += [f"### Language pre-checks ({lang.code}, formality {lang.formality})", "",
                  f"{lang.cases_flagged} of {lang.cases} cases have findings. Mean human score (0..1): "
                  f"flagged {f3(lang.human_flagged)}, clean {f3(lang.human_clean)}.{penalty}", ""]
        if lang.kinds:
            lines += table(["kind", "cases:", "findings:", "example"],
                           [[kind, k.cases, k.findings,
                             f"{md_escape(k.examples[0].case_id)}: {md_escape(k.examples[0].message)}"]
                            for kind, k in lang.kinds.items()]) + [""]
    lines += _scoring(d)
    pm = d.pass_mark
    if pm:
        lines += ["### Accuracy at the pass mark", "",
                  f"A case is correct when judge and human differ by at most {pm.pass_mark} on a 0..1 scale.", ""]
        lines += table(["category", "n:", "validity:", "accuracy:", "accuracy when valid:"],
                       [[md_escape(name), m.n, f3(m.validity), f3(m.accuracy), f3(m.accuracy_when_valid)]
                        for name, m in [("all", pm.overall), *_categories(pm.categories)]])
        lines += ["", f"Mean accuracy over categories: {f3(pm.macro_category_accuracy)}.", ""]
    return lines


def _has(ss: SampleSize) -> str:
    return f"{ss.available} usable cases" if ss.unit == "cases" else f"{ss.available_units} {ss.unit} with usable cases"


def precision_line(ss: SampleSize) -> str | None:
    """What the split is enough for in precision: the interval half-width it allows at the value seen."""
    p = ss.precision
    if p is None:
        return None
    at = f"the observed {ss.metric} {p.at:.3f}" if p.at_source == "observed" else f"{ss.metric} {p.at} (the threshold)"
    if p.required is None:
        return f"An interval half-width of {p.halfwidth} at {at} cannot be planned with Fisher z."
    return (f"For a {p.conf:.0%} interval of half-width {p.halfwidth} at {at}: {p.required} {ss.unit}; "
            f"the {ss.split} split's {ss.available_units} are " + ("enough" if p.enough else "not enough")
            + " for that precision.")


def sample_size_lines(ss: SampleSize) -> list[str]:
    lines = ["## Sample size", ""]
    if ss.required is None:
        lines += [ss.method, ""]
    else:
        lines += [f"To tell {ss.alternative} from 0.5: {ss.required} {ss.unit} ({ss.method}).",
                  f"The {ss.split} split has {_has(ss)}: "
                  + (f"enough to tell {ss.alternative} from 0.5." if ss.enough else
                     f"**not enough** to tell {ss.alternative} from 0.5; the gate's verdict is fragile."), "",
                  f"Formula: `{ss.formula}`", ""]
    line = precision_line(ss)
    if line is not None and ss.precision is not None:
        lines += [line, "", f"Formula: `{ss.precision.formula}`", ""]
    return lines


def _mark(s: SweepBlock, t: float) -> str:
    if t == s.chosen_temperature:
        return " (chosen)"
    if t == s.best_temperature:
        return " (best)"
    return " (spec)" if t == s.spec_temperature else ""


def _choice(s: SweepBlock) -> str:
    """How the temperature was chosen: the range over the grid next to the dev interval, and the paired difference."""
    own, d = s.dev_at_spec, s.best_minus_spec
    width = (f" ({own.ci_high - own.ci_low:.3f} wide)" if own.ci_low is not None and own.ci_high is not None
             else "")
    text = ""
    if s.dev_range is not None:
        lo, hi = s.dev_range
        text = (f"Dev values range from {f3(lo)} to {f3(hi)} ({hi - lo:.3f}) over the temperatures; "
                f"at the spec's T = {s.spec_temperature} dev is {est_md(own)}{width}. ")
    if s.told_apart is None:
        if s.best_temperature == s.spec_temperature:
            return text + "The best on dev is the spec's own temperature."
        return text + f"The spec's T = {s.spec_temperature} gives no correlation on dev; the best is chosen."
    diff = (f"{d.value:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}]"
            if d is not None and d.value is not None and d.ci_low is not None and d.ci_high is not None else "-")
    text += (f"Best on dev (T = {s.best_temperature}) minus the spec's: {diff}, paired bootstrap on dev: ")
    if s.told_apart:
        return text + "the interval lies above 0, so the best is chosen."
    return text + f"the temperatures cannot be told apart on dev, so the spec's T = {s.spec_temperature} is kept."


def sweep_markdown(s: SweepBlock) -> list[str]:
    lines = [f"{s.metric} at {s.level} level on dev for each temperature. The spec's temperature is kept unless the "
             "best one on dev beats it with a paired bootstrap interval above 0; the chosen temperature is then "
             f"measured on {s.measured_on}, which shares no case with dev.", ""]
    lines += table(["T:", "p:", "dev:", "dev n:"], [
        [f"{row.temperature:.2f}", f3(row.p), f3(row.dev) + _mark(s, row.temperature), row.dev_n] for row in s.grid])
    lines += ["", _choice(s), ""]
    t = s.test
    if t:
        lines.append(f"Chosen T = {s.chosen_temperature}: {s.metric} on {t.split} {est_md(t)} (n = {t.n}).")
    elif s.chosen_temperature is not None:
        lines.append(f"Chosen T = {s.chosen_temperature}: not measured, the {s.measured_on} split has no cases.")
    else:
        lines.append("No temperature gives a defined correlation on dev.")
    return lines


def _rest(r: Calibration) -> list[str]:
    lines = sample_size_lines(r.sample_size)
    a = r.agreement
    if a:
        lines += ["## Human agreement", "",
                  f"Krippendorff's alpha over {len(a.raters)} raters and {a.n} cases: interval "
                  f"{f3(a.alpha_interval)}, ordinal {f3(a.alpha_ordinal)}.", ""]
        if a.warning:
            lines += [f"> warning: {a.warning}", ""]
    if r.sweep:
        lines += ["## TCVA temperature sweep", ""] + sweep_markdown(r.sweep) + [""]
    if r.disagreements:
        lines += ["## Largest disagreements", "", "Judge and human scores on a 0..1 scale.", ""] + table(
            ["case", "split", "judge:", "human:", "gap:", "candidate"],
            [[md_escape(x.case_id), x.split or "-", f3(x.judge), f3(x.human), f3(x.gap), md_escape(x.candidate)]
             for x in r.disagreements]) + [""]
    return lines


def to_markdown(r: Calibration) -> str:
    estimate = estimate_markdown(r.estimate) if r.estimate is not None else []
    return document(_header(r) + _gate(r) + _cases(r) + _correlation(r) + estimate + _judges(r)
                    + _bias(r.diagnostics) + _checks(r.diagnostics) + _rest(r))
