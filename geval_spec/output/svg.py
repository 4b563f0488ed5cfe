"""A small SVG chart writer for the HTML report: points, lines, bars, axes with ticks, a legend beside the plot.

Why not matplotlib: importing it and drawing the report's four plots took
longer than the whole report may take (BENCHMARKS.md, "report"). These charts
need axes, ticks, a few marks and a legend; writing them as SVG text is
deterministic (the same input gives the same bytes), references nothing
outside the page, and takes milliseconds. Every text is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Sequence

FONT = 'font-family="sans-serif" font-size="11"'


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _label(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


@dataclass
class Chart:
    """One plot area with axes; marks are added in drawing order, then :meth:`render` returns the SVG."""

    x_range: tuple[float, float]
    y_range: tuple[float, float]
    x_label: str
    y_label: str
    width: int = 520
    height: int = 340
    left: int = 58
    right: int = 150  # the legend's column, outside the data
    top: int = 14
    bottom: int = 46
    x_ticks: Sequence[float] | None = None
    y_ticks: Sequence[float] | None = None
    x_names: Sequence[tuple[float, str]] = ()  # named ticks on the x axis (categories)
    marks: list[str] = field(default_factory=list)
    legend: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, colour, text)

    # -- coordinates -------------------------------------------------------------------------------
    def x(self, value: float) -> float:
        lo, hi = self.x_range
        return self.left + (value - lo) / (hi - lo) * (self.width - self.left - self.right)

    def y(self, value: float) -> float:
        lo, hi = self.y_range
        return self.height - self.bottom - (value - lo) / (hi - lo) * (self.height - self.top - self.bottom)

    # -- marks -----------------------------------------------------------------------------------------
    def points(self, xs: Sequence[float], ys: Sequence[float], colour: str, label: str | None = None,
               radius: float = 2.8, opacity: float = 0.45) -> None:
        dots = "".join(f'<circle cx="{self.x(a):.2f}" cy="{self.y(b):.2f}" r="{radius}"/>' for a, b in zip(xs, ys))
        self.marks.append(f'<g fill="{colour}" fill-opacity="{opacity}">{dots}</g>')
        if label:
            self.legend.append(("dot", colour, label))

    def line(self, xs: Sequence[float], ys: Sequence[float], colour: str, label: str | None = None,
             dashed: bool = False, markers: bool = False, width: float = 1.4) -> None:
        path = " ".join(f"{'M' if i == 0 else 'L'}{self.x(a):.2f},{self.y(b):.2f}" for i, (a, b) in
                        enumerate(zip(xs, ys)))
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        self.marks.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="{width}"{dash}/>')
        if markers:
            self.points(xs, ys, colour, None, radius=2.4, opacity=1.0)
        if label:
            self.legend.append(("dash" if dashed else "line", colour, label))

    def hline(self, value: float, colour: str, label: str | None = None) -> None:
        self.line(list(self.x_range), [value, value], colour, label, dashed=True, width=1.0)

    def vline(self, value: float, colour: str, label: str | None = None) -> None:
        self.line([value, value], list(self.y_range), colour, label, dashed=True, width=1.0)

    def bars(self, lefts: Sequence[float], widths: Sequence[float], heights: Sequence[float],
             colours: str | Sequence[str], label: str | None = None, opacity: float = 0.6) -> None:
        base = self.y(max(self.y_range[0], 0.0))
        out = []
        for i, (a, w, h) in enumerate(zip(lefts, widths, heights)):
            colour = colours if isinstance(colours, str) else colours[i]
            x0, x1 = self.x(a), self.x(a + w)
            y1 = self.y(h)
            out.append(f'<rect x="{min(x0, x1):.2f}" y="{min(base, y1):.2f}" width="{abs(x1 - x0):.2f}" '
                       f'height="{abs(base - y1):.2f}" fill="{colour}"/>')
        self.marks.append(f'<g fill-opacity="{opacity}">{"".join(out)}</g>')
        if label:
            self.legend.append(("box", colours if isinstance(colours, str) else colours[0], label))

    # -- the picture -------------------------------------------------------------------------------------
    def _axes(self) -> list[str]:
        x0, x1 = self.left, self.width - self.right
        y0, y1 = self.height - self.bottom, self.top
        out = [f'<path d="M{x0},{y1} L{x0},{y0} L{x1},{y0}" fill="none" stroke="#333" stroke-width="0.8"/>']
        for t in self.x_ticks if self.x_ticks is not None else nice_ticks(*self.x_range):
            if self.x_range[0] - 1e-9 <= t <= self.x_range[1] + 1e-9:
                px = self.x(t)
                out.append(f'<path d="M{px:.2f},{y0} L{px:.2f},{y0 + 4}" stroke="#333" stroke-width="0.8"/>'
                           f'<text x="{px:.2f}" y="{y0 + 16}" text-anchor="middle" {FONT}>{_label(t)}</text>')
        for t, name in self.x_names:
            px = self.x(t)
            out.append(f'<path d="M{px:.2f},{y0} L{px:.2f},{y0 + 4}" stroke="#333" stroke-width="0.8"/>'
                       f'<text x="{px:.2f}" y="{y0 + 16}" text-anchor="middle" {FONT}>{escape(name)}</text>')
        for t in self.y_ticks if self.y_ticks is not None else nice_ticks(*self.y_range):
            if self.y_range[0] - 1e-9 <= t <= self.y_range[1] + 1e-9:
                py = self.y(t)
                out.append(f'<path d="M{x0 - 4},{py:.2f} L{x0},{py:.2f}" stroke="#333" stroke-width="0.8"/>'
                           f'<text x="{x0 - 7}" y="{py + 4:.2f}" text-anchor="end" {FONT}>{_label(t)}</text>')
        out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{self.height - 8}" text-anchor="middle" {FONT}>'
                   f'{escape(self.x_label)}</text>')
        mid = (y0 + y1) / 2
        out.append(f'<text x="14" y="{mid:.1f}" text-anchor="middle" transform="rotate(-90 14 {mid:.1f})" {FONT}>'
                   f'{escape(self.y_label)}</text>')
        return out

    def _legend(self) -> list[str]:
        out = []
        x = self.width - self.right + 14
        for i, (kind, colour, text) in enumerate(self.legend):
            y = self.top + 8 + 18 * i
            if kind == "dot":
                out.append(f'<circle cx="{x + 6}" cy="{y}" r="3.5" fill="{colour}" fill-opacity="0.7"/>')
            elif kind == "box":
                out.append(f'<rect x="{x}" y="{y - 5}" width="12" height="10" fill="{colour}" fill-opacity="0.6"/>')
            else:
                dash = ' stroke-dasharray="4,3"' if kind == "dash" else ""
                out.append(f'<path d="M{x},{y} L{x + 14},{y}" stroke="{colour}" stroke-width="1.4"{dash}/>')
            out.append(f'<text x="{x + 20}" y="{y + 4}" {FONT}>{escape(text)}</text>')
        return out

    def render(self, title: str) -> str:
        body = "".join([*self._axes(), *self.marks, *self._legend()])
        return (f'<svg viewBox="0 0 {self.width} {self.height}" width="{self.width}" height="{self.height}" '
                f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>')
