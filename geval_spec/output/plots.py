"""Plots for the HTML report, as inline SVG strings (:mod:`geval_spec.output.svg`; nothing fetched at view time).

The same report gives the same bytes: the scatter's jitter comes from a fixed
seed, and every number is written with fixed precision.
"""

from __future__ import annotations

import numpy as np

from geval_spec.analysis.results import Calibration, PlotData, SweepBlock
from geval_spec.output.estimate import estimate_plot
from geval_spec.output.svg import Chart

COLORS = {"dev": "#1f77b4", "test": "#d62728", "examples": "#7f7f7f", None: "#555555"}


JITTER = 0.012  # of the 0..1 range: scores on a few levels would otherwise hide each other
UNIT = (-0.05, 1.05)
UNIT_TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def scatter(data: PlotData) -> str:
    """Judge against human scores, one dot per case: jittered (a fixed seed) and translucent."""
    chart = Chart(UNIT, UNIT, f"human score (0..1), jittered by up to {JITTER}", "judge score (0..1)",
                  x_ticks=UNIT_TICKS, y_ticks=UNIT_TICKS)
    j, h = np.asarray(data.judge), np.asarray(data.human)
    keep = ~np.isnan(j) & ~np.isnan(h)
    rng = np.random.default_rng(0)
    dx, dy = rng.uniform(-JITTER, JITTER, size=(2, j.size))
    chart.line([0, 1], [0, 1], "#999999", "judge = human", dashed=True, width=0.8)
    for split in sorted(set(data.splits), key=lambda s: (s is None, str(s))):
        mask = keep & np.asarray([s == split for s in data.splits])
        if mask.any():
            chart.points((h[mask] + dx[mask]).tolist(), (j[mask] + dy[mask]).tolist(), COLORS.get(split, "#555555"),
                         f"{split or 'cases'} ({int(mask.sum())})")
    return chart.render("Judge against human scores")


def histograms(data: PlotData) -> str:
    """Human and judge score distributions over 20 bins of 0..1, overlaid."""
    j, h = np.asarray(data.judge), np.asarray(data.human)
    bins = np.linspace(0, 1, 21)
    counts_h, _ = np.histogram(h[~np.isnan(h)], bins=bins)
    counts_j, _ = np.histogram(j[~np.isnan(j)], bins=bins)
    top = float(max(counts_h.max(initial=0), counts_j.max(initial=0), 1)) * 1.05
    chart = Chart(UNIT, (0.0, top), "score (0..1)", "cases", x_ticks=UNIT_TICKS)
    lefts, widths = bins[:-1].tolist(), np.diff(bins).tolist()
    chart.bars(lefts, widths, counts_h.tolist(), "#2ca02c", "humans", opacity=0.55)
    chart.bars(lefts, widths, counts_j.tolist(), "#1f77b4", "judge", opacity=0.55)
    return chart.render("Score distributions")


def sweep_curve(sweep: SweepBlock) -> str:
    """The sweep's metric on dev against the temperature, the chosen T and its value on test."""
    ts = [row.temperature for row in sweep.grid if row.dev is not None]
    vs = [float(row.dev) for row in sweep.grid if row.dev is not None]
    values = vs + ([float(sweep.test.value)] if sweep.test and sweep.test.value is not None else [])
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = max(0.02, (hi - lo) * 0.1)
    chart = Chart((0.05, 1.05), (lo - pad, hi + pad), "temperature T (strict 0.1 ... 1.0 lenient)", sweep.metric,
                  x_ticks=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
    chart.line(ts, vs, "#1f77b4", f"dev {sweep.metric}", markers=True)
    if sweep.chosen_temperature is not None:
        chart.vline(sweep.chosen_temperature, "#d62728", "chosen on dev")
        if sweep.test and sweep.test.value is not None:
            chart.points([sweep.chosen_temperature], [float(sweep.test.value)], "#d62728",
                         f"{sweep.test.split} at the chosen T", radius=4.0, opacity=1.0)
    return chart.render("TCVA temperature sweep")


def per_group(data: PlotData, metric: str) -> str | None:
    """Each used group's correlation, sorted, with their mean."""
    used = np.asarray(data.group_values, dtype=float)
    if used.size == 0:
        return None
    chart = Chart((0.0, float(used.size)), (-1.05, 1.05),
                  f"groups, sorted ({used.size} used, {data.groups_skipped} skipped as constant)",
                  f"{metric} within the group", x_ticks=(), y_ticks=(-1.0, -0.5, 0.0, 0.5, 1.0))
    colours = ["#1f77b4" if v >= 0 else "#d62728" for v in used]
    chart.bars(list(range(used.size)), [1.0] * used.size, used.tolist(), colours, opacity=0.8)
    chart.hline(float(used.mean()), "#333333", f"mean {used.mean():.3f}")
    return chart.render(f"{metric} per source group")


def all_plots(report: Calibration) -> dict[str, str]:
    data = report.plot
    if data is None:
        return {}
    plots = {"Judge against human scores": scatter(data),
             "Score distributions (compression at a glance)": histograms(data)}
    if report.sweep:
        plots["TCVA temperature sweep"] = sweep_curve(report.sweep)
    group = per_group(data, report.gate.metric)
    if group:
        plots["Correlation per source group"] = group
    if report.estimate is not None:
        plots["Estimated human-scale mean: judge-only, human-only, PPI"] = estimate_plot(report.estimate)
    return plots
