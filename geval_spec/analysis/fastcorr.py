"""Exact, vectorised correlations for bootstrap resamples given as case weights.

A bootstrap draw is a row of a weight matrix ``W`` (draws x n): ``W[r, i]`` is
how often case ``i`` appears in resample ``r`` (a non-negative integer). Each
statistic here equals scipy's on the *materialised* resample
``np.repeat(np.arange(n), W[r])`` (``pearsonr``, ``spearmanr``,
``kendalltau`` tau-b) without materialising it and without a Python loop over
draws. Everything is numpy; nothing else is imported.

Exactness. Spearman and Kendall are computed in int64 arithmetic: ranks are
kept doubled (so average ranks of ties stay integers), every sum is an exact
integer, and only the final ratio is rounded, so the results are within a few
units in the last place of the true values (scipy's own rounding is of the
same order). Pearson is a float64 two-pass computation (weighted means, then
centred sums), which agrees with scipy to about 1e-15. A statistic that is undefined (zero total
weight, a constant side: fewer than two distinct values with positive
weight) is NaN; constancy is decided exactly from the weights, never from a
rounded variance.

Chunks and memory. The per-pair precomputation (sort orders, tie codes, the
Kendall merge plan) depends on ``x`` and ``y`` only: build a
:class:`WeightedPairs` once and call its methods on every chunk of draws (the
module-level ``weighted_*_rows`` functions are one-shot conveniences that
rebuild it). The caller's chunk of ``W`` is the only memory that grows with
the number of draws; the methods walk it in blocks of about
``BLOCK_ELEMENTS`` weights (at least one row) with a fixed set of reused
buffers, each of one block's size (1 MB as int64, or one row when n is
larger): Pearson 3 float64 + 2 bool, Spearman 7 int64, Kendall 8 int64,
plus one converted copy (and a bool mask) when ``W``'s dtype is not the one
the method computes in (float64 for Pearson, int64 for the others; pass
int64 counts to skip it). That is 4 to 10 MB whatever the chunk size.
Buffers are reused rather than reallocated because large temporaries are
returned to the operating system when freed and page-faulted back on every
allocation, which cost more than the arithmetic itself.

Limits: ``x`` and ``y`` must be finite; weights must be non-negative integers
(any non-negative finite weights for Pearson) with at most 2,000,000 in a row
(so that the int64 sums of cubed ranks stay exact).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geval_spec.analysis.fastcorr_core import (
    BLOCK_ELEMENTS,
    TINY_SUM,
    BoolArray,
    FloatArray,
    IndexArray,
    IntArray,
    _block_totals,
    _counts,
    _exclusive_cumsum,
    _MergePlan,
    _ratio,
    _rescaled_sums,
    _Scratch,
    _take,
    _tau_b,
    _tie_pairs,
    _Ties,
    _vector,
)

__all__ = ["WeightedPairs", "weighted_kendall_rows", "weighted_pearson_rows", "weighted_spearman_rows"]


class WeightedPairs:
    """Precomputed structure of one (x, y) pair; methods evaluate a chunk of weight rows.

    Build once per pair and call :meth:`pearson`, :meth:`spearman` or
    :meth:`kendall` on every chunk of draws; each returns one value per row
    (NaN where undefined). Sort orders and tie codes (O(n log n)) and the
    Kendall plan (O(n log n) per level, 3 to 3.5 n int32 per level) are
    built on first use and kept.
    """

    def __init__(self, x: ArrayLike, y: ArrayLike) -> None:
        self.x = _vector(x, "x")
        self.y = _vector(y, "y")
        if self.x.size != self.y.size:
            raise ValueError("x and y must have the same length")
        self.n = self.x.size

    @cached_property
    def _tx(self) -> _Ties:
        return _Ties.of(self.x)

    @cached_property
    def _ty(self) -> _Ties:
        return _Ties.of(self.y)

    def _by_blocks(self, weights: ArrayLike,
                   block: Callable[[NDArray, _Scratch], FloatArray]) -> FloatArray:
        """Apply ``block`` to consecutive row blocks of ``weights`` with one shared scratch."""
        w = np.asarray(weights)
        if w.ndim != 2 or w.shape[1] != self.n:
            raise ValueError(f"weights must have shape (draws, {self.n}), got {w.shape}")
        out = np.empty(w.shape[0])
        step = max(1, BLOCK_ELEMENTS // max(self.n, 1))
        scratch = _Scratch(min(step, w.shape[0]), self.n + 1)
        for lo in range(0, w.shape[0], step):
            out[lo:lo + step] = block(np.ascontiguousarray(w[lo:lo + step]), scratch)
        return out

    # Pearson ------------------------------------------------------------------------------
    @cached_property
    def _scaled(self) -> tuple[FloatArray, FloatArray]:
        """x and y times a power of two that brings their largest magnitude into [0.5, 1).

        Exact (so the correlation is unchanged) and keeps squares from
        overflowing. Deliberately no global centring: rounding every value
        once would perturb the data at the scale of its magnitude, not its
        spread; each row is centred on its own weighted mean instead.
        """
        def scale(v: FloatArray) -> FloatArray:
            top = np.abs(v).max() if v.size else 0.0
            return np.ldexp(v, -np.frexp(top)[1]) if top > 0 else v

        return scale(self.x), scale(self.y)

    def pearson(self, weights: ArrayLike) -> FloatArray:
        """Weighted Pearson correlation per row (weights: any non-negative finite numbers).

        Two passes per row, vectorised over the rows of a block: weighted
        means, then the weighted centred sums sum w dx dx, sum w dx dy and
        sum w dy dy (row dot products; einsum, not BLAS, whose threads spin
        on one-row blocks). A side is constant when all cases with positive
        weight share one value, checked exactly with boolean masks (not from
        a rounded variance). About a dozen passes over the weights.
        """
        return self._by_blocks(weights, self._pearson_block)

    def _pearson_block(self, weights: NDArray, scratch: _Scratch) -> FloatArray:
        rows, n = weights.shape
        if weights.dtype == np.float64:
            w = weights
        else:
            w = scratch("float", rows, n, np.float64)
            np.copyto(w, weights)
        total = w.sum(axis=1)
        if not np.isfinite(total).all():
            raise ValueError("weights must be finite")
        if w.size and w.min() < 0:
            raise ValueError("weights must be non-negative")
        xs, ys = self._scaled
        with np.errstate(invalid="ignore", divide="ignore"):
            mx = np.einsum("ij,j->i", w, xs) / total
            my = np.einsum("ij,j->i", w, ys) / total
        dx = np.subtract(xs, mx[:, None], out=scratch("dx", rows, n, np.float64))
        dy = np.subtract(ys, my[:, None], out=scratch("dy", rows, n, np.float64))
        t = np.multiply(w, dx, out=scratch("wd", rows, n, np.float64))
        sxx = np.einsum("ij,ij->i", t, dx)
        sxy = np.einsum("ij,ij->i", t, dy)
        np.multiply(w, dy, out=t)
        syy = np.einsum("ij,ij->i", t, dy)
        valid = self._varies(w, self.x, scratch) & self._varies(w, self.y, scratch)
        tiny = valid & ((sxx < TINY_SUM) | (syy < TINY_SUM))
        if tiny.any():
            sxx[tiny], sxy[tiny], syy[tiny] = _rescaled_sums(w[tiny], dx[tiny], dy[tiny])
        return np.where(valid, _ratio(sxy, sxx, syy), np.nan)

    @staticmethod
    def _varies(w: FloatArray, values: FloatArray, scratch: _Scratch) -> BoolArray:
        """Rows where the cases with positive weight do not all share one value."""
        rows, n = w.shape
        if n == 0:
            return np.zeros(rows, dtype=bool)
        positive = np.greater(w, 0, out=scratch("positive", rows, n, np.bool_))
        first = positive.argmax(axis=1)
        differs = np.not_equal(values, values[first][:, None], out=scratch("differs", rows, n, np.bool_))
        differs &= positive
        varied: NDArray[np.bool_] = differs.any(axis=1)
        return varied

    # Spearman -----------------------------------------------------------------------------
    @cached_property
    def _rank_lookups(self) -> tuple[IndexArray, IndexArray]:
        """For the cases in x order: their x value index and their y value index."""
        order = self._tx.order
        return self._tx.codes[order], self._ty.codes[order]

    @staticmethod
    def _centred_ranks(ties: _Ties, sorted_weights: IntArray, total: IntArray, scratch: _Scratch,
                       name: str) -> tuple[IntArray, IntArray]:
        """(weight at each value, doubled centred average rank of each value) per row.

        The average rank of value v in the resample is before_v + (W_v + 1) / 2;
        doubled and centred on the mean rank (N + 1) / 2 it is the integer
        2 before_v + W_v - N (written to the scratch buffer ``name``).
        """
        before, at = ties.totals(sorted_weights, scratch)
        centred = np.multiply(before, 2, out=scratch(name, *before.shape))
        centred += at
        centred -= total[:, None]
        return at, centred

    def spearman(self, weights: ArrayLike) -> FloatArray:
        """Spearman correlation of each row's resample: Pearson of weighted average ranks.

        With U, V the doubled centred average ranks of x and y (integers),
        rho = sum w U V / sqrt(sum w U^2 * sum w V^2), every sum exact in int64.
        Per row: one gather of the weights into y order and one into x order,
        one running sum each (the weight before and at every distinct value
        gives its average rank), one gather of y's ranks into x order and
        three row dot products; no per-row sort. About ten passes over the
        weights.
        """
        return self._by_blocks(weights, self._spearman_block)

    def _spearman_block(self, weights: NDArray, scratch: _Scratch) -> FloatArray:
        counts, total = _counts(weights, scratch)
        rows, n = counts.shape
        tx, ty = self._tx, self._ty
        x_codes, y_codes = self._rank_lookups
        in_y_order = _take(counts, ty.order, scratch("sorted", rows, n))
        at, v = self._centred_ranks(ty, in_y_order, total, scratch, "v")
        syy = np.einsum("ij,ij,ij->i", at, v, v)
        in_x_order = _take(counts, tx.order, scratch("x order", rows, n))
        at, u = self._centred_ranks(tx, in_x_order, total, scratch, "u")
        sxx = np.einsum("ij,ij,ij->i", at, u, u)
        v_cases = _take(v, y_codes, scratch("sorted", rows, n))  # y's rank of every case, in x order
        u_cases = _take(u, x_codes, scratch("before", rows, n)) if tx.tied else u
        sxy = np.einsum("ij,ij,ij->i", in_x_order, u_cases, v_cases)
        return _ratio(sxy, sxx, syy)

    # Kendall ------------------------------------------------------------------------------
    @cached_property
    def _kendall_plan(self) -> tuple[_Ties, _Ties, _MergePlan]:
        """(bit side, other side, merge plan); the side with fewer distinct values gets the bits."""
        tx, ty = self._tx, self._ty
        bits, other = (tx, ty) if tx.distinct < ty.distinct else (ty, tx)
        return bits, other, _MergePlan.build(bits, other)

    def kendall(self, weights: ArrayLike) -> FloatArray:
        """Kendall's tau-b of each row's resample (copies of a case are tied on both sides).

        S = nc - nd = sum over pairs of distinct cases i < j of
        w_i w_j sign(x_i - x_j) sign(y_i - y_j), computed exactly by a radix
        merge vectorised over rows and cases. Let B be the side with fewer
        distinct values (the 'bit' side, k values, ranks 0..k-1) and O the
        other. Every pair with different B ranks is counted once, at the
        highest bit where the ranks differ: at that level both cases share the
        higher bits (a group) and the one with bit 0 has the smaller B. The
        columns start sorted by O; at each level, with C the running weight
        of the bit-0 columns, each bit-1 case gets the signed weight of its
        group's bit-0 cases (ahead minus behind on O; ties on O count 0) from
        four lookups in C, and the columns are re-laid out as the bit-0 half
        then the bit-1 half, which keeps every next-level group contiguous and
        sorted by O (pairs tied on B, including copies of one case, never
        meet and count 0). ceil(log2 k) levels, each about four passes over
        the weights: the regroup gather, one running sum over the bit-0 half,
        up to four gathers and a dot product over the bit-1 half (two of the
        gathers become per-group sums when the groups are few, as at the top
        levels and for a Likert side). A Likert side (13 values) costs 4
        levels, continuous data ceil(log2 n); O(rows * n log k) work, about
        ten numpy calls per level and block, nothing per row. The side with
        fewer distinct values gets the bits, so a Likert side on either x or
        y is cheap.

        tau_b = S / sqrt((n0 - n1)(n0 - n2)) with n0 = N(N-1)/2 and n1, n2 the
        pairs tied on x and on y (sum of W_v (W_v - 1) / 2 over values),
        evaluated like scipy's kendalltau.
        """
        return self._by_blocks(weights, self._kendall_block)

    def _kendall_block(self, weights: NDArray, scratch: _Scratch) -> FloatArray:
        counts, total = _counts(weights, scratch)
        rows, n = counts.shape
        _, other, plan = self._kendall_plan
        layout = _take(counts, other.order, scratch("layout", rows, n))
        spare = scratch("spare", rows, n)
        ties_other = _tie_pairs(layout, other.bounds if other.tied else None, scratch)
        s = np.zeros(rows, dtype=np.int64)
        for level in plan.levels:
            n0, n1 = level.zeros, n - level.zeros
            layout, spare = _take(layout, level.regroup, spare), layout
            below = _exclusive_cumsum(layout[:, :n0], scratch("below", rows, n0 + 1))
            ones = layout[:, n0:]
            signed = _take(below, level.lt, scratch("signed", rows, n1))
            lookup = scratch("lookup", rows, n1)
            if level.le is None:
                signed *= 2
            else:
                signed += _take(below, level.le, lookup)
            if level.one_bounds is None:
                signed -= _take(below, level.start, lookup)
                signed -= _take(below, level.end, lookup)
                s += np.einsum("ij,ij->i", ones, signed)
            else:
                s += np.einsum("ij,ij->i", ones, signed)
                _, group_weight = _block_totals(ones, level.one_bounds, scratch)
                g = level.start.size
                edges = _take(below, level.start, scratch("signed", rows, g))
                edges += _take(below, level.end, scratch("lookup", rows, g))
                s -= np.einsum("ij,ij->i", group_weight, edges)
        ties_bits = _tie_pairs(layout, plan.value_bounds, scratch)
        pairs = total * (total - 1) // 2
        return _tau_b(s, pairs, ties_bits, ties_other)


def weighted_pearson_rows(x: ArrayLike, y: ArrayLike, W: ArrayLike) -> FloatArray:
    """Pearson's r of each row's resample; see :meth:`WeightedPairs.pearson`."""
    return WeightedPairs(x, y).pearson(W)


def weighted_spearman_rows(x: ArrayLike, y: ArrayLike, W: ArrayLike) -> FloatArray:
    """Spearman's rho of each row's resample; see :meth:`WeightedPairs.spearman`."""
    return WeightedPairs(x, y).spearman(W)


def weighted_kendall_rows(x: ArrayLike, y: ArrayLike, W: ArrayLike) -> FloatArray:
    """Kendall's tau-b of each row's resample; see :meth:`WeightedPairs.kendall`."""
    return WeightedPairs(x, y).kendall(W)


# -- many small samples, one per row -----------------------------------------------------------
