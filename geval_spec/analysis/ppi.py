"""Prediction-powered inference (PPI and PPI++) for a mean quality score.

Setting: an LLM judge scored every case, humans labelled a random subset.
From the ``n`` labelled cases we have pairs ``(Y_i, f_i)`` (human label, judge
score); from the ``N`` unlabelled cases only the judge scores ``f~_j``. The
target is the mean human score. The judge's own mean is biased; the labels'
mean is unbiased but noisy. Prediction-powered inference uses the labelled
pairs to measure the judge's bias and the unlabelled scores to cut the noise:

    theta(lam) = lam * mean(f~) + mean(Y - lam * f)

is unbiased for E[Y] for every fixed ``lam``. ``lam = 1`` is the original PPI
estimator (Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, "Prediction-powered
inference", Science 382, 2023; arXiv:2301.09633); ``lam = 0`` is the classical
mean of the labels. PPI++ (Angelopoulos, Duchi, Zrnic, "PPI++: Efficient
prediction-powered inference", 2023; arXiv:2311.01453) picks the ``lam`` that
minimises the estimator's variance:

    lam* = Cov(Y, f) / ((1 + n/N) * Var(f))

Choices, following the papers and, where they leave a detail open (divisors,
clipping), the authors' reference implementation ``ppi_py``
(``ppi_mean_pointestimate``, ``ppi_mean_ci``, ``_calc_lam_glm``), whose
numbers these match:

- ``Cov(Y, f)`` is the labelled pairs' covariance with divisor ``n``;
  ``Var(f)`` is the sample variance (divisor ``n + N - 1``) of the judge's
  scores on all ``n + N`` cases pooled. The factor ``1 + n/N`` is the papers'
  finite-``N`` correction: the unlabelled mean is itself noisy when ``N`` is
  not much larger than ``n``.
- The tuned ``lam`` is clipped to ``[0, 1]``. ``lam = 0`` is the classical
  estimator, so a judge uncorrelated with (or anti-correlated with) the labels
  falls back to the labels alone instead of being trusted; values above 1
  would extrapolate past the original PPI. A ``lam`` passed by the caller is
  used as given, unclipped (the estimator is unbiased for any fixed ``lam``).
- The variance is estimated as ``lam^2 * var(f~)/N + var(Y - lam*f)/n``. By
  default the divisors are ``N`` and ``n`` and the interval is the normal
  one, ``theta +- z_{1-alpha/2} * se`` (PPI's Algorithm for the mean,
  ``ppi_py.ppi_mean_ci``). Given ``t_quantile``, a function returning
  Student's t quantile, the variances are sample variances (divisors ``n - 1``
  and ``N - 1``) and the quantile is t's with ``n - 1`` degrees of freedom,
  the textbook small-sample interval for the mean of the rectified labels
  ``Y - lam f``; the report passes
  :func:`geval_spec.analysis.student_t.t_quantile`. docs/estimate-math.md
  gives the coverage that decided it. No finite-population correction is applied: for the mean of a fixed set of
  ``n + N`` cases the variance is overstated by about ``Var(Y)/(n + N)``, so
  intervals are conservative there.
- The human-only interval uses the same quantile and divisor, so it is
  exactly the ``lam = 0`` case and a width comparison measures the judge's
  contribution alone.

Degenerate inputs give point estimates where they are defined, no interval,
and a machine-readable ``reason`` (see the ``REASON_*`` constants).
Non-finite inputs raise ``ValueError``.

The module needs numpy and the standard library only.
"""

import math
from dataclasses import field
from statistics import NormalDist
from typing import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geval_spec.analysis.ppi_inputs import check_min_labels, checked_level, validated
from geval_spec.values import frozen

__all__ = [
    "REASON_CONSTANT_JUDGE",
    "REASON_CONSTANT_LABELS",
    "REASON_TOO_FEW_LABELS",
    "REASON_ZERO_VARIANCE",
    "ClassicalEstimate",
    "DifferenceEstimate",
    "MeanEstimate",
    "Quantile",
    "ppi_mean",
    "difference",
    "ppi_mean_difference",
    "tuned_lambda",
]

REASON_TOO_FEW_LABELS = "too_few_labels"
"""Fewer labelled cases than ``min_labels``: the variance estimate is unreliable."""
REASON_CONSTANT_LABELS = "constant_labels"
"""All human labels are equal: their sample variance is 0, a normal interval would have zero width."""
REASON_CONSTANT_JUDGE = "constant_judge"
"""The judge gave every case (labelled and unlabelled) the same score: it carries no information, and
the tuned ``lam`` is 0/0. The point estimate is the labels' mean; read ``human_only`` for an interval."""
REASON_ZERO_VARIANCE = "zero_variance"
"""The estimated variance is exactly 0 (labels an exact linear function of the judge on the labelled
cases and a constant judge on the unlabelled ones): a zero-width interval would claim certainty."""

DEFAULT_MIN_LABELS = 10

Quantile = Callable[[float, int], float]
"""``(level, df) -> `` the two-sided critical value of Student's t with ``df`` degrees of freedom at ``level``."""


@frozen
class ClassicalEstimate:
    """A mean (or difference of means) from the human labels alone.

    ``value`` is the labels' mean; the interval is ``value +- q * std_error``
    with ``std_error = sqrt(var(Y)/n)``: ``q`` and the divisor of ``var`` are
    those of the PPI interval (normal and ``n``, or t and ``n - 1``), so it is
    the PPI interval at ``lam = 0``. For a difference of two independent
    means the variances add. ``value`` is None without labels; the interval
    and ``std_error`` are None when the estimate's ``reason`` rules the labels
    out (too few, or all equal).
    """

    value: float | None
    ci_low: float | None
    ci_high: float | None
    std_error: float | None


@frozen
class MeanEstimate:
    """The PPI++ estimate of a mean human score, with the baselines beside it.

    Fields:

    - ``value``: the prediction-powered point ``lam*mean(f~) + mean(Y - lam*f)``
      (None without labels).
    - ``ci_low``, ``ci_high``: its interval at ``level``, None when ``reason``
      is set.
    - ``std_error``: ``sqrt(lam^2 var(f~)/N + var(Y - lam f)/n)``, None when
      ``reason`` is set.
    - ``lam``: the weight used: tuned (PPI++, clipped to [0, 1]) unless the
      caller gave one; None when it is undefined (no labels, or a constant
      judge, where every ``lam`` gives the labels' mean).
    - ``level``: the confidence level.
    - ``n_labelled``, ``n_unlabelled``: ``n`` and ``N``.
    - ``human_only``: the classical estimate from the labels alone.
    - ``judge_only``: the judge's mean over all ``n + N`` cases (biased).
    - ``effective_labels``: ``n * var_human_only / var_ppi``, the number of
      labels the classical estimator would need for PPI's variance; None
      without an interval.
    - ``reason``: why there is no interval (a ``REASON_*`` constant), or None.
    - ``min_labels``: the fewest labels for which an interval is given.
    - ``t_quantile``: Student's t quantile when the interval is a t-interval
      (``n - 1`` degrees of freedom, sample variances), None for the normal one.
    """

    value: float | None
    ci_low: float | None
    ci_high: float | None
    std_error: float | None
    lam: float | None
    level: float
    n_labelled: int
    n_unlabelled: int
    human_only: ClassicalEstimate
    judge_only: float
    effective_labels: float | None
    reason: str | None
    min_labels: int
    t_quantile: Quantile | None = field(default=None, repr=False, compare=False)

    def critical(self, labels: int | None = None) -> float:
        """The interval's quantile with ``labels`` labelled cases (default ``n``): z, or t with ``labels - 1`` df."""
        return _critical(self.level, self.t_quantile, self.n_labelled if labels is None else labels)

    @property
    def halfwidth(self) -> float | None:
        """Half the interval's width, ``critical() * std_error``; None without an interval."""
        if self.std_error is None:
            return None
        return self.critical() * self.std_error

    def labels_needed(self, target_halfwidth: float) -> int | None:
        """The fewest labels giving an interval no wider than ``+- target_halfwidth``.

        Assumes the current variance estimates and the current ratio ``n/N``
        (every new label comes with ``N/n`` new judge-only cases, which are
        cheap). Then ``lam`` is unchanged (it depends on the data only through
        the variances and ``n/N``) and the variance at ``m`` labels is

            lam^2 var(f~) / (m N/n) + var(Y - lam f) / m = n * se^2 / m,

        so the half-width is ``q(m) * sqrt(n se^2 / m)``, with ``q(m)`` the
        interval's quantile at ``m`` labels (z, or t with ``m - 1`` df), and the
        answer is the smallest such ``m`` reaching the target, at least
        ``min_labels`` (below it no interval is given). The z bound
        ``m >= n se^2 z^2 / target^2`` is solved in closed form, then checked
        against the half-width formula itself, stepping up while it is too
        wide, so rounding (and t's larger quantile) cannot put it off by one.
        None when this estimate has no interval.
        """
        if not (math.isfinite(target_halfwidth) and target_halfwidth > 0):
            raise ValueError(f"target_halfwidth must be a positive finite number, got {target_halfwidth!r}")
        if self.std_error is None:
            return None
        z = _z(self.level)
        scale = self.n_labelled * self.std_error**2

        def halfwidth_at(m: int) -> float:
            return self.critical(m) * math.sqrt(scale / m)

        m = max(math.ceil(scale * z * z / target_halfwidth**2), self.min_labels)
        while m > self.min_labels and halfwidth_at(m - 1) <= target_halfwidth:
            m -= 1
        while halfwidth_at(m) > target_halfwidth:
            m += 1
        return m


@frozen
class DifferenceEstimate:
    """PPI++ estimate of ``mean_B - mean_A`` for two systems judged on different cases.

    The two samples are independent, so each side is estimated on its own
    (its own tuned ``lam``) and the variances add:
    ``std_error = sqrt(se_A^2 + se_B^2)``; the interval at ``level`` is the
    normal one, or with the sides' t quantile Student's t with
    ``min(n_A, n_B) - 1`` degrees of freedom (the lower bound of Welch's).

    Fields: ``value``, ``ci_low``, ``ci_high``, ``std_error`` (the PPI
    difference; None where a side lacks them), ``level``, ``a`` and ``b`` (the
    two single-system estimates), ``human_only`` (difference of the label
    means, variances added, same quantile), ``judge_only`` (difference of
    the judge means over all cases) and ``reason``: None, or the side and its
    reason, e.g. ``"a:too_few_labels"`` (``a`` when both sides have one).
    """

    value: float | None
    ci_low: float | None
    ci_high: float | None
    std_error: float | None
    level: float
    a: MeanEstimate
    b: MeanEstimate
    human_only: ClassicalEstimate
    judge_only: float
    reason: str | None


def tuned_lambda(y_labelled: ArrayLike, f_labelled: ArrayLike, f_unlabelled: ArrayLike) -> float | None:
    """PPI++'s power-tuned weight for the mean, clipped to ``[0, 1]``.

    ``Cov(Y, f) / ((1 + n/N) * Var(f))`` with the covariance over the
    labelled pairs (divisor ``n``) and the variance over the judge's scores on
    all cases pooled (divisor ``n + N - 1``), as in ``ppi_py._calc_lam_glm``.
    This minimises the asymptotic variance ``lam^2 Var(f)/N + Var(Y - lam f)/n``
    when ``Var(f)`` is the same on labelled and unlabelled cases. Returns 0
    without unlabelled cases (nothing to borrow) and None when it is undefined:
    no labels, or a judge constant over all cases.
    """
    y, f_l, f_u = validated(y_labelled, f_labelled, f_unlabelled)
    return _tuned_lambda(y, f_l, f_u, np.concatenate((f_l, f_u)))


def ppi_mean(
    y_labelled: ArrayLike,
    f_labelled: ArrayLike,
    f_unlabelled: ArrayLike,
    level: float = 0.95,
    lam: float | None = None,
    min_labels: int = DEFAULT_MIN_LABELS,
    t_quantile: Quantile | None = None,
) -> MeanEstimate:
    """Estimate the mean human score from ``n`` labelled pairs and ``N`` judge-only cases.

    Args:
        y_labelled: human labels ``Y_i`` of the labelled cases.
        f_labelled: the judge's scores ``f_i`` of the same cases, in the same order.
        f_unlabelled: the judge's scores ``f~_j`` of the unlabelled cases.
            Labelled cases must be a uniformly random subset of all cases.
        level: confidence level of the two-sided normal interval, in (0, 1).
        lam: a fixed weight (1 = original PPI, 0 = labels only); None tunes it
            (PPI++, clipped to [0, 1]). Without unlabelled cases it is 0.
        min_labels: fewest labelled cases for an interval (at least 2).
        t_quantile: Student's t quantile ``(level, df) -> critical value``: the
            interval becomes a t-interval (sample variances, ``n - 1`` df).
            None: the normal interval with divisors ``n`` and ``N`` (as ppi_py).

    Returns a :class:`MeanEstimate`. Degenerate inputs (fewer than
    ``min_labels`` labels, all labels equal, a constant judge, a zero variance
    estimate) give point estimates where defined, no interval, and ``reason``.

    Raises:
        ValueError: non-finite or non-1-D inputs, labelled arrays of different
            lengths, no cases at all, a bad ``level``, ``lam`` or ``min_labels``,
            or a nonzero ``lam`` without unlabelled cases.
    """
    y, f_l, f_u = validated(y_labelled, f_labelled, f_unlabelled)
    level = checked_level(level)
    check_min_labels(min_labels)
    if lam is not None:
        try:
            lam = float(lam)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"lam must be a finite number or None, got {lam!r}") from exc
        if not math.isfinite(lam):
            raise ValueError(f"lam must be a finite number or None, got {lam!r}")
        if f_u.size == 0 and lam != 0:
            raise ValueError(f"lam={lam!r} needs unlabelled judge scores; with none, only lam=0 is defined")
    return _estimate(y, f_l, f_u, level, lam, min_labels, t_quantile)


def ppi_mean_difference(
    y_labelled_a: ArrayLike,
    f_labelled_a: ArrayLike,
    f_unlabelled_a: ArrayLike,
    y_labelled_b: ArrayLike,
    f_labelled_b: ArrayLike,
    f_unlabelled_b: ArrayLike,
    *,
    level: float = 0.95,
    lam_a: float | None = None,
    lam_b: float | None = None,
    min_labels: int = DEFAULT_MIN_LABELS,
    t_quantile: Quantile | None = None,
) -> DifferenceEstimate:
    """Estimate ``mean_B - mean_A`` for systems A and B evaluated on different cases.

    Each side is :func:`ppi_mean` on its own data (its own tuned ``lam``
    unless ``lam_a``/``lam_b`` are given). The samples are independent, so
    the difference's variance is the sum of the two (see
    :func:`difference`). A PPI (or human-only) interval exists only when both
    sides have one.

    Not for paired designs (both systems judged on the same cases): their
    estimates are correlated and the variances do not simply add.
    """
    a = ppi_mean(y_labelled_a, f_labelled_a, f_unlabelled_a, level=level, lam=lam_a, min_labels=min_labels,
                 t_quantile=t_quantile)
    b = ppi_mean(y_labelled_b, f_labelled_b, f_unlabelled_b, level=level, lam=lam_b, min_labels=min_labels,
                 t_quantile=t_quantile)
    return difference(a, b)


def difference(a: MeanEstimate, b: MeanEstimate) -> DifferenceEstimate:
    """``b - a`` from two estimates made on independent cases at the same level with the same quantile.

    The variances add; the quantile is a's: z, or t with ``min(n_a, n_b) - 1``
    degrees of freedom. The human-only and judge-only differences are made the
    same way from the sides' baselines.
    """
    if a.level != b.level or a.t_quantile is not b.t_quantile:
        raise ValueError("the two estimates must share their level and quantile")
    q = _critical(a.level, a.t_quantile, min(a.n_labelled, b.n_labelled))
    value, ci_low, ci_high, std_error = _difference(a.value, a.std_error, b.value, b.std_error, q)
    human = _difference(a.human_only.value, a.human_only.std_error, b.human_only.value, b.human_only.std_error, q)
    if a.reason is not None:
        reason: str | None = f"a:{a.reason}"
    elif b.reason is not None:
        reason = f"b:{b.reason}"
    else:
        reason = None
    return DifferenceEstimate(
        value=value,
        ci_low=ci_low,
        ci_high=ci_high,
        std_error=std_error,
        level=a.level,
        a=a,
        b=b,
        human_only=ClassicalEstimate(*human),
        judge_only=b.judge_only - a.judge_only,
        reason=reason,
    )


def _estimate(
    y: NDArray[np.float64],
    f_l: NDArray[np.float64],
    f_u: NDArray[np.float64],
    level: float,
    lam: float | None,
    min_labels: int,
    t_quantile: Quantile | None = None,
) -> MeanEstimate:
    """Compute a :class:`MeanEstimate` from validated arrays (see :func:`ppi_mean`)."""
    n, big_n = y.size, f_u.size
    z = _critical(level, t_quantile, n)
    ddof = 0 if t_quantile is None else 1
    pooled = np.concatenate((f_l, f_u))
    constant_judge = bool(np.ptp(pooled) == 0)
    if n < min_labels:
        reason: str | None = REASON_TOO_FEW_LABELS
    elif np.ptp(y) == 0:
        reason = REASON_CONSTANT_LABELS
    elif constant_judge:
        reason = REASON_CONSTANT_JUDGE
    else:
        reason = None

    human_value = float(np.mean(y)) if n else None
    human = ClassicalEstimate(human_value, None, None, None)
    if reason not in (REASON_TOO_FEW_LABELS, REASON_CONSTANT_LABELS):
        human = ClassicalEstimate(*_interval(float(np.mean(y)), float(np.var(y, ddof=ddof)) / n, z))

    if lam is None and n:
        lam = _tuned_lambda(y, f_l, f_u, pooled)
    if n == 0:
        value = None
    elif lam is None:  # constant judge: every lam gives the labels' mean
        value = human_value
    else:
        value = _point(y, f_l, f_u, lam)

    ci_low = ci_high = std_error = effective = None
    if reason is None and lam is not None and value is not None:
        variance = _variance(y, f_l, f_u, lam, ddof)
        if variance == 0:
            reason = REASON_ZERO_VARIANCE
        else:
            _, ci_low, ci_high, std_error = _interval(value, variance, z)
            effective = n * human.std_error**2 / variance if human.std_error is not None else None
    return MeanEstimate(
        value=value,
        ci_low=ci_low,
        ci_high=ci_high,
        std_error=std_error,
        lam=lam,
        level=level,
        n_labelled=n,
        n_unlabelled=big_n,
        human_only=human,
        judge_only=float(np.mean(pooled)),
        effective_labels=effective,
        reason=reason,
        min_labels=min_labels,
        t_quantile=t_quantile,
    )


def _tuned_lambda(
    y: NDArray[np.float64], f_l: NDArray[np.float64], f_u: NDArray[np.float64], pooled: NDArray[np.float64]
) -> float | None:
    """PPI++ weight from validated arrays, ``pooled`` being ``f_l`` and ``f_u`` joined (see :func:`tuned_lambda`)."""
    n, big_n = y.size, f_u.size
    if n == 0:
        return None
    if np.ptp(pooled) == 0:
        return None
    if big_n == 0:
        return 0.0
    var_pooled = float(np.var(pooled, ddof=1))
    if not var_pooled > 0:  # a spread below float resolution (scores of 1e-270) is as constant as none at all
        return None
    cov = float(np.mean((y - np.mean(y)) * (f_l - np.mean(f_l))))
    raw = cov / ((1 + n / big_n) * var_pooled)
    return min(max(raw, 0.0), 1.0)


def _point(y: NDArray[np.float64], f_l: NDArray[np.float64], f_u: NDArray[np.float64], lam: float) -> float:
    """``mean(Y - lam f) + lam mean(f~)``; the second term is absent when ``N = 0`` (then ``lam = 0``)."""
    rectified = float(np.mean(y - lam * f_l))
    if f_u.size == 0:
        return rectified
    return rectified + lam * float(np.mean(f_u))


def _variance(y: NDArray[np.float64], f_l: NDArray[np.float64], f_u: NDArray[np.float64], lam: float,
              ddof: int = 0) -> float:
    """``var(Y - lam f)/n + lam^2 var(f~)/N``: divisors ``n`` and ``N`` (PPI's algorithm) with ``ddof = 0``;
    ``n - 1`` and ``N - 1`` with ``ddof = 1`` (``N`` when ``N = 1``, whose term is then 0)."""
    rectifier = float(np.var(y - lam * f_l, ddof=ddof)) / y.size
    if f_u.size == 0:
        return rectifier
    return rectifier + lam**2 * float(np.var(f_u, ddof=ddof if f_u.size > 1 else 0)) / f_u.size


def _interval(value: float, variance: float, z: float) -> tuple[float, float, float, float]:
    """``(value, low, high, se)`` of the normal interval ``value +- z sqrt(variance)``."""
    se = math.sqrt(variance)
    return value, value - z * se, value + z * se, se


def _difference(
    value_a: float | None, se_a: float | None, value_b: float | None, se_b: float | None, z: float
) -> tuple[float | None, float | None, float | None, float | None]:
    """``B - A`` with variances added; interval parts None unless both sides have a standard error."""
    value = None if value_a is None or value_b is None else value_b - value_a
    if value is None or se_a is None or se_b is None:
        return value, None, None, None
    return _interval(value, se_a**2 + se_b**2, z)


def _critical(level: float, t_quantile: Quantile | None, labels: int) -> float:
    """z, or Student's t quantile with ``labels - 1`` degrees of freedom (z below 2 labels: no interval then)."""
    if t_quantile is None or labels < 2:
        return _z(level)
    return float(t_quantile(level, labels - 1))


def _z(level: float) -> float:
    """The two-sided standard normal quantile ``z_{1-alpha/2}`` for ``level = 1 - alpha``."""
    return NormalDist().inv_cdf(0.5 + level / 2)
