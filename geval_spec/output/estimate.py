"""The report's estimate (the human-scale mean from a few labels): its Markdown section and its plot."""

from __future__ import annotations

from geval_spec.analysis.estimate import EstimateBlock, EstimateCell
from geval_spec.analysis.result_base import Interval
from geval_spec.output.markdown import est_md, f3, md_escape, table
from geval_spec.output.svg import Chart

JUDGE, HUMAN, PPI = "#7f7f7f", "#2ca02c", "#1f77b4"


def _count(x: float | int | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _row(name: str, c: EstimateCell) -> list[str]:
    return [md_escape(name), str(c.labelled), str(c.unlabelled), f3(c.judge_only.value), est_md(c.human_only),
            est_md(c.ppi), f3(c.lam), _count(c.effective_labels, 1), _count(c.labels_needed)]


def estimate_markdown(e: EstimateBlock) -> list[str]:
    """The section: what the raters' mean would be, per cell, the pairwise differences and the warnings."""
    lo, hi = e.scale
    lines = ["## Estimate on the human scale", "",
             f"What the raters' mean score would be over all valid cases, from the judge's scores on every case and "
             f"the human scores on the labelled ones ({e.method}, prediction-powered inference), "
             f"{e.level:.0%} intervals, on the human scale {lo:g}..{hi:g}. {e.labelled} labelled and "
             f"{e.unlabelled} unlabelled cases with a valid judgment; {e.excluded_invalid} without one left out. "
             "judge-only is the judge's mean mapped onto the human scale (biased whenever the scales differ); "
             "human-only uses the labels alone. Valid only when the labelled cases are a random sample of the "
             "cases (docs/estimate.md).", ""]
    rows = [_row("all cases", e.overall)] + [_row(f"system {name}", c) for name, c in (e.systems or {}).items()]
    lines += table(["cases", "labelled:", "unlabelled:", "judge-only:", "human-only:", "PPI:", "lambda:",
                    "effective labels:", "labels needed:"], rows) + [""]
    needed = (f" labels needed: the labelled cases for a half-width of {e.target_halfwidth:g} "
              "(estimate.target_halfwidth), at the same share of labelled cases." if e.target_halfwidth else "")
    lines += ["lambda: the weight given to the judge (0: the labels alone). effective labels: how many labels "
              f"alone would give an interval as narrow as PPI's.{needed}", ""]
    if e.differences:
        shown = [d for d in e.differences if d.ci_low is not None]
        left = len(e.differences) - len(shown)
        lines += [f"Differences between systems (PPI, b - a, on the human scale): {len(shown)} of "
                  f"{len(e.differences)} pairs have an interval"
                  + (f"; the {left} whose side has none are in the JSON report." if left else "."), ""]
        if shown:
            lines += table(["a", "b", "b - a:"], [
                [md_escape(d.a), md_escape(d.b), est_md(Interval(value=d.value, ci_low=d.ci_low, ci_high=d.ci_high))]
                for d in shown]) + [""]
    for w in e.warnings:
        lines += [f"> warning: {md_escape(w)}", ""]
    return lines


def estimate_plot(e: EstimateBlock) -> str:
    """Per cell: the judge-only point, the human-only interval and the PPI interval side by side."""
    cells = [("all", e.overall)] + list((e.systems or {}).items())
    lo, hi = e.scale
    pad = (hi - lo) * 0.05 if hi > lo else 0.05
    chart = Chart((-0.6, len(cells) - 0.4), (lo - pad, hi + pad), "cases (all, then each system)",
                  "mean on the human scale", x_ticks=(), width=max(420, 150 + 60 * len(cells)),
                  x_names=[(float(i), name) for i, (name, _) in enumerate(cells)])
    labelled: set[str] = set()

    def once(label: str) -> str | None:
        if label in labelled:
            return None
        labelled.add(label)
        return label

    for i, (_, c) in enumerate(cells):
        if c.judge_only.value is not None:
            chart.points([i - 0.2], [c.judge_only.value], JUDGE, once("judge-only"), radius=4.0, opacity=1.0)
        for shift, iv, colour, label in ((0.0, c.human_only, HUMAN, "human-only"), (0.2, c.ppi, PPI, "PPI")):
            if iv.value is None:
                continue
            if iv.ci_low is not None and iv.ci_high is not None:
                chart.line([i + shift, i + shift], [iv.ci_low, iv.ci_high], colour, None, width=2.0)
            chart.points([i + shift], [iv.value], colour, once(label), radius=3.5, opacity=1.0)
    return chart.render("Estimated human-scale mean per system")
