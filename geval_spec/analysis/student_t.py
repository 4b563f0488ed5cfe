"""Student's t quantile for the estimate's intervals, in the standard library.

Why not scipy: ``scipy.special.stdtrit`` gives the same numbers, but the
first import of scipy.special takes about 0.23 s, a tenth of a whole
``report`` over 10,000 cases, where the estimate may add 5% at most
(BENCHMARKS.md, "Estimate: its cost in report").

For an integer number of degrees of freedom ``df`` the distribution of
``|T|`` has a closed form (Abramowitz and Stegun 26.7.3 and 26.7.4): with
``theta = atan(t / sqrt(df))``,

- ``df`` odd: ``P(|T| <= t) = (2/pi) (theta + sin(theta) (cos(theta) +
  (2/3) cos^3(theta) + ... + (2 4 ... (df-3)) / (1 3 ... (df-2)) cos^(df-2)(theta)))``
  (only ``2 theta / pi`` for ``df = 1``);
- ``df`` even: ``P(|T| <= t) = sin(theta) (1 + (1/2) cos^2(theta) + ... +
  (1 3 ... (df-3)) / (2 4 ... (df-2)) cos^(df-2)(theta))``.

:func:`t_quantile` solves ``P(|T| <= t) = level`` by Newton's method from the
normal quantile, which lies below the root; the function is concave in ``t``,
so every step stays below the root and the iteration climbs to it
monotonically. ``df`` 1 and 2 have closed forms. Above 1,000 degrees of
freedom the Cornish-Fisher expansion (A&S 26.7.5, four terms, error of order
``df^-5``) is used instead of the series. Agreement with scipy's ``stdtrit``
is checked in tests/test_estimate.py.
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["t_quantile", "two_sided_cdf"]

SERIES_MAX_DF = 1000
TOLERANCE = 1e-14


def two_sided_cdf(t: float, df: int) -> float:
    """``P(|T| <= t)`` for Student's t with ``df`` (a positive integer) degrees of freedom, ``t >= 0``."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    term = total = math.cos(theta)
    for k in range(1, (df - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + s * total)


def _density(t: float, df: int) -> float:
    """The t density at ``t`` (twice it is the derivative of :func:`two_sided_cdf`)."""
    log = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
           - (df + 1) / 2 * math.log1p(t * t / df))
    return math.exp(log)


def _cornish_fisher(z: float, df: int) -> float:
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def t_quantile(level: float, df: int) -> float:
    """The two-sided critical value: ``t`` with ``P(|T| <= t) = level`` for ``df`` degrees of freedom.

    ``level`` strictly between 0 and 1, ``df`` a positive integer; ``ValueError`` otherwise.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be strictly between 0 and 1, got {level!r}")
    if isinstance(df, bool) or int(df) != df or df < 1:
        raise ValueError(f"df must be a positive integer, got {df!r}")
    df = int(df)
    if df == 1:
        return math.tan(math.pi * level / 2)
    if df == 2:
        return level * math.sqrt(2 / (1 - level * level))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    if df > SERIES_MAX_DF:
        return _cornish_fisher(z, df)
    t = z
    for _ in range(200):
        step = (level - two_sided_cdf(t, df)) / (2 * _density(t, df))
        t += step
        if step <= TOLERANCE * max(1.0, t):
            break
    return t
