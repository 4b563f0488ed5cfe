"""geval_spec.analysis.fastcorr against per-draw loops: 2,000 bootstrap draws over 10,000 and 100,000 cases.

    .venv/bin/python bench/fastcorr_speed.py [--sizes 10000 100000] [--draws 2000]

Data: a continuous judge score x = y + noise, against human scores y that
are either Likert averages (13 distinct values: means of three 1-5 ratings)
or continuous. Each draw resamples cases with replacement and is a row of
case weights; the draws are generated and processed in chunks of
``CHUNK_VALUES`` weights (``CHUNK_VALUES // n`` rows), which is the caller's
job and bounds memory: the int64 chunk is 32 MB and generating it needs one
more index matrix of that size. The fastcorr methods walk each chunk in
blocks of one megabyte with reused scratch buffers; the "scratch" column is
tracemalloc's peak during one chunk call, excluding the chunk itself.

The naive columns are the per-draw loops of ``geval_spec.stats.resample``
(scipy's ``kendalltau`` on the materialised resample; np.unique-based
weighted ranks; weighted moments), timed on a few draws and extrapolated to
all of them. Also timed: system level (per-draw means of 100 systems,
``rowwise_*`` against scipy per draw / scipy's ``rankdata``) and group level
(every group's correlation, groups of 5, against the loop over groups).
Times are wall clock and CPU (process) time; on a loaded machine CPU time
is the steadier figure.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings
from collections.abc import Callable

import numpy as np
from scipy.stats import kendalltau

from geval_spec.analysis.fastcorr import WeightedPairs
from geval_spec.analysis.fastcorr_rows import group_correlations, rowwise_kendall, rowwise_spearman
from geval_spec.stats import _rowwise_pearson, _rowwise_ranks, _weighted_pearson, _weighted_ranks, group_values

CHUNK_VALUES = 4_000_000
METRICS = ("pearson", "spearman", "kendall")
SYSTEMS = 100
GROUP_SIZE = 5


def case_weights(rng: np.random.Generator, n: int, rows: int) -> np.ndarray:
    """rows x n int64 weights: how often each case was drawn in each resample."""
    idx = rng.integers(0, n, size=(rows, n))
    idx += (np.arange(rows) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n)


class Clock:
    """Accumulated wall and CPU seconds."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def run(self, fn: Callable[[], object]) -> object:
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu
        return out

    def scaled(self, factor: float) -> str:
        return f"{self.wall * factor:8.2f} s {self.cpu * factor:7.2f} s"


def scratch_mb(fn: Callable[[], object]) -> float:
    """Peak megabytes allocated (tracemalloc) while ``fn`` runs, above what was live before."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - before) / 2**20


def naive(metric: str, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> list[float]:
    """The per-draw loop of ``geval_spec.stats.resample`` at dataset level."""
    out = []
    for row in w.astype(float):
        if metric == "kendall":
            rep = np.repeat(np.arange(x.size), row.astype(np.int64))
            out.append(kendalltau(x[rep], y[rep]).statistic)
        elif metric == "spearman":
            out.append(_weighted_pearson(_weighted_ranks(x, row), _weighted_ranks(y, row), row))
        else:
            out.append(_weighted_pearson(x, y, row))
    return out


def dataset_level(n: int, draws: int) -> None:
    rng = np.random.default_rng(n)
    rows = max(1, CHUNK_VALUES // n)
    likert = rng.integers(3, 16, n) / 3.0
    continuous = rng.random(n)
    print(f"\nn = {n:,} cases, {draws:,} draws in chunks of {rows} rows "
          f"({rows * n * 8 / 2**20:.0f} MB int64 chunk)")
    print(f"{'y':<11} {'metric':<9} {'fastcorr wall':>13} {'cpu':>9} {'naive wall':>12} {'cpu':>9} "
          f"{'speed-up':>8} {'scratch':>8}  naive measured on")
    for name, y in (("likert-13", likert), ("continuous", continuous)):
        x = y + rng.normal(0, 0.3, n)
        prep = Clock()
        pairs = prep.run(lambda: WeightedPairs(x, y))
        prep.run(lambda: (pairs._tx, pairs._ty, pairs._rank_lookups, pairs._kendall_plan))
        fast = {m: Clock() for m in METRICS}
        weights = Clock()
        sub_rng = np.random.default_rng(0)
        for start in range(0, draws, rows):
            w = weights.run(lambda: case_weights(sub_rng, n, min(rows, draws - start)))
            for m in METRICS:
                fast[m].run(lambda: getattr(pairs, m)(w))
        w = case_weights(np.random.default_rng(1), n, rows)
        k = 20 if n <= 10_000 else 4
        for m in METRICS:
            slow = Clock()
            slow.run(lambda: naive(m, x, y, w[:k]))
            mem = scratch_mb(lambda: getattr(pairs, m)(w))
            print(f"{name:<11} {m:<9} {fast[m].scaled(1)} {slow.scaled(draws / k)} "
                  f"{slow.cpu * draws / k / fast[m].cpu:7.0f}x {mem:6.1f} MB  {k} draws")
        print(f"{name:<11} {'(weights)':<9} {weights.scaled(1)}   generating the draws; prepare "
              f"(sort orders, Kendall plan) {prep.wall:.2f} s")
    gen = scratch_mb(lambda: case_weights(np.random.default_rng(2), n, rows))
    print(f"generating one chunk of weights allocates {gen:.0f} MB at its peak (index matrix + counts)")


def system_level(draws: int) -> None:
    rng = np.random.default_rng(5)
    a = rng.random((draws, SYSTEMS))
    b = a + rng.normal(0, 0.2, (draws, SYSTEMS))
    b[:, :10] = np.round(b[:, :10], 1)
    print(f"\nsystem level: {draws:,} draws of {SYSTEMS} per-system means")
    fast, slow = Clock(), Clock()
    fast.run(lambda: rowwise_kendall(a, b))
    k = 200
    slow.run(lambda: [kendalltau(a[i], b[i]).statistic for i in range(k)])
    print(f"  kendall   rowwise_kendall {fast.scaled(1)}   scipy per draw {slow.scaled(draws / k)} "
          f"(measured on {k})")
    fast, slow = Clock(), Clock()
    fast.run(lambda: rowwise_spearman(a, b))
    slow.run(lambda: _rowwise_pearson(_rowwise_ranks(a), _rowwise_ranks(b)))
    print(f"  spearman  rowwise_spearman {fast.scaled(1)}  scipy rankdata + numpy {slow.scaled(1)}")


def group_level(n: int) -> None:
    rng = np.random.default_rng(6)
    groups = np.repeat(np.arange(n // GROUP_SIZE), GROUP_SIZE)
    y = rng.integers(3, 16, n) / 3.0
    x = y + rng.normal(0, 0.5, n)
    print(f"\ngroup level: {n // GROUP_SIZE:,} groups of {GROUP_SIZE} ({n:,} cases), every group's value")
    k = min(n, 10_000)
    for m in METRICS:
        fast, slow = Clock(), Clock()
        fast.run(lambda: group_correlations(x, y, groups, m))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            slow.run(lambda: group_values(x[:k], y[:k], groups[:k], m))
        print(f"  {m:<9} group_correlations {fast.scaled(1)}   loop over groups {slow.scaled(n / k)}"
              f"{'' if k == n else f' (measured on {k // GROUP_SIZE:,} groups)'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--draws", type=int, default=2000)
    args = ap.parse_args()
    for n in args.sizes:
        dataset_level(n, args.draws)
    system_level(args.draws)
    for n in args.sizes:
        group_level(n)


if __name__ == "__main__":
    main()
