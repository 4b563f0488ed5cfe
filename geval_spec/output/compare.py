"""A :class:`~geval_spec.analysis.results.Comparison` as Markdown."""

from __future__ import annotations

import re

from geval_spec.analysis.compare import AgreementDelta, Comparison, Delta, DeltaEntry
from geval_spec.output.markdown import document, f3, md_code, md_escape, table


def _d(e: Delta | AgreementDelta) -> str:
    if e.difference is None:
        return "-"
    ci = f" [{e.ci_low:+.3f}, {e.ci_high:+.3f}]" if e.ci_low is not None and e.ci_high is not None else ""
    return f"{e.difference:+.3f}{ci}"


def _n(e: DeltaEntry) -> str:
    if e.skipped_groups_a is None:
        return str(e.n)
    return f"{e.n} (skipped: A {e.skipped_groups_a}, B {e.skipped_groups_b})"


def _fenced(lines: list[str], info: str) -> list[str]:
    """Lines in a code fence longer than any run of backticks inside them."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, 1 + longest)
    return [f"{fence}{info}", *lines, fence]


def to_markdown(c: Comparison) -> str:
    a, b, r, bs = c.a, c.b, c.regression, c.bootstrap
    lines = [f"# Compare: {md_escape(a.ref)} -> {md_escape(b.ref)}", ""]
    for label, side in (("A", a), ("B", b)):
        lines.append(f"- {label}: {md_code(side.run)}, {md_escape(side.spec)} v{side.version} "
                     f"({md_code(side.file)}), judging "
                     f"`{side.judging_fingerprint[:10]}`, analysis `{side.analysis_fingerprint[:10]}`")
    lines += [f"- change: **{c.change.klass}** ({c.change.meaning})",
              f"- {c.cases} cases in both runs; B's splits, groups and bootstrap ({bs.draws} draws of "
              f"{bs.unit}s, seed {bs.seed}) are used for both", ""]
    for w in c.warnings:
        lines += [f"> warning: {md_escape(w)}", ""]
    outcome = "exit 1" if r.fails else "exit 0"
    lines += [f"## Verdict: {r.verdict}" + (" (REGRESSION)" if r.regressed else ""), "",
              f"{r.metric} at {r.level} level on {r.split}, margin {r.margin}, rule {r.rule} ({outcome}): "
              f"{md_escape(r.reason)}.", "",
              f"Only this decides: {r.metric} at {r.level} level on {r.split}. The other intervals below are "
              "descriptive.", ""]
    lines += ["## Correlation with human scores", "",
              "B - A with a paired bootstrap interval; n counts cases valid on both sides with a human score.", ""]
    lines += table(["split", "level", "n:", "spearman A:", "spearman B:", "B - A:", "pearson B - A:", "kendall B - A:"],
                   [[split, level, _n(e), f3(e.spearman.a), f3(e.spearman.b), _d(e.spearman), _d(e.pearson),
                     _d(e.kendall)] for split, levels in c.correlation.items() for level, e in levels.items()])
    if any(e.skipped_groups_a is not None for levels in c.correlation.values() for e in levels.values()):
        lines += ["", "At group level n counts the groups whose correlation is defined on both sides; A and B are "
                      "both computed on those groups, and the groups each side skips (a constant side or fewer than "
                      "two cases) are listed."]
    lines.append("")
    ag = c.agreement
    lines += ["## Agreement with the human label", "", f"A case agrees when it is {ag.definition}.", ""]
    if ag.resampled is not None:
        lines += [f"A {f3(ag.a)}, B {f3(ag.b)}: {_d(ag)} over {ag.n} labelled cases "
                  f"(paired bootstrap, resampling {ag.resampled}).", ""]
    v = c.validity
    diff = f"{v.difference:+.3f}" if v.difference is not None else "-"
    lines += ["## Validity", "", f"A {f3(v.a)}, B {f3(v.b)} ({diff}); "
              f"{v.newly_invalid} case(s) newly invalid, {v.newly_valid} newly valid.", ""]
    if v.newly_invalid_cases:
        lines += ["Newly invalid: " + ", ".join(md_code(x) for x in v.newly_invalid_cases), ""]
    if c.moved:
        lines += ["## Cases that moved most", "", "Scores on a 0..1 scale.", ""] + table(
            ["case", "split", "A:", "B:", "shift:", "human:"],
            [[md_escape(x.case_id), x.split or "-", f3(x.a), f3(x.b), f"{x.shift:+.3f}" if x.shift is not None else "-",
              f3(x.human)] for x in c.moved]) + [""]
    lines += ["## Spec diff", ""]
    lines += _fenced(c.spec_diff, "diff") if c.spec_diff else ["The resolved specs are identical."]
    return document(lines)
