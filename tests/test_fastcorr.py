"""geval_spec.analysis.fastcorr against scipy on materialised resamples (property tests and hand cases)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from geval_spec.analysis import fastcorr, fastcorr_rows
from geval_spec.analysis.fastcorr import (
    WeightedPairs,
    weighted_kendall_rows,
    weighted_pearson_rows,
    weighted_spearman_rows,
)
from geval_spec.analysis.fastcorr_rows import group_correlations, rowwise_kendall, rowwise_pearson, rowwise_spearman

ATOL = 1e-12
SCIPY = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}
WEIGHTED = {"pearson": weighted_pearson_rows, "spearman": weighted_spearman_rows,
            "kendall": weighted_kendall_rows}
ROWWISE = {"pearson": rowwise_pearson, "spearman": rowwise_spearman, "kendall": rowwise_kendall}
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(metric: str, a: np.ndarray, b: np.ndarray) -> float:
    """scipy's statistic; NaN with fewer than two values, a constant side or a NaN."""
    if a.size < 2 or np.isnan(a).any() or np.isnan(b).any() or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(SCIPY[metric](a, b).statistic)


def materialised(metric: str, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = []
    for row in w:
        rep = np.repeat(np.arange(x.size), row.astype(np.int64))
        out.append(reference(metric, x[rep], y[rep]))
    return np.array(out)


def assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(actual, expected, rtol=0, atol=ATOL, equal_nan=True)


# -- strategies --------------------------------------------------------------------------------
def column(n: int) -> st.SearchStrategy[np.ndarray]:
    """A score vector: many ties (a few levels), all distinct floats, or all equal."""
    levels = st.lists(st.integers(0, 3), min_size=n, max_size=n).map(lambda v: np.array(v) / 2.0)
    likert = st.lists(st.integers(3, 15), min_size=n, max_size=n).map(lambda v: np.array(v) / 3.0)
    floats = st.lists(st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False), min_size=n,
                      max_size=n, unique=True).map(np.array)
    constant = st.floats(-10, 10, allow_nan=False).map(lambda v: np.full(n, v))
    return st.one_of(levels, likert, floats, constant)


@st.composite
def weighted_samples(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 14))
    rows = draw(st.integers(1, 5))
    x = draw(column(n))
    y = draw(column(n))
    top = draw(st.sampled_from([1, 2, 4]))
    w = np.array(draw(st.lists(st.integers(0, top), min_size=rows * n, max_size=rows * n)),
                 dtype=float).reshape(rows, n)
    return x, y, w


@st.composite
def row_samples(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    rows = draw(st.integers(1, 6))
    s = draw(st.integers(1, 9))
    a = np.stack([draw(column(s)) for _ in range(rows)])
    b = np.stack([draw(column(s)) for _ in range(rows)])
    if draw(st.booleans()):
        a[draw(st.integers(0, rows - 1)), draw(st.integers(0, s - 1))] = np.nan
    return a, b


# -- weighted rows -----------------------------------------------------------------------------
@pytest.mark.parametrize("metric", ["pearson", "spearman", "kendall"])
@PROPERTY
@given(sample=weighted_samples())
def test_weighted_rows_equal_scipy_on_the_materialised_resample(metric, sample):
    x, y, w = sample
    assert_close(WEIGHTED[metric](x, y, w), materialised(metric, x, y, w))


@PROPERTY
@given(sample=weighted_samples(), block=st.integers(1, 40))
def test_blocks_and_chunks_do_not_change_the_values(sample, block):
    x, y, w = sample
    pairs = WeightedPairs(x, y)
    whole = {m: getattr(pairs, m)(w) for m in ("pearson", "spearman", "kendall")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastcorr, "BLOCK_ELEMENTS", block)
        for metric, expected in whole.items():
            chunks = [getattr(pairs, metric)(w[i:i + 2]) for i in range(0, w.shape[0], 2)]
            np.testing.assert_array_equal(np.concatenate(chunks), expected)


@pytest.mark.parametrize("metric", ["pearson", "spearman", "kendall"])
@pytest.mark.parametrize("y_kind", ["likert", "continuous"])
def test_larger_samples_many_levels(metric, y_kind):
    """n = 1500: the Kendall merge runs 4 (Likert) or 11 (continuous) levels, with every tie kind."""
    rng = np.random.default_rng(11)
    n = 1500
    y = rng.integers(3, 16, n) / 3.0 if y_kind == "likert" else rng.normal(size=n)
    x = np.round(y + rng.normal(0, 0.5, n), 1)  # ties within x and across halves
    w = np.vstack([rng.multinomial(n, np.full(n, 1 / n), size=3), np.ones((1, n))])
    assert_close(WEIGHTED[metric](x, y, w), materialised(metric, x, y, w))


def test_integer_and_float_weights_agree():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=50), rng.integers(0, 5, 50).astype(float)
    w = rng.integers(0, 3, (4, 50))
    pairs = WeightedPairs(x, y)
    for metric in ("pearson", "spearman", "kendall"):
        for dtype in (np.int32, np.int64, np.float32):
            np.testing.assert_array_equal(getattr(pairs, metric)(w.astype(dtype)),
                                          getattr(pairs, metric)(w.astype(float)))


def test_hand_cases():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([1.0, 3.0, 2.0, 4.0])
    ones = np.ones((1, 4))
    assert weighted_kendall_rows(x, y, ones)[0] == pytest.approx(4 / 6, abs=ATOL)
    assert weighted_spearman_rows(x, y, ones)[0] == pytest.approx(0.8, abs=ATOL)
    assert weighted_pearson_rows(x, y, ones)[0] == pytest.approx(0.8, abs=ATOL)
    # copies of a case are tied on both sides: [1, 1, 3] against itself is +1
    assert weighted_kendall_rows([1, 2, 3], [1, 2, 3], [[2, 0, 1]])[0] == 1.0
    # tau-b with the copies: resample x = [1, 1, 2], y = [2, 2, 1]
    assert weighted_kendall_rows([1, 2], [2, 1], [[2, 1]])[0] == -1.0
    undefined = np.array([[0, 0, 0, 0], [0, 3, 0, 0], [1, 1, 2, 0]], dtype=float)
    const_y = np.array([5.0, 5.0, 5.0, 1.0])  # constant on every row above
    for f in WEIGHTED.values():
        assert np.isnan(f(x, y, undefined[:2])).all()  # zero total weight; a single case
        assert np.isnan(f(x, const_y, undefined)).all()
    assert weighted_kendall_rows(x, y, np.zeros((0, 4))).shape == (0,)


def test_two_distinct_cases_give_plus_or_minus_one():
    w = np.array([[3, 1, 0], [0, 1, 2]])
    x = np.array([0.1, 0.7, 0.3])
    y = np.array([2.0, 1.0, 3.0])
    np.testing.assert_array_equal(weighted_spearman_rows(x, y, w), [-1.0, -1.0])  # exact integers
    np.testing.assert_array_equal(weighted_kendall_rows(x, y, w), [-1.0, -1.0])
    assert_close(weighted_pearson_rows(x, y, w), [-1.0, -1.0])


def test_invalid_weights_and_data_raise():
    x = y = np.arange(3.0)
    with pytest.raises(ValueError, match="whole numbers"):
        weighted_kendall_rows(x, y, [[0.5, 1, 1]])
    with pytest.raises(ValueError, match="non-negative"):
        weighted_spearman_rows(x, y, [[-1, 1, 1]])
    with pytest.raises(ValueError, match="non-negative"):
        weighted_pearson_rows(x, y, [[-1, 1, 1]])
    with pytest.raises(ValueError, match="shape"):
        weighted_pearson_rows(x, y, [[1, 1]])
    with pytest.raises(ValueError, match="finite"):
        WeightedPairs([0.0, np.nan, 1.0], y)


# -- row-wise and per-group --------------------------------------------------------------------
@pytest.mark.parametrize("metric", ["pearson", "spearman", "kendall"])
@PROPERTY
@given(sample=row_samples())
def test_rowwise_equal_scipy(metric, sample):
    a, b = sample
    expected = [reference(metric, a[r], b[r]) for r in range(a.shape[0])]
    assert_close(ROWWISE[metric](a, b), np.array(expected))


def test_rowwise_kendall_blocks_rows(monkeypatch):
    rng = np.random.default_rng(5)
    a = rng.integers(0, 6, (37, 20)).astype(float)
    b = a + rng.integers(-2, 3, (37, 20))
    whole = rowwise_kendall(a, b)
    monkeypatch.setattr(fastcorr_rows, "PAIRWISE_BLOCK", 1000)  # two rows per block
    np.testing.assert_array_equal(rowwise_kendall(a, b), whole)
    assert_close(whole, np.array([reference("kendall", a[r], b[r]) for r in range(37)]))


@st.composite
def grouped_samples(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    n = draw(st.integers(0, 40))
    g = draw(st.integers(1, 12))
    codes = np.array(draw(st.lists(st.integers(0, g - 1), min_size=n, max_size=n)), dtype=np.int64)
    return draw(column(n)), draw(column(n)), codes, g


@pytest.mark.parametrize("metric", ["pearson", "spearman", "kendall"])
@PROPERTY
@given(sample=grouped_samples())
def test_group_correlations_equal_scipy_per_group(metric, sample):
    x, y, codes, g = sample
    expected = np.array([reference(metric, x[codes == k], y[codes == k]) for k in range(g)])
    assert_close(group_correlations(x, y, codes, metric, n_groups=g), expected)


def test_group_correlations_hand_cases():
    x = np.array([1.0, 2.0, 5.0, 5.0, 1.0, 2.0, 3.0, 7.0, np.nan, 1.0])
    y = np.array([2.0, 1.0, 1.0, 2.0, 1.0, 2.0, 2.0, 9.0, 1.0, 2.0])
    codes = np.array([0, 0, 1, 1, 2, 2, 2, 3, 4, 4])
    for metric in ("pearson", "spearman", "kendall"):
        got = group_correlations(x, y, codes, metric, n_groups=6)
        assert got[0] == -1.0  # two cases
        assert np.isnan(got[1])  # constant x
        assert np.isnan(got[3]) and np.isnan(got[4]) and np.isnan(got[5])  # one case; a NaN; empty
        assert got[2] == pytest.approx(reference(metric, x[4:7], y[4:7]), abs=ATOL)


def test_large_kendall_groups_use_the_merge():
    rng = np.random.default_rng(8)
    size = fastcorr_rows.PAIRWISE_MAX_SIZE + 44
    codes = np.repeat([0, 1, 2], [size, size, 3])
    x = rng.integers(0, 20, codes.size).astype(float)
    y = x + rng.integers(0, 4, codes.size)
    got = group_correlations(x, y, codes, "kendall")
    expected = [reference("kendall", x[codes == k], y[codes == k]) for k in range(3)]
    assert_close(got, np.array(expected))


def test_group_correlations_rejects_bad_input():
    with pytest.raises(ValueError, match="metric"):
        group_correlations([1, 2], [1, 2], [0, 0], "tau")
    with pytest.raises(ValueError, match="n_groups"):
        group_correlations([1, 2], [1, 2], [0, 3], "kendall", n_groups=2)


def _likert_sample(n: int, seed: int, noise: float, group_size: int, systems: int):
    """Human scores 1..5, a noisy judge, groups of ``group_size`` cases and ``systems`` systems in turn."""
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, n).astype(float)
    x = y + rng.normal(0, noise, n)
    return x, y, [f"g{i // group_size}" for i in range(n)], [f"s{i % systems}" for i in range(n)]


@pytest.mark.parametrize("level", ["dataset", "group", "system"])
def test_metrics_on_shared_draws_equal_separate_bootstraps(level):
    """The report draws once for all three metrics; each interval must be the one its own bootstrap gives."""
    from geval_spec.analysis.correlation import bootstrap, bootstrap_metrics

    x, y, groups, systems = _likert_sample(n=240, seed=3, noise=1.2, group_size=4, systems=6)
    kw = dict(units=groups, draws=300, seed=11, conf=0.9, groups=groups, systems=systems)
    shared = bootstrap_metrics(x, y, ("spearman", "pearson", "kendall"), level, **kw)
    for metric in ("spearman", "pearson", "kendall"):
        assert shared[metric] == bootstrap(x, y, metric, level, **kw), metric
        assert shared[metric].ci_low is not None


@pytest.mark.parametrize("level", ["dataset", "group", "system"])
def test_chunk_size_does_not_change_the_draws(level, monkeypatch):
    """Weights are drawn in chunks to bound memory; the chunk size must not change a single statistic."""
    from geval_spec.analysis import correlation

    n = 300
    x, y, groups, systems = _likert_sample(n=n, seed=5, noise=1.0, group_size=3, systems=5)
    kw = dict(units=groups, draws=250, seed=2, groups=groups, systems=systems)
    whole = correlation.resample_metrics([x], y, ("spearman", "kendall"), level, **kw)
    monkeypatch.setattr(correlation, "CHUNK_VALUES", 7 * n + 13)  # 7 draws a chunk, the last one short
    chunked = correlation.resample_metrics([x], y, ("spearman", "kendall"), level, **kw)
    for metric in ("spearman", "kendall"):
        assert np.array_equal(whole[metric], chunked[metric], equal_nan=True), metric


def test_drawn_weights_are_rows_in_c_order_and_the_same_counts():
    """The statistics read the weights in blocks of rows: a Fortran-ordered matrix (``counts[:, codes]``) made
    every block a transposed copy first, about a tenth of a 10,000-case report. The counts must not change."""
    from geval_spec.analysis.correlation import _codes, _unit_weights

    units = [f"g{i // 3}" for i in range(300)]
    codes, n_units = _codes(units)
    w = _unit_weights(np.random.default_rng(4), codes, n_units, 50)
    assert w.flags["C_CONTIGUOUS"] and w.shape == (50, 300)
    idx = np.random.default_rng(4).integers(0, n_units, size=(50, n_units))  # the same stream, counted plainly
    expected = np.array([np.bincount(row, minlength=n_units)[codes] for row in idx])
    assert np.array_equal(w, expected)
