"""Plots for the HTML report, as inline SVG strings (matplotlib, no network at view time).

SVG output is made deterministic (fixed hash salt, no date, text kept as
text) and stripped of the XML prolog, DOCTYPE, metadata and namespace URIs,
which inline SVG in HTML does not need, so the page references nothing
outside itself.
"""

from __future__ import annotations

import io
import re
from typing import Any

import numpy as np

from geval_spec.analysis.results import Calibration, PlotData, SweepBlock

COLORS = {"dev": "#1f77b4", "test": "#d62728", "examples": "#7f7f7f", None: "#555555"}


def _figure(width: float = 5.0, height: float = 3.6) -> tuple[Any, Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "geval-spec", "svg.fonttype": "none", "font.size": 9,
                         "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False})
    fig, ax = plt.subplots(figsize=(width, height))
    return plt, fig, ax


def _svg(plt: Any, fig: Any) -> str:
    buf = io.StringIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    plt.close(fig)
    text = buf.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    text = text.replace("xlink:href=", "href=")
    return text.strip()


def scatter(data: PlotData) -> str:
    plt, fig, ax = _figure()
    j, h = np.asarray(data.judge), np.asarray(data.human)
    keep = ~np.isnan(j) & ~np.isnan(h)
    for split in sorted(set(data.splits), key=lambda s: (s is None, str(s))):
        mask = keep & np.asarray([s == split for s in data.splits])
        if mask.any():
            ax.scatter(h[mask], j[mask], s=12, alpha=0.6, color=COLORS.get(split, "#555555"),
                       label=split or "cases")
    ax.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, linestyle="--")
    ax.set_xlabel("human score (0..1)")
    ax.set_ylabel("judge score (0..1)")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.legend(loc="lower right", frameon=False)
    return _svg(plt, fig)


def histograms(data: PlotData) -> str:
    plt, fig, ax = _figure()
    j, h = np.asarray(data.judge), np.asarray(data.human)
    bins = np.linspace(0, 1, 21)
    ax.hist(h[~np.isnan(h)], bins=bins, alpha=0.55, color="#2ca02c", label="humans")
    ax.hist(j[~np.isnan(j)], bins=bins, alpha=0.55, color="#1f77b4", label="judge")
    ax.set_xlabel("score (0..1)")
    ax.set_ylabel("cases")
    ax.legend(frameon=False)
    return _svg(plt, fig)


def sweep_curve(sweep: SweepBlock) -> str:
    plt, fig, ax = _figure()
    ts = [row.temperature for row in sweep.grid if row.dev is not None]
    vs = [row.dev for row in sweep.grid if row.dev is not None]
    ax.plot(ts, vs, marker="o", markersize=3, color="#1f77b4", label=f"dev {sweep.metric}")
    if sweep.chosen_temperature is not None:
        ax.axvline(sweep.chosen_temperature, color="#d62728", linewidth=0.8, linestyle="--", label="chosen on dev")
    if sweep.test and sweep.test.value is not None:
        ax.scatter([sweep.chosen_temperature], [sweep.test.value], color="#d62728", zorder=3,
                   label=f"{sweep.test.split} at the chosen T")
    ax.set_xlabel("temperature T (strict 0.1 ... 1.0 lenient)")
    ax.set_ylabel(sweep.metric)
    ax.legend(frameon=False)
    return _svg(plt, fig)


def per_group(data: PlotData, metric: str) -> str | None:
    used = np.asarray(data.group_values)
    if used.size == 0:
        return None
    plt, fig, ax = _figure()
    ax.bar(np.arange(used.size), used, color=np.where(used >= 0, "#1f77b4", "#d62728"), width=1.0)
    ax.axhline(float(used.mean()), color="#333333", linewidth=0.8, linestyle="--", label=f"mean {used.mean():.3f}")
    ax.set_xlabel(f"groups, sorted ({used.size} used, {data.groups_skipped} skipped as constant)")
    ax.set_ylabel(f"{metric} within the group")
    ax.set_ylim(-1.05, 1.05)
    ax.legend(frameon=False)
    return _svg(plt, fig)


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
    return plots
