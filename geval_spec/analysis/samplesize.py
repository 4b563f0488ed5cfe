"""How many cases (or systems) a gate needs: to tell the threshold from 0.5, and for a given interval half-width.

Both come from the Fisher z transformation of a correlation, which is about
normal with a known variance:

- the **test**: the n that tells rho = threshold from rho = 0.5 with a
  two-sided test at alpha 0.05 and power 0.8 solves
  |atanh(r1) - atanh(r0)| = (z_(1-a/2) + z_power) * sqrt(var(n));
- the **precision**: the n whose interval tanh(atanh(r) +- z_(1-a/2) *
  sqrt(var(n))) at the observed r (the threshold before any judge ran) is
  2 w wide on the correlation scale, half-width w (default 0.1). With
  u = 2 * z_(1-a/2) * sqrt(var(n)) and z = atanh(r), tanh(z + u/2) - tanh(z -
  u/2) = 2 sinh(u) / (cosh(2z) + cosh(u)) = 2w gives sinh(u) - w cosh(u) =
  w cosh(2z), so u = atanh(w) + asinh(w cosh(2z) / sqrt(1 - w^2)).

var(n) is 1/(n - 3) for Pearson, (1 + r^2/2)/(n - 3) for Spearman (Bonett &
Wright 2000) and 0.437/(n - 4) for Kendall's tau (Fieller, Hartley & Pearson
1957; r, 0.5 and the threshold are then on the tau scale). The pairs are
cases at dataset level and systems at system level (the correlation of the
systems' means); at group level the gate's value is a mean of per-group
correlations, to which neither formula applies.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from geval_spec.analysis.frame import Frame
from geval_spec.analysis.results import Precision, SampleSize
from geval_spec.spec.sections import Spec

ALPHA = 0.05
POWER = 0.8
NULL = 0.5
HALFWIDTH = 0.1
VARIANCE = {"spearman": "Bonett-Wright variance (1 + r^2/2)/(n - 3)", "pearson": "variance 1/(n - 3)",
            "kendall": "Fieller variance 0.437/(n - 4)"}
UNITS = {"dataset": "cases", "system": "systems", "group": "groups"}
TAU_NOTE = ("0.5 and {t} are on Kendall's tau scale (for normal data Pearson's r = sin(pi tau / 2): tau 0.5 is "
            "r {r0:.2f}, tau {t} is r {r1:.2f})")
HALFWIDTH_FORMULA = ("n = {lead}{c}(z_(1-a/2) / h)^2, h = (atanh(w) + asinh(w * cosh(2 atanh(r)) / sqrt(1 - w^2))) / 2")


def fisher_z(r: float) -> float:
    return math.atanh(r)


def required_n(rho_alt: float, rho_null: float, metric: str = "spearman", alpha: float = 0.05,
               power: float = 0.8) -> tuple[int, str]:
    """Cases needed to tell rho_alt from rho_null (two-sided test at ``alpha``, given ``power``).

    Fisher's z of a correlation is about normal with variance 1 / (n - 3)
    (Pearson). For Spearman we use Bonett & Wright's (2000) variance
    (1 + rho^2 / 2) / (n - 3), rho being the alternative; for Kendall's tau,
    0.437 / (n - 4) (Fieller, Hartley & Pearson 1957). Solving
    |atanh(rho_alt) - atanh(rho_null)| = (z_{1-alpha/2} + z_{power}) * sqrt(var)
    for n gives the formula returned with the result.
    """
    za = NormalDist().inv_cdf(1 - alpha / 2)
    zb = NormalDist().inv_cdf(power)
    delta = abs(fisher_z(rho_alt) - fisher_z(rho_null))
    if delta == 0:
        raise ValueError("the two correlations are equal")
    if metric == "kendall":
        n = 4 + 0.437 * ((za + zb) / delta) ** 2
        formula = "n = 4 + 0.437 * ((z_(1-a/2) + z_power) / |atanh(r1) - atanh(r0)|)^2"
    else:
        c = 1.0 + (rho_alt ** 2) / 2.0 if metric == "spearman" else 1.0
        n = 3 + c * ((za + zb) / delta) ** 2
        formula = ("n = 3 + (1 + r1^2/2) * ((z_(1-a/2) + z_power) / |atanh(r1) - atanh(r0)|)^2"
                   if metric == "spearman" else "n = 3 + ((z_(1-a/2) + z_power) / |atanh(r1) - atanh(r0)|)^2")
    return int(math.ceil(n)), formula


def halfwidth_n(r: float, halfwidth: float, metric: str = "spearman", conf: float = 0.95) -> int | None:
    """Pairs needed for a Fisher-z interval at ``r`` of half-width ``halfwidth`` on the correlation scale.

    None when it cannot be reached (|r| >= 1, or a half-width outside (0, 1)).
    """
    if not (abs(r) < 1 and 0 < halfwidth < 1):
        return None
    z = NormalDist().inv_cdf(1 - (1 - conf) / 2)
    h = (math.atanh(halfwidth)
         + math.asinh(halfwidth * math.cosh(2 * math.atanh(r)) / math.sqrt(1 - halfwidth ** 2))) / 2
    if metric == "kendall":
        return int(math.ceil(4 + 0.437 * (z / h) ** 2))
    c = 1.0 + r * r / 2.0 if metric == "spearman" else 1.0
    return int(math.ceil(3 + c * (z / h) ** 2))


def _halfwidth_formula(metric: str) -> str:
    lead, c = {"kendall": ("4 + ", "0.437 * "), "spearman": ("3 + ", "(1 + r^2/2) * ")}.get(metric, ("3 + ", ""))
    return HALFWIDTH_FORMULA.format(lead=lead, c=c)


def _units(frame: Frame, keep: np.ndarray, level: str) -> int:
    if level == "group":
        return len({g for g, k in zip(frame.groups, keep) if k and g is not None})
    if level == "system":
        return len({s for s, k in zip(frame.systems, keep) if k and s is not None})
    return int(keep.sum())


def precision(spec: Spec, units: int, observed: float | None, halfwidth: float) -> Precision | None:
    """Pairs needed for the half-width at the observed value (the threshold when none is known yet)."""
    cal = spec.calibration
    if cal.level == "group":
        return None
    at, source = (observed, "observed") if observed is not None else (cal.threshold, "threshold")
    needed = halfwidth_n(at, halfwidth, cal.metric, spec.bootstrap.level)
    return Precision(halfwidth=halfwidth, conf=spec.bootstrap.level, at=round(at, 4), at_source=source,
                     required=needed,
                     enough=None if needed is None else units >= needed, formula=_halfwidth_formula(cal.metric))


def sample_size(frame: Frame, spec: Spec, observed: float | None = None,
                halfwidth: float = HALFWIDTH) -> SampleSize:
    """Whether the gate's split holds enough pairs (cases, or systems at system level); ``observed``: the gate's value."""
    cal = spec.calibration
    split = cal.split
    present = split == "all" or any(s == split for s in frame.splits)
    keep = frame.usable(split) if present else np.zeros(frame.n, bool)
    available = int(keep.sum())
    units = _units(frame, keep, cal.level)

    def result(required: int | None, enough: bool | None, formula: str | None, method: str) -> SampleSize:
        return SampleSize(split=split, level=cal.level, metric=cal.metric, available=available, available_units=units,
                          unit=UNITS[cal.level], alpha=ALPHA, power=POWER, null=NULL, alternative=cal.threshold,
                          required=required, enough=enough, formula=formula, method=method,
                          precision=precision(spec, units, observed, halfwidth))

    if cal.level == "group":
        return result(None, None, None, "not applicable at group level: the Fisher z formulas count independent "
                      "pairs (cases, or systems), and the gate's value is a mean of per-group correlations; its "
                      "bootstrap interval is the measure of its precision")
    if cal.threshold <= NULL:
        return result(None, None, None, "not applicable: the threshold must exceed 0.5 to be told apart from 0.5")
    if cal.threshold >= 1:
        return result(None, None, None, "not applicable: a threshold of 1 (a perfect correlation) cannot be told "
                      "apart from 0.5 by any finite sample size formula; the gate still compares the value")
    n, formula = required_n(cal.threshold, NULL, cal.metric)
    method = (f"Fisher z, two-sided alpha {ALPHA}, power {POWER}, {cal.metric} with the {VARIANCE[cal.metric]}; "
              f"H0 rho = {NULL} against rho = {cal.threshold}")
    if cal.metric == "kendall":
        method += "; " + TAU_NOTE.format(t=cal.threshold, r0=math.sin(math.pi * NULL / 2),
                                          r1=math.sin(math.pi * cal.threshold / 2))
    if cal.level == "system":
        method += "; n counts systems: the gate correlates the systems' mean scores"
    return result(n, units >= n, formula, method)
