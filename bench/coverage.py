"""Coverage of 95% bootstrap intervals of a correlation, on simulated data with a known population value.

    .venv/bin/python bench/coverage.py [--datasets 1000] [--draws 2000] [--seed 20240] [--jobs N]
                                       [--remedies] [--gate METHOD]

Every dataset has n = 100 cases in 20 groups of 5 (and, for information,
n = 50 in 10 groups: a gate split of half the data). Each case's (x, y) is
bivariate normal with Pearson correlation r; in the clustered setting
``x_ij = sqrt(ICC) a_j + sqrt(1 - ICC) e_ij`` (likewise y) with
``corr(a_x, a_y) = corr(e_x, e_y) = r`` and ICC 0.4, so every case is still
bivariate normal with correlation r while cases of one group are correlated.
The population Spearman correlation is then ``(6 / pi) asin(r / 2)``,
Kendall's tau ``(2 / pi) asin(r)`` and Pearson's r itself; r is chosen so
that the population Spearman is 0.5, 0.7 and 0.85 (Kendall, Pearson and
n = 50 at 0.7 only). An interval covers when it contains the population
value, not the sample value of a larger dataset: the sample correlation's
own small bias (Spearman about -0.005 at n = 100) counts against coverage.

The bootstrap is the product's, ``correlation.bootstrap(x, y, metric, "dataset",
units=..., draws=2000, seed=...)``, resampling whole groups (unit ``group``)
or cases (unit ``case``). To run thousands of datasets in minutes, the
resamples are recomputed here vectorised over draws from the same unit
draws (``np.random.default_rng(seed)``) as case weights; before simulating,
the script asserts on one dataset of every setting that these statistics
and the percentile interval equal the product's.

``--remedies`` also measures, on the same draws:

- ``fisher-z percentile``: percentiles of atanh(samples), mapped back with
  tanh. Quantiles commute with a monotone increasing map, so this is the
  percentile interval except for np.quantile's linear interpolation between
  two adjacent order statistics (a line after the table gives the largest
  difference);
- ``expanded percentile`` (Hesterberg 2015): the percentile interval read at
  ``Phi(sqrt(U / (U - 1)) * t_(U-1)((1 - conf) / 2))`` and its complement
  for U resampled units (t_(U-1)(p): Student's t quantile), widening for the
  bootstrap's too-small variance with few units;
- ``BC`` and ``BCa`` (Efron): bias correction from the share of samples below
  the estimate; BCa's acceleration from a jackknife over the resampled units
  (groups or cases). The script asserts first that its BCa equals
  ``scipy.stats.bootstrap(method="BCa")`` given the same bootstrap
  distribution;
- ``studentised``: bootstrap-t on the Fisher-z scale, standard errors from a
  jackknife over the units of the data and of every draw. Group unit only:
  over 100 cases that inner jackknife costs 100 statistics per draw.

The table gives, per setting, unit and method, the coverage of the
population value, its Monte Carlo standard error sqrt(c (1 - c) / datasets),
the mean interval width and how often the population value lies below or
above the interval. The exit status is 1 when the group unit's coverage with
the gated method (``--gate``, default the product's percentile interval) is
below 0.92 for Spearman at n = 100 in either setting, at any of the three
correlations.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

# One BLAS thread per worker process (Kendall's matrix products): set before numpy loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.special import ndtr, ndtri, stdtrit  # noqa: E402

from geval_spec.analysis import correlation  # noqa: E402

ICC = {"independent": 0.0, "clustered": 0.4}
SPEARMAN_TARGETS = (0.5, 0.7, 0.85)
UNITS = ("case", "group")
GROUP_SIZE = 5
LEVEL = 0.95
GATE = 0.92
CHUNK_VALUES = 50_000  # weights per chunk: small arrays keep the work in cache and out of the kernel


@dataclass(frozen=True)
class Cell:
    """One simulated setting: every dataset of a cell has the same design and population value."""

    metric: str
    groups: int
    setting: str
    r: float  # Pearson correlation of every case's (x, y)

    @property
    def truth(self) -> float:
        return population_value(self.metric, self.r)


def population_value(metric: str, r: float) -> float:
    """The population correlation of a bivariate normal with Pearson correlation r."""
    if metric == "spearman":
        return 6.0 / math.pi * math.asin(r / 2.0)
    if metric == "kendall":
        return 2.0 / math.pi * math.asin(r)
    return r


def pearson_for_spearman(rho_s: float) -> float:
    """The Pearson r of a bivariate normal whose population Spearman correlation is rho_s."""
    return 2.0 * math.sin(math.pi * rho_s / 6.0)


def simulate(rng: np.random.Generator, cell: Cell) -> tuple[np.ndarray, np.ndarray]:
    """x and y for ``cell.groups`` groups of GROUP_SIZE cases (group j's cases are j*5 .. j*5+4)."""
    icc = ICC[cell.setting]
    n = cell.groups * GROUP_SIZE

    def pairs(size: int) -> tuple[np.ndarray, np.ndarray]:
        u, v = rng.standard_normal((2, size))
        return u, cell.r * u + math.sqrt(1.0 - cell.r ** 2) * v

    ax, ay = pairs(cell.groups)
    ex, ey = pairs(n)
    member = np.arange(n) // GROUP_SIZE
    x = math.sqrt(icc) * ax[member] + math.sqrt(1.0 - icc) * ex
    y = math.sqrt(icc) * ay[member] + math.sqrt(1.0 - icc) * ey
    return x, y


# -- the product's statistics, vectorised over draws ---------------------------------------------------
def _weighted_pearson(w: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    total = w.sum(axis=-1, keepdims=True)
    da = a - (w * a).sum(axis=-1, keepdims=True) / total
    db = b - (w * b).sum(axis=-1, keepdims=True) / total
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w * da * db).sum(axis=-1) / np.sqrt((w * da * da).sum(axis=-1) * (w * db * db).sum(axis=-1))


def _weighted_ranks(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks in the multiset where case i appears w[..., i] times (values without ties)."""
    order = np.argsort(values)
    ws = w[..., order]
    ranks = np.empty_like(w)
    ranks[..., order] = np.cumsum(ws, axis=-1) - ws + (ws + 1.0) / 2.0
    return ranks


def weighted_statistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, metric: str) -> np.ndarray:
    """The correlation of the resample where case i appears w[..., i] times, for every row of w.

    The same quantities as ``correlation.resample`` (weighted average ranks and
    moments; Kendall's tau-b of the materialised resample, whose only ties are
    copies of one case, tied on both sides).
    """
    if metric == "spearman":
        return _weighted_pearson(w, _weighted_ranks(x, w), _weighted_ranks(y, w))
    if metric == "pearson":
        return _weighted_pearson(w, x, y)
    concordance = np.sign(x[:, None] - x[None, :]) * np.sign(y[:, None] - y[None, :])
    total = w.sum(axis=-1)
    untied = total * (total - 1.0) / 2.0 - (w * (w - 1.0) / 2.0).sum(axis=-1)
    return 0.5 * ((w @ concordance) * w).sum(axis=-1) / untied


def unit_draws(seed: int, n_units: int, draws: int) -> np.ndarray:
    """draws x n_units: the units drawn by the product's bootstrap with this seed."""
    return np.random.default_rng(seed).integers(0, n_units, size=(draws, n_units))


def counts_of(idx: np.ndarray, n_units: int) -> np.ndarray:
    """How often every unit appears in each row of idx (the last axis)."""
    flat = idx.reshape(-1, idx.shape[-1])
    offsets = (np.arange(flat.shape[0]) * n_units)[:, None]
    counts = np.bincount((flat + offsets).ravel(), minlength=flat.shape[0] * n_units)
    return counts.reshape(*idx.shape[:-1], n_units).astype(float)


def unit_labels(unit: str, n: int) -> tuple[np.ndarray, list[str]]:
    """Each case's unit code and the labels handed to the product (they sort as the codes do)."""
    codes = np.arange(n) if unit == "case" else np.arange(n) // GROUP_SIZE
    return codes, [f"u{c:04d}" for c in codes]


def bootstrap_samples(x: np.ndarray, y: np.ndarray, metric: str, codes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The statistic of every draw (a row of unit indices idx), computed in cache-sized chunks."""
    n_units = int(codes.max()) + 1
    rows = max(1, CHUNK_VALUES // x.size)
    return np.concatenate([weighted_statistic(x, y, counts_of(idx[s:s + rows], n_units)[:, codes], metric)
                           for s in range(0, idx.shape[0], rows)])


def draw_jackknife(x: np.ndarray, y: np.ndarray, metric: str, codes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """draws x units: the statistic of every draw without each of its drawn units in turn."""
    n_units = int(codes.max()) + 1
    rows = max(1, CHUNK_VALUES // (x.size * n_units))
    out = []
    for s in range(0, idx.shape[0], rows):
        part = idx[s:s + rows]
        counts = counts_of(part, n_units)[:, None, :] - np.eye(n_units)[part]
        out.append(weighted_statistic(x, y, counts[..., codes], metric))
    return np.concatenate(out)


# -- intervals from one dataset's bootstrap -------------------------------------------------------------
def _quantiles(samples: np.ndarray, low: float, high: float) -> tuple[float, float]:
    lo, hi = np.quantile(samples, [low, high])
    return float(lo), float(hi)


def percentile(samples: np.ndarray) -> tuple[float, float]:
    """The product's interval: the (1 - LEVEL) / 2 and (1 + LEVEL) / 2 quantiles."""
    return _quantiles(samples, (1 - LEVEL) / 2, (1 + LEVEL) / 2)


def fisher_percentile(samples: np.ndarray) -> tuple[float, float]:
    """Percentiles of atanh(samples), mapped back with tanh."""
    lo, hi = _quantiles(np.arctanh(samples), (1 - LEVEL) / 2, (1 + LEVEL) / 2)
    return math.tanh(lo), math.tanh(hi)


def expanded_percentile(samples: np.ndarray, n_units: int) -> tuple[float, float]:
    """Percentiles at Phi(sqrt(U / (U - 1)) t_(U-1)((1 - LEVEL) / 2)) and its complement, for U units."""
    tail = float(ndtr(math.sqrt(n_units / (n_units - 1)) * stdtrit(n_units - 1, (1 - LEVEL) / 2)))
    return _quantiles(samples, tail, 1 - tail)


def bca(samples: np.ndarray, estimate: float, jackknife: np.ndarray) -> tuple[float, float]:
    """BCa interval; a constant jackknife (acceleration 0) gives the bias-corrected (BC) interval.

    z0 = Phi^-1(share of samples below the estimate, ties counting half),
    a = sum(d^3) / (6 sum(d^2)^1.5) with d = mean(jackknife) - jackknife;
    the percentile interval read at Phi(z0 + (z0 + z) / (1 - a (z0 + z))).
    """
    z0 = float(ndtri(((samples < estimate).sum() + (samples <= estimate).sum()) / (2.0 * samples.size)))
    d = jackknife.mean() - jackknife
    ss = float((d * d).sum())
    a = float((d ** 3).sum()) / (6.0 * ss ** 1.5) if ss > 0 else 0.0
    z = float(ndtri((1 - LEVEL) / 2))
    low, high = (float(ndtr(z0 + (z0 + q) / (1.0 - a * (z0 + q)))) for q in (z, -z))
    return _quantiles(samples, low, high)


def studentised(samples: np.ndarray, estimate: float, jack: np.ndarray, draw_jack: np.ndarray) -> tuple[float, float]:
    """Bootstrap-t on the Fisher-z scale, standard errors from jackknives over units (draw_jack: draws x units)."""
    def se(values: np.ndarray) -> np.ndarray:
        z = np.arctanh(values)
        k = z.shape[-1]
        return np.sqrt((k - 1) / k * ((z - z.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1))

    z_hat = math.atanh(estimate)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (np.arctanh(samples) - z_hat) / se(draw_jack)
    t_lo, t_hi = _quantiles(t[np.isfinite(t)], (1 - LEVEL) / 2, (1 + LEVEL) / 2)
    s = float(se(jack))
    return math.tanh(z_hat - t_hi * s), math.tanh(z_hat - t_lo * s)


METHODS = ("percentile", "fisher-z percentile", "expanded percentile", "BC", "BCa", "studentised")


def intervals(x: np.ndarray, y: np.ndarray, metric: str, unit: str, draws: int, seed: int,
              remedies: bool) -> dict[str, tuple[float, float]]:
    """Every measured interval of one dataset and unit."""
    n = x.size
    codes, _ = unit_labels(unit, n)
    n_units = int(codes.max()) + 1
    idx = unit_draws(seed, n_units, draws)
    all_samples = bootstrap_samples(x, y, metric, codes, idx)
    samples = all_samples[np.isfinite(all_samples)]
    out = {"percentile": percentile(samples)}
    if not remedies:
        return out
    estimate = float(weighted_statistic(x, y, np.ones(n), metric))
    members = (codes[None, :] == np.arange(n_units)[:, None]).astype(float)  # unit x case
    jack = weighted_statistic(x, y, 1.0 - members, metric)
    out["fisher-z percentile"] = fisher_percentile(samples)
    out["expanded percentile"] = expanded_percentile(samples, n_units)
    out["BC"] = bca(samples, estimate, np.zeros(n_units))
    out["BCa"] = bca(samples, estimate, jack)
    if unit == "group":
        out["studentised"] = studentised(all_samples, estimate, jack, draw_jackknife(x, y, metric, codes, idx))
    return out


# -- checks, simulation, table -------------------------------------------------------------------------
def check_against_product(cell: Cell, draws: int, seed: int) -> float:
    """Assert that the vectorised resamples and percentile interval equal the product's; the largest difference."""
    x, y = simulate(np.random.default_rng([seed, 99]), cell)
    worst = 0.0
    check_draws = draws if cell.metric != "kendall" else 200  # the product's Kendall resamples cost ~1 ms each
    for unit in UNITS:
        codes, labels = unit_labels(unit, x.size)
        n_units = int(codes.max()) + 1
        ours = bootstrap_samples(x, y, cell.metric, codes, unit_draws(seed, n_units, check_draws))
        theirs = correlation.resample([x], y, cell.metric, "dataset", units=labels, draws=check_draws, seed=seed)[:, 0]
        est = correlation.bootstrap(x, y, cell.metric, "dataset", units=labels, draws=check_draws, seed=seed)
        diffs = [np.max(np.abs(ours - theirs)), *np.abs(np.subtract(percentile(ours), (est.ci_low, est.ci_high)))]
        worst = max(worst, float(np.max(diffs)))
    assert worst < 1e-9, f"vectorised bootstrap differs from the product's by {worst} in {cell}"
    return worst


def check_bca_against_scipy(seed: int) -> float:
    """Assert that ``bca`` equals scipy's BCa for the mean of skewed data; the largest difference."""
    from scipy.stats import bootstrap

    data = np.random.default_rng([seed, 98]).exponential(size=30)
    res = bootstrap((data,), np.mean, method="BCa", n_resamples=2000, confidence_level=LEVEL,
                    rng=np.random.default_rng([seed, 97]))
    ours = bca(res.bootstrap_distribution, float(data.mean()), (data.sum() - data) / (data.size - 1))
    worst = float(np.max(np.abs(np.subtract(ours, (res.confidence_interval.low, res.confidence_interval.high)))))
    assert worst < 1e-9, f"BCa differs from scipy's by {worst}"
    return worst


def run_block(cell: Cell, cell_id: int, start: int, stop: int, draws: int, seed: int,
              remedies: bool) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Intervals by (unit, method) for datasets start..stop-1 of a cell."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for rep in range(start, stop):
        x, y = simulate(np.random.default_rng([seed, cell_id, rep]), cell)
        boot_seed = int(np.random.SeedSequence([seed, cell_id, rep, 1]).generate_state(1)[0])
        for unit in UNITS:
            for method, bounds in intervals(x, y, cell.metric, unit, draws, boot_seed, remedies).items():
                out.setdefault((unit, method), []).append(bounds)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=1000, help="simulated datasets per setting (>= 200)")
    parser.add_argument("--draws", type=int, default=2000, help="bootstrap draws per interval (the product's 2000)")
    parser.add_argument("--seed", type=int, default=20240)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--remedies", action="store_true",
                        help="also measure Fisher-z percentile, expanded percentile, BC, BCa and studentised")
    parser.add_argument("--gate", default="percentile", choices=METHODS,
                        help="the method whose group-unit coverage decides the exit status")
    args = parser.parse_args()
    if args.datasets < 200:
        parser.error("--datasets must be at least 200")
    if args.gate != "percentile" and not args.remedies:
        parser.error("--gate other than percentile needs --remedies")
    started = time.perf_counter()

    cells = [Cell("spearman", 20, s, pearson_for_spearman(t)) for t in SPEARMAN_TARGETS for s in ICC]
    cells += [Cell(m, 20, s, pearson_for_spearman(0.7)) for m in ("kendall", "pearson") for s in ICC]
    cells += [Cell("spearman", 10, s, pearson_for_spearman(0.7)) for s in ICC]
    worst = max(check_against_product(cell, args.draws, args.seed) for cell in cells)
    checks = f"vectorised resamples equal the product's (largest difference {worst:.1e})"
    if args.remedies:
        checks += f"; BCa equals scipy's (largest difference {check_bca_against_scipy(args.seed):.1e})"

    block = 50
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [[pool.submit(run_block, cell, i, s, min(s + block, args.datasets), args.draws, args.seed,
                                args.remedies) for s in range(0, args.datasets, block)] for i, cell in enumerate(cells)]
        results: list[dict[tuple[str, str], np.ndarray]] = []
        for parts in futures:
            merged: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for part in parts:
                for key, bounds in part.result().items():
                    merged.setdefault(key, []).extend(bounds)
            results.append({key: np.array(bounds) for key, bounds in merged.items()})

    print(f"{args.datasets} datasets per setting, {args.draws} bootstrap draws, {LEVEL:.0%} intervals, seed "
          f"{args.seed}; {checks}")
    print("| metric | n (groups) | setting | population value (r) | unit | method | coverage | MC s.e. "
          "| mean width | below | above |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    failed = []
    fisher_gap = 0.0
    for cell, by_key in zip(cells, results):
        for (unit, method), b in by_key.items():
            cover = float(np.mean((b[:, 0] <= cell.truth) & (cell.truth <= b[:, 1])))
            se = math.sqrt(cover * (1 - cover) / args.datasets)
            print(f"| {cell.metric} | {cell.groups * GROUP_SIZE} ({cell.groups}) | {cell.setting} "
                  f"| {cell.truth:.3f} ({cell.r:.3f}) | {unit} | {method} | {cover:.3f} | {se:.3f} "
                  f"| {np.mean(b[:, 1] - b[:, 0]):.3f} | {np.mean(cell.truth < b[:, 0]):.3f} "
                  f"| {np.mean(cell.truth > b[:, 1]):.3f} |")
            if method == "fisher-z percentile":
                fisher_gap = max(fisher_gap, float(np.max(np.abs(b - by_key[(unit, "percentile")]))))
            if (cell.metric == "spearman" and cell.groups == 20 and unit == "group" and method == args.gate
                    and cover < GATE):
                failed.append(f"{cell.setting} at rho_s {cell.truth:.2f}: {cover:.3f}")
    if args.remedies:
        print(f"largest difference between a Fisher-z percentile and a percentile endpoint: {fisher_gap:.1e}")
    print(f"gate: group-unit {args.gate} coverage of Spearman (n = 100) >= {GATE} in both settings: "
          + ("met" if not failed else "NOT met (" + "; ".join(failed) + ")"))
    print(f"runtime {time.perf_counter() - started:.0f} s with {args.jobs} worker processes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
