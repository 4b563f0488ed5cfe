"""PPI / PPI++ mean estimation (geval_spec.analysis.ppi): hand-computed vectors, degenerate inputs, properties."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from geval_spec.analysis.ppi import (
    REASON_CONSTANT_JUDGE,
    REASON_CONSTANT_LABELS,
    REASON_TOO_FEW_LABELS,
    REASON_ZERO_VARIANCE,
    ppi_mean,
    ppi_mean_difference,
    tuned_lambda,
)

Z95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054


def some(value: float | None) -> float:
    """A field that must be present here (fails the test when it is None)."""
    assert value is not None
    return value

# The worked example (see test_worked_example).
Y = [1, 2, 3, 4, 5, 9]
F = [2, 2, 4, 4, 6, 6]
F_TILDE = [2, 4, 6, 8]


def test_worked_example() -> None:
    """Six labelled cases, four unlabelled, every number by hand.

    Data: Y = [1, 2, 3, 4, 5, 9], f = [2, 2, 4, 4, 6, 6], f~ = [2, 4, 6, 8];
    n = 6, N = 4 (min_labels=6 so that an interval is given).

    Means: mean(Y) = 24/6 = 4, mean(f) = 24/6 = 4, mean(f~) = 20/4 = 5.

    Lambda. Y - 4 = [-3, -2, -1, 0, 1, 5], f - 4 = [-2, -2, 0, 0, 2, 2];
    Cov(Y, f) (divisor n) = (6 + 4 + 0 + 0 + 2 + 10)/6 = 11/3.
    Pooled judge scores [2, 2, 4, 4, 6, 6, 2, 4, 6, 8] have mean 4.4 and squared
    deviations 3*5.76 + 3*0.16 + 3*2.56 + 12.96 = 38.4, so Var(f) (divisor
    n + N - 1 = 9) = 38.4/9 = 64/15. 1 + n/N = 5/2.
    lam = (11/3) / ((5/2)(64/15)) = (11/3) / (32/3) = 11/32 = 0.34375 (no clipping).

    Point: lam * 5 + mean(Y - lam f) = 5 lam + 4 - 4 lam = 4 + 11/32 = 4.34375.

    Variance. var(f~) (divisor N) = (9 + 1 + 1 + 9)/4 = 5.
    var(Y) = (9+4+1+0+1+25)/6 = 20/3, var(f) = 16/6 = 8/3 (divisor n), so
    var(Y - lam f) = 20/3 + (121/1024)(8/3) - 2 (11/32)(11/3)
                   = 2560/384 + 121/384 - 968/384 = 1713/384 = 571/128.
    Var(theta) = lam^2 var(f~)/N + var(Y - lam f)/n
               = (121/1024)(5/4) + (571/128)/6 = 605/4096 + 571/768
               = (1815 + 9136)/12288 = 10951/12288 = 0.89119466145833...
    se = sqrt(10951/12288) = 0.94403107017636...;
    95% interval 4.34375 -+ 1.959963984540054 * se = [2.49348310216752, 6.19401689783248].

    Human only: mean 4, variance var(Y)/n = (20/3)/6 = 10/9, se = sqrt(10)/3,
    interval 4 -+ z sqrt(10)/3 = [1.934016558984795, 6.065983441015205].
    Judge only: mean of all ten judge scores = 44/10 = 4.4.
    effective_labels = n * (10/9) / (10951/12288) = 81920/10951 = 7.48059537...
    labels_needed(0.5): n se^2 = 10951/2048 = 5.34716796875; times
    z^2 / 0.5^2 = 3.841458820694124 / 0.25 gives 82.16...; so 83 labels.

    With lam = 1 (original PPI): point 5 + mean(Y - f) = 5 + 0 = 5;
    Y - f = [-1, 0, -1, 0, -1, 3] has variance 12/6 = 2, so
    Var = var(f~)/N + var(Y - f)/n = 5/4 + 2/6 = 19/12.
    """
    est = ppi_mean(Y, F, F_TILDE, min_labels=6)
    assert est.reason is None
    assert est.n_labelled == 6 and est.n_unlabelled == 4 and est.level == 0.95
    assert est.lam == pytest.approx(11 / 32, abs=1e-12)
    assert est.value == pytest.approx(4 + 11 / 32, abs=1e-12)
    assert some(est.std_error) ** 2 == pytest.approx(10951 / 12288, abs=1e-12)
    assert est.ci_low == pytest.approx(2.49348310216752, abs=1e-12)
    assert est.ci_high == pytest.approx(6.19401689783248, abs=1e-12)
    assert est.halfwidth == pytest.approx(Z95 * math.sqrt(10951 / 12288), abs=1e-12)
    assert est.human_only.value == pytest.approx(4, abs=1e-12)
    assert est.human_only.std_error == pytest.approx(math.sqrt(10) / 3, abs=1e-12)
    assert est.human_only.ci_low == pytest.approx(1.934016558984795, abs=1e-12)
    assert est.human_only.ci_high == pytest.approx(6.065983441015205, abs=1e-12)
    assert est.judge_only == pytest.approx(4.4, abs=1e-12)
    assert est.effective_labels == pytest.approx(81920 / 10951, abs=1e-12)
    assert est.labels_needed(0.5) == 83
    assert tuned_lambda(Y, F, F_TILDE) == pytest.approx(11 / 32, abs=1e-12)

    ppi = ppi_mean(Y, F, F_TILDE, lam=1, min_labels=6)
    assert ppi.lam == 1
    assert ppi.value == pytest.approx(5, abs=1e-12)
    assert some(ppi.std_error) ** 2 == pytest.approx(19 / 12, abs=1e-12)
    assert (ppi.ci_low, ppi.ci_high) == pytest.approx((5 - Z95 * math.sqrt(19 / 12), 5 + Z95 * math.sqrt(19 / 12)),
                                                      abs=1e-12)


def classical_ppi(y: np.ndarray, f: np.ndarray, f_tilde: np.ndarray, level: float) -> tuple[float, float, float]:
    """The original PPI interval for a mean, written as in the PPI paper's algorithm.

    theta = mean(f~) - Delta with Delta = mean(f - Y) (the rectifier);
    sigma_f^2 = (1/N) sum (f~ - mean f~)^2, sigma_{f-Y}^2 = (1/n) sum (f - Y - Delta)^2;
    interval theta -+ z_{1-alpha/2} sqrt(sigma_f^2/N + sigma_{f-Y}^2/n).
    """
    n, big_n = len(y), len(f_tilde)
    delta = sum(fi - yi for fi, yi in zip(f, y)) / n
    theta = sum(f_tilde) / big_n - delta
    sigma_f = sum((x - sum(f_tilde) / big_n) ** 2 for x in f_tilde) / big_n
    sigma_r = sum((fi - yi - delta) ** 2 for fi, yi in zip(f, y)) / n
    half = NormalDist().inv_cdf(0.5 + level / 2) * math.sqrt(sigma_f / big_n + sigma_r / n)
    return theta, theta - half, theta + half


@pytest.mark.parametrize("seed", range(5))
def test_lambda_one_is_the_original_ppi(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.random(25)
    f = np.clip(y + rng.normal(0.2, 0.2, 25), 0, 1)
    f_tilde = rng.random(200)
    est = ppi_mean(y, f, f_tilde, level=0.9, lam=1.0)
    assert (est.value, est.ci_low, est.ci_high) == pytest.approx(classical_ppi(y, f, f_tilde, 0.9), abs=1e-12)


# Uncorrelated judge, built exactly: centred labels [1]*5 + [-1]*5 and centred
# judge [-1, 1, -1, 1, 0] * 2 have dot product (-1+1-1+1+0) - (-1+1-1+1+0) = 0.
Y_ORTHO = [2, 2, 2, 2, 2, 0, 0, 0, 0, 0]
F_ORTHO = [1, 3, 1, 3, 2, 1, 3, 1, 3, 2]


@pytest.mark.parametrize("f_tilde", [[0.0], [5, 7, 9], list(np.linspace(-3, 10, 500))])
def test_uncorrelated_judge_gives_lambda_zero_and_the_human_interval(f_tilde: list[float]) -> None:
    """Cov(Y, f) = 0 exactly, so lam = 0 and PPI is the classical estimate, for any unlabelled set.

    What could differ between the two intervals: the PPI variance is
    lam^2 var(f~)/N + var(Y - lam f)/n, the human-only one var(Y)/n (same
    divisor n, same z quantile). At lam = 0 the N-dependent term is 0 and the
    rectifier is Y itself, and the (1 + n/N) factor in lam multiplies a zero
    covariance; so nothing differs, and the intervals agree exactly, whatever
    N and f~ are (parametrised: N = 1, 3, 500).
    """
    est = ppi_mean(Y_ORTHO, F_ORTHO, f_tilde)
    assert est.lam == 0.0
    assert est.reason is None
    assert est.value == est.human_only.value == 1.0
    assert (est.ci_low, est.ci_high, est.std_error) == (
        est.human_only.ci_low, est.human_only.ci_high, est.human_only.std_error)
    assert est.std_error == pytest.approx(math.sqrt(1 / 10), abs=1e-15)
    assert est.effective_labels == pytest.approx(10, abs=1e-12)


def test_anticorrelated_judge_is_clipped_to_lambda_zero() -> None:
    y = [0.1, 0.3, 0.4, 0.6, 0.8, 0.9, 0.2, 0.7, 0.5, 0.55]
    f = [1 - v for v in y]
    est = ppi_mean(y, f, [0.2, 0.9, 0.4])
    assert est.lam == 0.0
    assert (est.value, est.ci_low, est.ci_high) == (est.human_only.value, est.human_only.ci_low,
                                                     est.human_only.ci_high)


def test_tuned_lambda_formula_and_clipping() -> None:
    rng = np.random.default_rng(3)
    y = rng.random(30)
    f = 0.5 * y + rng.normal(0, 0.1, 30)
    f_tilde = 0.5 * rng.random(70) + rng.normal(0, 0.1, 70)
    pooled = np.concatenate([f, f_tilde])
    cov = np.mean((y - y.mean()) * (f - f.mean()))
    expected = cov / ((1 + 30 / 70) * pooled.var(ddof=1))
    assert 0 < expected < 1
    assert tuned_lambda(y, f, f_tilde) == pytest.approx(expected, abs=1e-12)
    assert ppi_mean(y, f, f_tilde).lam == pytest.approx(expected, abs=1e-12)
    # Labels three times the judge: the raw weight is about 3 / (1 + n/N), clipped to 1.
    assert tuned_lambda(3 * f, f, f_tilde) == 1.0
    # No unlabelled cases: nothing to borrow.
    assert tuned_lambda(y, f, []) == 0.0


def test_no_unlabelled_cases_is_the_classical_estimate() -> None:
    rng = np.random.default_rng(4)
    y, f = rng.random(12), rng.random(12)
    est = ppi_mean(y, f, [])
    assert est.lam == 0.0 and est.n_unlabelled == 0 and est.reason is None
    assert (est.value, est.ci_low, est.ci_high) == (est.human_only.value, est.human_only.ci_low,
                                                     est.human_only.ci_high)
    with pytest.raises(ValueError, match="needs unlabelled"):
        ppi_mean(y, f, [], lam=0.5)


def test_labels_needed_is_solved_exactly() -> None:
    """With lam fixed, tiling the data k times keeps every variance and n/N, so the variance is n se^2 / (k n).

    The half-width of the 3-times-tiled data is what ``labels_needed`` must
    reach with exactly 3n labels (and not with 3n - 1).
    """
    rng = np.random.default_rng(5)
    y = rng.random(20)
    f = np.clip(y + rng.normal(0, 0.15, 20), 0, 1)
    f_tilde = rng.random(60)
    est = ppi_mean(y, f, f_tilde, lam=0.7)
    tiled = ppi_mean(np.tile(y, 3), np.tile(f, 3), np.tile(f_tilde, 3), lam=0.7)
    target = some(tiled.halfwidth) * (1 + 1e-12)
    assert est.labels_needed(target) == 60
    assert est.labels_needed(some(tiled.halfwidth) * math.sqrt(60 / 59) * (1 + 1e-9)) == 59
    assert est.labels_needed(some(est.halfwidth) * (1 + 1e-12)) == 20
    assert est.labels_needed(some(est.halfwidth) * 100) == 10  # never below min_labels
    assert ppi_mean(y, f, f_tilde, lam=0.7, min_labels=2).labels_needed(some(est.halfwidth) * 100) == 2
    with pytest.raises(ValueError, match="target_halfwidth"):
        est.labels_needed(0)
    assert ppi_mean(y[:5], f[:5], f_tilde).labels_needed(0.1) is None


@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_labels_needed_is_the_smallest_count_at_the_boundary(level: float) -> None:
    """At targets exactly on the half-width curve ``z sqrt(n se^2 / m)`` the answer is m itself, not m + 1."""
    rng = np.random.default_rng(8)
    y = rng.random(15)
    f = np.clip(y + rng.normal(0, 0.2, 15), 0, 1)
    est = ppi_mean(y, f, rng.random(45), level=level)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    scale = est.n_labelled * some(est.std_error) ** 2
    for m in range(10, 400):
        target = z * math.sqrt(scale / m)
        assert est.labels_needed(target) == m
        assert est.labels_needed(target * (1 - 1e-9)) == m + 1


def test_difference_matches_two_single_estimates() -> None:
    rng = np.random.default_rng(6)
    ya, yb = rng.random(20), rng.random(25) * 0.8
    fa, fb = np.clip(ya + rng.normal(0.1, 0.1, 20), 0, 1), np.clip(yb + rng.normal(-0.1, 0.2, 25), 0, 1)
    fua, fub = rng.random(300), rng.random(150)
    a, b = ppi_mean(ya, fa, fua, level=0.9), ppi_mean(yb, fb, fub, level=0.9)
    diff = ppi_mean_difference(ya, fa, fua, yb, fb, fub, level=0.9)
    z = NormalDist().inv_cdf(0.95)
    assert diff.a == a and diff.b == b and diff.reason is None and diff.level == 0.9
    assert a.lam != b.lam  # each side tuned on its own
    assert diff.value == pytest.approx(some(b.value) - some(a.value), abs=1e-12)
    assert diff.std_error == pytest.approx(math.hypot(some(a.std_error), some(b.std_error)), abs=1e-12)
    assert (diff.ci_low, diff.ci_high) == pytest.approx(
        (some(diff.value) - z * some(diff.std_error), some(diff.value) + z * some(diff.std_error)), abs=1e-12)
    human = diff.human_only
    assert human.value == pytest.approx(some(b.human_only.value) - some(a.human_only.value), abs=1e-12)
    assert human.std_error == pytest.approx(math.hypot(some(a.human_only.std_error), some(b.human_only.std_error)), abs=1e-12)
    assert (human.ci_low, human.ci_high) == pytest.approx(
        (some(human.value) - z * some(human.std_error), some(human.value) + z * some(human.std_error)), abs=1e-12)
    assert diff.judge_only == pytest.approx(b.judge_only - a.judge_only, abs=1e-12)

    fixed = ppi_mean_difference(ya, fa, fua, yb, fb, fub, lam_a=1.0, lam_b=0.0)
    assert fixed.a.lam == 1.0 and fixed.b.lam == 0.0
    assert fixed.b.value == pytest.approx(yb.mean(), abs=1e-12)


def test_difference_without_interval_names_the_side() -> None:
    rng = np.random.default_rng(7)
    y, f, fu = rng.random(20), rng.random(20), rng.random(50)
    few = ppi_mean_difference(y[:4], f[:4], fu, y, f, fu)
    assert few.reason == "a:too_few_labels"
    assert few.value == pytest.approx(some(few.b.value) - some(few.a.value), abs=1e-12)
    assert few.ci_low is None and few.std_error is None and few.human_only.ci_low is None
    constant = ppi_mean_difference(y, f, fu, y, np.full(20, 0.5), np.full(50, 0.5))
    assert constant.reason == "b:constant_judge"
    assert constant.ci_low is None
    assert constant.human_only.ci_low is not None  # both sides still have a human-only interval


def test_too_few_labels() -> None:
    est = ppi_mean([0.2, 0.4, 0.9], [0.3, 0.5, 0.7], [0.1, 0.6, 0.8])
    assert est.reason == REASON_TOO_FEW_LABELS
    assert est.value is not None and est.lam is not None
    assert est.ci_low is est.ci_high is est.std_error is est.effective_labels is None
    assert est.human_only.value == pytest.approx(0.5, abs=1e-12) and est.human_only.ci_low is None
    assert ppi_mean([0.2, 0.4, 0.9], [0.3, 0.5, 0.7], [0.1, 0.6, 0.8], min_labels=3).reason is None
    none = ppi_mean([], [], [0.25, 0.75])
    assert none.reason == REASON_TOO_FEW_LABELS
    assert none.value is None and none.lam is None and none.human_only.value is None
    assert none.judge_only == 0.5


def test_constant_labels() -> None:
    est = ppi_mean([1.0] * 12, np.linspace(0, 1, 12), [0.3, 0.4])
    assert est.reason == REASON_CONSTANT_LABELS
    assert est.value == pytest.approx(1.0, abs=1e-12)
    assert est.ci_low is None and est.human_only.ci_low is None and est.human_only.value == 1.0


def test_constant_judge() -> None:
    y = np.linspace(0, 1, 12)
    est = ppi_mean(y, [0.5] * 12, [0.5] * 30)
    assert est.reason == REASON_CONSTANT_JUDGE
    assert est.lam is None and est.value == pytest.approx(y.mean(), abs=1e-12)
    assert est.ci_low is None and est.std_error is None
    assert est.human_only.ci_low is not None  # the labels alone still give an interval
    assert tuned_lambda(y, [0.5] * 12, [0.5] * 30) is None


def test_zero_variance() -> None:
    y = [0.1 * k for k in range(10)]
    est = ppi_mean(y, y, [0.4] * 5, lam=1.0)  # Y - f = 0 and a constant f~ (but f varies)
    assert est.reason == REASON_ZERO_VARIANCE
    assert est.value == pytest.approx(0.4, abs=1e-12) and est.ci_low is None


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (([0.1, float("nan")], [0.1, 0.2], [0.3]), {}, "y_labelled has 1 non-finite value.*index 1"),
        (([0.1, 0.2], [0.1, 0.2], [0.3, float("inf"), float("-inf")]), {}, "f_unlabelled has 2 non-finite"),
        (([0.1, 0.2], [0.1], [0.3]), {}, "lengths 2 and 1"),
        (([[0.1, 0.2]], [[0.1, 0.2]], [0.3]), {}, "one-dimensional"),
        (([0.1], ["a"], [0.3]), {}, "f_labelled must be a sequence of numbers"),
        (([], [], []), {}, "no cases"),
        (([0.1, 0.2], [0.1, 0.2], [0.3]), {"level": 1.0}, "level"),
        (([0.1, 0.2], [0.1, 0.2], [0.3]), {"level": float("nan")}, "level"),
        (([0.1, 0.2], [0.1, 0.2], [0.3]), {"lam": float("nan")}, "lam must be a finite number"),
        (([0.1, 0.2], [0.1, 0.2], [0.3]), {"min_labels": 1}, "min_labels"),
        (([0.1, 0.2], [0.1, 0.2], [0.3]), {"min_labels": 2.5}, "min_labels"),
    ],
)
def test_bad_inputs_raise(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ppi_mean(*args, **kwargs)


scores = st.floats(0, 1, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def datasets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labelled pairs (10-40) whose judge partly tracks the label, and 1-60 unlabelled judge scores."""
    n = draw(st.integers(10, 40))
    y = np.array(draw(st.lists(scores, min_size=n, max_size=n)))
    noise = np.array(draw(st.lists(scores, min_size=n, max_size=n)))
    weight = draw(st.floats(0, 1))
    f = weight * y + (1 - weight) * noise
    f_tilde = np.array(draw(st.lists(scores, min_size=1, max_size=60)))
    return y, f, f_tilde


def assert_same_estimate(got, want, scale: float = 1.0, shift: float = 0.0) -> None:
    """``got`` equals ``want`` mapped through ``x -> scale * x + shift`` (value, interval, se, lambda)."""
    tol = 1e-9 * max(1.0, abs(scale), abs(shift))
    assert got.reason == want.reason
    assert got.lam == pytest.approx(want.lam, abs=1e-9)
    assert got.value == pytest.approx(scale * want.value + shift, abs=tol)
    assert got.ci_low == pytest.approx(scale * want.ci_low + shift, abs=tol)
    assert got.ci_high == pytest.approx(scale * want.ci_high + shift, abs=tol)
    assert got.std_error == pytest.approx(scale * want.std_error, abs=tol)
    assert got.human_only.value == pytest.approx(scale * want.human_only.value + shift, abs=tol)


@settings(max_examples=150, deadline=None)
@given(datasets(), st.floats(-10, 10))
def test_shifting_labels_shifts_the_estimate(data, c: float) -> None:
    y, f, f_tilde = data
    base = ppi_mean(y, f, f_tilde)
    assume(base.reason is None)
    assert_same_estimate(ppi_mean(y + c, f, f_tilde), base, shift=c)


@settings(max_examples=150, deadline=None)
@given(datasets(), st.floats(0.01, 100))
def test_rescaling_labels_and_judge_rescales_the_estimate(data, a: float) -> None:
    y, f, f_tilde = data
    base = ppi_mean(y, f, f_tilde)
    assume(base.reason is None)
    scaled = ppi_mean(a * y, a * f, a * f_tilde)
    assert_same_estimate(scaled, base, scale=a)
    assert scaled.judge_only == pytest.approx(a * base.judge_only, rel=1e-9)


@settings(max_examples=150, deadline=None)
@given(datasets(), st.floats(-10, 10))
def test_adding_a_constant_to_the_judge_changes_nothing(data, c: float) -> None:
    y, f, f_tilde = data
    base = ppi_mean(y, f, f_tilde)
    assume(base.reason is None)
    moved = ppi_mean(y, f + c, f_tilde + c)
    assert_same_estimate(moved, base)
    assert moved.effective_labels == pytest.approx(base.effective_labels, rel=1e-6)


@settings(max_examples=150, deadline=None)
@given(datasets(), st.floats(0.1, 10), st.floats(0, 1))
def test_fixed_lambda_compensates_a_rescaled_judge(data, b: float, lam: float) -> None:
    """theta(lam; b f) = theta(lam / b; f): only the product lam * f enters."""
    y, f, f_tilde = data
    base = ppi_mean(y, f, f_tilde, lam=lam)
    assume(base.reason is None)
    got = ppi_mean(y, b * f, b * f_tilde, lam=lam / b)
    assert got.value == pytest.approx(base.value, abs=1e-9)
    assert got.std_error == pytest.approx(base.std_error, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(datasets(), st.randoms(use_true_random=False))
def test_order_of_cases_does_not_matter(data, rnd) -> None:
    y, f, f_tilde = data
    base = ppi_mean(y, f, f_tilde)
    assume(base.reason is None)
    order = list(range(len(y)))
    rnd.shuffle(order)
    assert_same_estimate(ppi_mean(y[order], f[order], f_tilde[::-1]), base)


def test_judge_scores_spread_below_float_resolution_count_as_constant() -> None:
    """Hypothesis found scores whose range is above 0 (1e-270) but whose variance underflows to 0: the tuned weight
    divided by it. Such a judge is treated as constant, as one with no spread at all."""
    y = np.zeros(10)
    f = np.zeros(10)
    f[-1] = 9.33158265e-270
    got = ppi_mean(y, f, np.zeros(1))
    same = ppi_mean(y, np.zeros(10), np.zeros(1))
    assert got.value == same.value and got.std_error == same.std_error and got.reason == same.reason
