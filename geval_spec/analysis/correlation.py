"""Correlation between judge and human scores, at three levels, with bootstrap intervals.

Levels:

- ``dataset``: one correlation over all cases;
- ``group`` (G-Eval's summary level): a correlation within each source group,
  then their mean; groups where either side is constant (or with fewer than
  two cases) are skipped and counted;
- ``system``: the mean judge and human score per system, correlated across
  systems.

Confidence intervals come from a percentile bootstrap that resamples the
spec's unit (whole groups by default, or cases) with
``np.random.default_rng(seed)`` and ``rng.integers(0, U, size=(draws, U))``
drawn in chunks. A resample is a weight per case (how often its unit was
drawn), so every statistic is computed from a chunk of weight rows at once,
exactly and without copying the data (:mod:`geval_spec.analysis.fastcorr`:
the same values as scipy's pearsonr, spearmanr and kendalltau on the
materialised resample). Per-group and per-system correlations go through the
row-wise functions of :mod:`geval_spec.analysis.fastcorr_rows`. Group level
always resamples groups (resampling cases would change the correlations
inside a group).
Resamples where the statistic is undefined (a constant side) are dropped and
counted.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from geval_spec.analysis.fastcorr import WeightedPairs
from geval_spec.analysis.fastcorr_rows import group_correlations, rowwise_kendall, rowwise_pearson, rowwise_spearman
from geval_spec.values import frozen

Array = npt.NDArray[Any]
ROWWISE = {"pearson": rowwise_pearson, "spearman": rowwise_spearman, "kendall": rowwise_kendall}

METRICS = ("spearman", "pearson", "kendall")
LEVELS = ("dataset", "group", "system")
CHUNK_VALUES = 1_000_000  # weights per chunk: arrays of a few MB that malloc reuses (BENCHMARKS.md)


@frozen
class Estimate:
    """One metric's value with its bootstrap interval, and how many units it rests on."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int  # cases (dataset), groups used (group) or systems (system)
    skipped: int = 0  # groups skipped as constant
    draws_used: int = 0


def correlation(x: npt.ArrayLike, y: npt.ArrayLike, metric: str) -> float:
    """One correlation; NaN with fewer than three pairs or a constant side.

    Spearman and Pearson use the same routines as every bootstrap resample
    (average ranks, moments; equal to scipy's spearmanr and pearsonr, which a
    test checks), so points and intervals come from one implementation and
    the gate at the end of ``run`` does not wait for scipy to import.
    Kendall's tau-b is fastcorr's exact integer computation (equal to scipy's
    ``kendalltau``).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    ones = np.ones(x.size)
    if metric == "spearman":
        return _weighted_pearson(_weighted_ranks(x, ones), _weighted_ranks(y, ones), ones)
    if metric == "pearson":
        return _weighted_pearson(x, y, ones)
    if metric == "kendall":
        return float(WeightedPairs(x, y).kendall(np.ones((1, x.size), dtype=np.int64))[0])
    raise ValueError(metric)


def _codes(labels: Sequence[Any]) -> tuple[Array, int]:
    _, inverse = np.unique(np.asarray([str(v) for v in labels]), return_inverse=True)
    return inverse.astype(np.int64), int(inverse.max()) + 1 if len(inverse) else 0


def group_values(x: npt.ArrayLike, y: npt.ArrayLike, groups: Sequence[Any], metric: str) -> tuple[Array, Array, int]:
    """Per-group correlations (NaN where skipped), each group's code, and the skipped count.

    Groups of one size are computed together (:func:`~geval_spec.analysis.fastcorr_rows.group_correlations`).
    """
    codes, g = _codes(groups)
    values = group_correlations(np.asarray(x, dtype=float), np.asarray(y, dtype=float), codes, metric, g)
    skipped = int(np.isnan(values).sum())
    return values, codes, skipped


def system_means(x: npt.ArrayLike, y: npt.ArrayLike, systems: Sequence[Any]) -> tuple[Array, Array]:
    codes, s = _codes(systems)
    counts = np.bincount(codes, minlength=s)
    return (np.bincount(codes, weights=np.asarray(x, float), minlength=s) / counts,
            np.bincount(codes, weights=np.asarray(y, float), minlength=s) / counts)


def point(x: npt.ArrayLike, y: npt.ArrayLike, metric: str, level: str, groups: Sequence[Any] | None = None,
          systems: Sequence[Any] | None = None) -> tuple[float, int, int]:
    """(value, n, skipped) at one level."""
    if level == "dataset":
        return correlation(x, y, metric), int(np.asarray(x).size), 0
    if level == "group":
        values, _, skipped = group_values(x, y, _needed(groups, level), metric)
        used = values[~np.isnan(values)]
        return (float(used.mean()) if used.size else math.nan), int(used.size), skipped
    if level == "system":
        mx, my = system_means(x, y, _needed(systems, level))
        return correlation(mx, my, metric), int(mx.size), 0
    raise ValueError(level)


def _needed(labels: Sequence[Any] | None, level: str) -> Sequence[Any]:
    if labels is None:
        raise ValueError(f"{level} level needs a label per case")
    return labels


# -- bootstrap -------------------------------------------------------------------------------
def _weighted_ranks(values: Array, weights: Array) -> Array:
    """Average ranks of every case in the multiset where case i appears weights[i] times."""
    uniq, inv = np.unique(values, return_inverse=True)
    counts = np.bincount(inv, weights=weights, minlength=uniq.size)
    before = np.cumsum(counts) - counts
    return (before + (counts + 1.0) / 2.0)[inv]


def _weighted_pearson(a: Array, b: Array, w: Array) -> float:
    total = w.sum()
    if total <= 0:
        return math.nan
    ma = (w * a).sum() / total
    mb = (w * b).sum() / total
    da, db = a - ma, b - mb
    va, vb = (w * da * da).sum(), (w * db * db).sum()
    if va <= 0 or vb <= 0:
        return math.nan
    return float((w * da * db).sum() / math.sqrt(va * vb))


def _unit_weights(rng: np.random.Generator, unit_codes: Array, n_units: int, rows: int) -> Array:
    """rows x n_cases weights (int64 counts): how often each case's unit was drawn."""
    idx = rng.integers(0, n_units, size=(rows, n_units))
    idx += (np.arange(rows) * n_units)[:, None]
    counts = np.bincount(idx.ravel(), minlength=rows * n_units).reshape(rows, n_units)
    # np.take writes rows in C order; counts[:, unit_codes] would be Fortran-ordered, and every block of rows
    # the statistics read would be copied (transposed) first
    return np.take(counts, unit_codes, axis=1)


def resample(xs: Sequence[npt.ArrayLike], y: npt.ArrayLike, metric: str, level: str, *, units: Sequence[Any],
             draws: int, seed: int, groups: Sequence[Any] | None = None,
             systems: Sequence[Any] | None = None) -> Array:
    """Bootstrap statistics of several score vectors on the *same* draws: an array [draw, vector].

    Every vector is judged against the same human scores ``y`` and every draw
    resamples the same units for all of them, so differences are paired.
    """
    return resample_metrics(xs, y, (metric,), level, units=units, draws=draws, seed=seed, groups=groups,
                            systems=systems)[metric]


def resample_metrics(xs: Sequence[npt.ArrayLike], y: npt.ArrayLike, metrics: Sequence[str], level: str, *,
                     units: Sequence[Any], draws: int, seed: int, groups: Sequence[Any] | None = None,
                     systems: Sequence[Any] | None = None) -> dict[str, Array]:
    """:func:`resample` for several metrics from one set of draws: metric -> array [draw, vector].

    The draws depend on the seed and the units only, so each metric's array is
    the one a separate :func:`resample` call would give; drawing once saves
    generating the weights again for every metric.
    """
    vectors = [np.asarray(x, dtype=float) for x in xs]
    y = np.asarray(y, dtype=float)
    k = len(vectors)
    rng = np.random.default_rng(seed)
    out = {m: np.full((draws, k), np.nan) for m in metrics}
    if level == "group":
        per_metric = {m: [group_values(x, y, _needed(groups, level), m)[0] for x in vectors] for m in metrics}
        g = next(iter(per_metric.values()))[0].size
        rows = max(1, CHUNK_VALUES // max(g, 1))
        for start in range(0, draws, rows):
            count = min(rows, draws - start)
            idx = rng.integers(0, g, size=(count, g))
            for m, per in per_metric.items():
                valid = np.all([~np.isnan(v) for v in per], axis=0)  # a group counts where every vector has one
                used = valid[idx].sum(axis=1)
                for j, v in enumerate(per):
                    filled = np.where(valid, v, 0.0)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        out[m][start:start + count, j] = filled[idx].sum(axis=1) / used
        return out
    unit_codes, n_units = _codes(units)
    n = y.size
    rows = max(1, CHUNK_VALUES // max(n, 1))
    if level == "system":
        sys_codes, s = _codes(_needed(systems, level))
        onehot = np.zeros((n, s))
        onehot[np.arange(n), sys_codes] = 1.0
    pairs = [WeightedPairs(x, y) for x in vectors] if level == "dataset" else []
    for start in range(0, draws, rows):
        count = min(rows, draws - start)
        w = _unit_weights(rng, unit_codes, n_units, count)
        if level == "dataset":
            for m in metrics:
                for j, pair in enumerate(pairs):
                    out[m][start:start + count, j] = getattr(pair, m)(w)
        else:  # system level: weighted means per system, correlated across systems
            cnt = w @ onehot
            with np.errstate(invalid="ignore", divide="ignore"):
                my = (w * y) @ onehot / cnt
            for j, x in enumerate(vectors):
                with np.errstate(invalid="ignore", divide="ignore"):
                    mx = (w * x) @ onehot / cnt
                keep = ~np.isnan(mx).any(axis=1)
                for m in metrics:
                    col = np.full(count, np.nan)
                    if keep.any():
                        col[keep] = ROWWISE[m](mx[keep], my[keep])
                    out[m][start:start + count, j] = col
    return out


def _interval(samples: Array, conf: float) -> tuple[float | None, float | None, int]:
    from geval_spec.analysis.hygiene import quantile_bounds

    arr = samples[np.isfinite(samples)]
    if arr.size == 0:
        return None, None, 0
    lo, hi = np.quantile(arr, list(quantile_bounds(conf)))
    return float(lo), float(hi), int(arr.size)


def bootstrap(x: npt.ArrayLike, y: npt.ArrayLike, metric: str, level: str, *, units: Sequence[Any], draws: int,
              seed: int, conf: float = 0.95,
              groups: Sequence[Any] | None = None, systems: Sequence[Any] | None = None) -> Estimate:
    """Point estimate and percentile interval at one level."""
    return bootstrap_metrics(x, y, (metric,), level, units=units, draws=draws, seed=seed, conf=conf, groups=groups,
                             systems=systems)[metric]


def bootstrap_metrics(x: npt.ArrayLike, y: npt.ArrayLike, metrics: Sequence[str], level: str, *,
                      units: Sequence[Any], draws: int, seed: int, conf: float = 0.95,
                      groups: Sequence[Any] | None = None,
                      systems: Sequence[Any] | None = None) -> dict[str, Estimate]:
    """Point estimates and percentile intervals of several metrics at one level, from one set of draws.

    The draws depend on the seed and the units only, so each metric's interval is the one it would get
    alone; drawing once saves generating the weights again for every metric.
    """
    points = {m: point(x, y, m, level, groups, systems) for m in metrics}
    wanted = [m for m in metrics if math.isfinite(points[m][0])]
    samples = resample_metrics([x], y, wanted, level, units=units, draws=draws, seed=seed, groups=groups,
                               systems=systems) if wanted else {}
    out = {}
    for m in metrics:
        value, n, skipped = points[m]
        if m not in samples:
            out[m] = Estimate(None, None, None, n, skipped)
            continue
        lo, hi, used = _interval(samples[m][:, 0], conf)
        out[m] = Estimate(float(value), lo, hi, n, skipped, used)
    return out


@frozen
class Difference:
    """A metric on two sides (a, b) and b - a, with the interval of the difference."""

    a: float | None
    b: float | None
    diff: float | None  # b - a
    ci_low: float | None
    ci_high: float | None
    n: int  # cases (dataset), groups valid on both sides (group) or systems (system)
    draws_used: int = 0
    skipped_a: int = 0  # group level: groups where A's correlation is undefined
    skipped_b: int = 0


def paired_point(xa: npt.ArrayLike, xb: npt.ArrayLike, y: npt.ArrayLike, metric: str, level: str,
                 groups: Sequence[Any] | None = None,
                 systems: Sequence[Any] | None = None) -> tuple[float, float, int, int, int]:
    """(A's value, B's value, n, A's skipped groups, B's skipped groups) on the units both sides can use.

    At group level a group counts only where both sides' correlations are
    defined, the same groups the paired resamples use; elsewhere both sides
    use the same cases anyway.
    """
    if level == "group":
        va, _, skipped_a = group_values(xa, y, _needed(groups, level), metric)
        vb, _, skipped_b = group_values(xb, y, _needed(groups, level), metric)
        both = ~np.isnan(va) & ~np.isnan(vb)
        if not both.any():
            return math.nan, math.nan, 0, skipped_a, skipped_b
        return float(va[both].mean()), float(vb[both].mean()), int(both.sum()), skipped_a, skipped_b
    a, n, _ = point(xa, y, metric, level, groups, systems)
    b, _, _ = point(xb, y, metric, level, groups, systems)
    return a, b, n, 0, 0


def paired_difference(xa: npt.ArrayLike, xb: npt.ArrayLike, y: npt.ArrayLike, metric: str, level: str, *,
                      units: Sequence[Any], draws: int, seed: int, conf: float = 0.95,
                      groups: Sequence[Any] | None = None,
                      systems: Sequence[Any] | None = None) -> Difference:
    """metric(B) - metric(A) on the same cases (and groups), with an interval from paired resampling."""
    va, vb, n, skipped_a, skipped_b = paired_point(xa, xb, y, metric, level, groups, systems)
    a = float(va) if math.isfinite(va) else None
    b = float(vb) if math.isfinite(vb) else None
    if a is None or b is None:
        return Difference(a, b, None, None, None, n, skipped_a=skipped_a, skipped_b=skipped_b)
    samples = resample([xa, xb], y, metric, level, units=units, draws=draws, seed=seed, groups=groups,
                       systems=systems)
    lo, hi, used = _interval(samples[:, 1] - samples[:, 0], conf)
    return Difference(a, b, b - a, lo, hi, n, used, skipped_a, skipped_b)
