"""Temperature-Controlled Verdict Aggregation (TCVA).

A judge splits a candidate into atomic statements and gives each a verdict:
fully, mostly, partially, minor or none. Each verdict has a weight in [0, 1]
(by default 1.0, 0.9, 0.7, 0.3, 0.0). One score comes from the generalised
power mean of the weights,

    M_p(w) = (mean of w_i ** p) ** (1 / p),

with p set by a strictness temperature T in [0.1, 1.0] (clamped):

    p = -8 + (T - 0.1) / 0.9 * 20.25

so T = 0.1 gives p = -8 (close to the minimum: one bad statement sinks the
score), T = 0.5 gives p = 1 (the arithmetic mean), T = 0.9 gives p = 10 and
T = 1.0 gives p = 12.25 (close to the maximum). For p < 0 weights of 0 are
clamped to 1e-9; for |p| < 1e-12 the geometric mean is used. With the None
penalty the score is multiplied by (1 - f_none) ** (1.5 - T), f_none being
the share of verdicts whose weight is exactly 0.

Because only the aggregation changes with T, one set of stored verdicts
serves every temperature: re-aggregation costs no judge call.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from geval_spec.spec.sections import VERDICT_LEVELS, VerdictLevel

if TYPE_CHECKING:  # numpy is imported when a matrix is computed, not when a spec is validated
    import numpy.typing as npt

ALIASES: dict[str, VerdictLevel] = {"partial": "partially"}
DEFAULT_WEIGHTS = {"fully": 1.0, "mostly": 0.9, "partially": 0.7, "minor": 0.3, "none": 0.0}
ZERO_CLAMP = 1e-9
GEOMETRIC_BELOW = 1e-12
DECIMALS = 12  # of a vectorised TCVA score (tcva_matrix): the same on every CPU


def normalise_verdict(value: str) -> VerdictLevel | None:
    """A verdict level from the judge's spelling (case and the alias 'partial' are forgiven)."""
    v = str(value).strip().lower()
    if v in ALIASES:
        return ALIASES[v]
    return next((level for level in VERDICT_LEVELS if level == v), None)


def temperature_to_p(temperature: float) -> float:
    """The power-mean exponent for a strictness temperature (clamped to [0.1, 1.0])."""
    t = min(max(float(temperature), 0.1), 1.0)
    return -8.0 + (t - 0.1) / 0.9 * 20.25


def power_mean(weights: Sequence[float], p: float) -> float:
    """Generalised power mean of ``weights`` (non-empty, each in [0, 1])."""
    w = [float(x) for x in weights]
    if not w:
        raise ValueError("power_mean needs at least one weight")
    if p < 0 or abs(p) < GEOMETRIC_BELOW:
        w = [max(x, ZERO_CLAMP) for x in w]
    if abs(p) < GEOMETRIC_BELOW:
        return math.exp(sum(math.log(x) for x in w) / len(w))
    # (mean of w**p) ** (1/p) = exp((m + log1p(mean(expm1(a - m)))) / p) with a = p ln w and m = max(a):
    # no overflow, and no cancellation for tiny |p| or for terms far below the largest
    a = [p * math.log(x) if x > 0 else -math.inf for x in w]
    m = max(a)
    if m == -math.inf:
        return 0.0
    return math.exp((m + math.log1p(sum(math.expm1(x - m) for x in a) / len(a))) / p)


def level_weights(verdicts: Iterable[str], weights: Mapping[str, float] | None = None) -> list[float]:
    table = dict(DEFAULT_WEIGHTS if weights is None else weights)
    out = []
    for v in verdicts:
        level = normalise_verdict(v)
        if level is None:
            raise ValueError(f"unknown verdict {v!r}; expected one of {', '.join(VERDICT_LEVELS)}")
        out.append(float(table[level]))
    return out


def tcva_score(verdicts: Sequence[str] | Sequence[float], temperature: float,
               weights: Mapping[str, float] | None = None, none_penalty: bool = True) -> float:
    """The TCVA score of one judgment's verdicts (levels, or their weights).

    Raises ``ValueError`` for an empty list: what an empty judgment scores is
    the spec's ``aggregation.on_empty`` decision, not this function's.
    """
    if len(verdicts) == 0:
        raise ValueError("no verdicts to aggregate")
    w = [float(v) for v in verdicts] if isinstance(verdicts[0], (int, float)) \
        else level_weights([str(v) for v in verdicts], weights)
    score = power_mean(w, temperature_to_p(temperature))
    if none_penalty:
        t = min(max(float(temperature), 0.1), 1.0)
        f_none = sum(1 for x in w if x == 0.0) / len(w)
        score *= (1.0 - f_none) ** (1.5 - t)
    return score


def tcva_matrix(case_index: npt.ArrayLike, weights: npt.ArrayLike, n_cases: int, temperatures: Sequence[float],
                none_penalty: bool = True) -> npt.NDArray[Any]:
    """Vectorised TCVA: scores[t, case] for many cases and temperatures at once.

    ``case_index``/``weights``: flat arrays, one entry per verdict. Cases with
    no verdicts get NaN (the caller applies ``on_empty``).

    Scores are rounded to :data:`DECIMALS` decimals: NumPy's exp and log give
    results one bit apart on CPUs with AVX-512 and without (a tenth of the
    scores), and two cases with the same verdicts in another order, or a score
    on a histogram's bin edge, then ranked or binned differently by machine.
    """
    import numpy as np

    idx = np.asarray(case_index, dtype=np.int64)
    w = np.asarray(weights, dtype=float)
    counts = np.bincount(idx, minlength=n_cases).astype(float)
    has = counts > 0
    safe_counts = np.where(has, counts, 1.0)
    zeros = np.bincount(idx, weights=(w == 0.0).astype(float), minlength=n_cases)
    f_none = zeros / safe_counts
    clamped = np.maximum(w, ZERO_CLAMP)
    out = np.empty((len(temperatures), n_cases))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # rows without verdicts are masked below
        for k, temp in enumerate(temperatures):
            out[k] = _row(idx, w, clamped, safe_counts, f_none, has, n_cases, temp, none_penalty)
    return np.round(out, DECIMALS)


def _row(idx: npt.NDArray[Any], w: npt.NDArray[Any], clamped: npt.NDArray[Any], safe_counts: npt.NDArray[Any],
         f_none: npt.NDArray[Any], has: npt.NDArray[Any], n_cases: int, temp: float,
         none_penalty: bool) -> npt.NDArray[Any]:
    import numpy as np

    p = temperature_to_p(temp)
    if abs(p) < GEOMETRIC_BELOW:
        row = np.exp(np.bincount(idx, weights=np.log(clamped), minlength=n_cases) / safe_counts)
    else:  # the same stable form as power_mean
        base = clamped if p < 0 else w
        a = p * np.log(base)  # log(0) = -inf: a zero weight adds expm1(-inf) = -1, i.e. 0 ** p
        m = np.full(n_cases, -np.inf)
        np.maximum.at(m, idx, a)
        safe_m = np.where(np.isfinite(m), m, 0.0)
        mean = np.bincount(idx, weights=np.expm1(a - safe_m[idx]), minlength=n_cases) / safe_counts
        row = np.where(np.isfinite(m), np.exp((safe_m + np.log1p(mean)) / p), 0.0)
    if none_penalty:
        t = min(max(float(temp), 0.1), 1.0)
        row = row * (1.0 - f_none) ** (1.5 - t)
    return np.where(has, row, np.nan)

