"""How many cases a gate needs: the sample size to tell the gate's threshold from 0.5.

The cases needed come from the Fisher z transformation of a correlation,
which is about normal with a known variance; the required n solves the
two-sided test's power equation. The report also says how many usable cases
the gate's split has.
"""

from __future__ import annotations

import math

import numpy as np

from geval_spec.analysis.frame import Frame
from geval_spec.analysis.results import SampleSize
from geval_spec.spec.sections import Spec

ALPHA = 0.05
POWER = 0.8
NULL = 0.5
VARIANCE = {"spearman": "Bonett-Wright variance (1 + r^2/2)/(n - 3)", "pearson": "variance 1/(n - 3)",
            "kendall": "Fieller variance 0.437/(n - 4)"}


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
    from scipy.stats import norm

    za = norm.ppf(1 - alpha / 2)
    zb = norm.ppf(power)
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


def sample_size(frame: Frame, spec: Spec) -> SampleSize:
    cal = spec.calibration
    split = cal.split
    present = split == "all" or any(s == split for s in frame.splits)
    keep = frame.usable(split) if present else np.zeros(frame.n, bool)
    available = int(keep.sum())
    units = available
    if cal.level == "group":
        units = len({g for g, k in zip(frame.groups, keep) if k and g is not None})
    elif cal.level == "system":
        units = len({s for s, k in zip(frame.systems, keep) if k and s is not None})

    def result(required: int | None, enough: bool | None, formula: str | None, method: str) -> SampleSize:
        return SampleSize(split=split, level=cal.level, available=available, available_units=units, alpha=ALPHA,
                          power=POWER, null=NULL, alternative=cal.threshold, required=required, enough=enough,
                          formula=formula, method=method)

    if cal.threshold <= NULL:
        return result(None, None, None, "not applicable: the threshold must exceed 0.5 to be told apart from 0.5")
    n, formula = required_n(cal.threshold, NULL, cal.metric)
    method = (f"Fisher z, two-sided alpha {ALPHA}, power {POWER}, {cal.metric} with the {VARIANCE[cal.metric]}; "
              f"H0 rho = {NULL} against rho = {cal.threshold}")
    if cal.level != "dataset":
        method += f"; counted in cases, the gate's level is {cal.level} ({units} units)"
    return result(n, available >= n, formula, method)
