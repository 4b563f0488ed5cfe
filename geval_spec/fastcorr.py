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
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

__all__ = [
    "WeightedPairs",
    "group_correlations",
    "rowwise_kendall",
    "rowwise_pearson",
    "rowwise_spearman",
    "weighted_kendall_rows",
    "weighted_pearson_rows",
    "weighted_spearman_rows",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
IndexArray = NDArray[np.int32]
BoolArray = NDArray[np.bool_]

METRICS = ("spearman", "pearson", "kendall")
MAX_ROW_WEIGHT = 2_000_000  # N**3 must fit int64 for the exact Spearman sums
BLOCK_ELEMENTS = 1 << 17  # weights per block inside WeightedPairs (buffers of 1 MB)
GROUPED_LEVEL_RATIO = 8  # a Kendall level sums group terms per group when groups <= bit-1 cases / 8
TINY_SUM = 1e-200  # centred sums below this are recomputed on rescaled deviations
PAIRWISE_BLOCK = 1 << 20  # elements of one rows x s x s block in rowwise_kendall
PAIRWISE_MAX_SIZE = 256  # larger groups use WeightedPairs' O(s log s) Kendall


# -- helpers -----------------------------------------------------------------------------------
def _vector(values: ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


class _Scratch:
    """Named buffers shared by every block of one call.

    A buffer is allocated on first use (``rows * width`` elements of the
    dtype given then) and handed out afterwards as a C-contiguous view of the
    requested shape, so a call touches the same few pages for all its blocks
    and numpy's gathers write to contiguous memory.
    """

    def __init__(self, rows: int, width: int) -> None:
        self.rows = rows
        self.width = width
        self._buffers: dict[str, NDArray] = {}

    def __call__(self, name: str, rows: int, width: int, dtype: DTypeLike = np.int64) -> NDArray:
        buf = self._buffers.get(name)
        if buf is None:
            buf = self._buffers[name] = np.empty(self.rows * self.width, dtype=dtype)
        return buf[:rows * width].reshape(rows, width)


def _counts(weights: NDArray, scratch: _Scratch) -> tuple[IntArray, IntArray]:
    """(weights as int64, row totals); raises unless they are non-negative whole numbers."""
    rows, n = weights.shape
    if weights.dtype == np.int64:
        counts = weights
    else:
        counts = scratch("counts", rows, n)
        with np.errstate(invalid="ignore"):
            np.copyto(counts, weights, casting="unsafe")
        if weights.dtype.kind not in "iub":
            same = scratch("same", rows, n, np.bool_)
            if not np.equal(counts, weights, out=same).all():
                raise ValueError("weights must be whole numbers")
    if counts.size and counts.min() < 0:
        raise ValueError("weights must be non-negative")
    total = counts.sum(axis=1)
    if total.size and total.max() > MAX_ROW_WEIGHT:
        raise ValueError(f"a row's total weight exceeds {MAX_ROW_WEIGHT}")
    return counts, total


def _exclusive_cumsum(m: IntArray, out: IntArray) -> IntArray:
    """Row-wise running sums with a leading zero column (out[:, k] = m[:, :k].sum(1)) into ``out``."""
    out[:, 0] = 0
    np.cumsum(m, axis=1, out=out[:, 1:])
    return out


def _take(m: NDArray, columns: IndexArray, out: NDArray) -> NDArray:
    """m[:, columns] into ``out`` (indices are known to be valid; 'clip' avoids np.take's buffering)."""
    return np.take(m, columns, axis=1, out=out, mode="clip")


def _ratio(num: ArrayLike, den_a: ArrayLike, den_b: ArrayLike) -> FloatArray:
    """num / sqrt(den_a) / sqrt(den_b) clipped to [-1, 1]; NaN where a denominator is 0.

    |num| == den_a == den_b (a perfect association in the exact integer
    statistics) gives exactly +-1 rather than a value an ulp away.
    """
    num = np.asarray(num, dtype=np.float64)
    den_a = np.asarray(den_a, dtype=np.float64)
    den_b = np.asarray(den_b, dtype=np.float64)
    ok = (den_a > 0) & (den_b > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.clip(num / np.sqrt(den_a) / np.sqrt(den_b), -1.0, 1.0)
    r = np.where((np.abs(num) == den_a) & (den_a == den_b), np.sign(num), r)
    return np.where(ok, r, np.nan)


def _tau_b(s: IntArray, pairs: IntArray, ties_a: IntArray, ties_b: IntArray) -> FloatArray:
    """S / sqrt(n0 - n1) / sqrt(n0 - n2) as scipy computes it; NaN when a side has no untied pair."""
    return _ratio(s, pairs - ties_a, pairs - ties_b)


# -- ties --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Ties:
    """Distinct values of a vector: dense codes, a stable sort order and the value blocks.

    ``order`` sorts the cases by value; ``bounds[v]:bounds[v + 1]`` is the
    block of sorted positions holding value ``v``; ``codes[i]`` is case i's
    value index (0 = smallest).
    """

    codes: IndexArray
    order: IndexArray
    bounds: IndexArray

    @classmethod
    def of(cls, values: FloatArray) -> _Ties:
        _, codes = np.unique(values, return_inverse=True)
        counts = np.bincount(codes, minlength=int(codes.max()) + 1 if codes.size else 0)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return cls(codes.astype(np.int32), np.argsort(codes, kind="stable").astype(np.int32),
                   bounds.astype(np.int32))

    @property
    def distinct(self) -> int:
        return self.bounds.size - 1

    @property
    def tied(self) -> bool:
        return self.distinct < self.codes.size

    def totals(self, sorted_weights: IntArray, scratch: _Scratch) -> tuple[IntArray, IntArray]:
        """(weight before each value, weight at each value) per row, from weights in ``order``.

        One running sum over the row; with no ties the weights themselves are
        the totals. Uses the scratch buffers "cum", "before" and "at".
        """
        return _block_totals(sorted_weights, self.bounds if self.tied else None, scratch)


def _block_totals(weights: IntArray, bounds: IndexArray | None,
                  scratch: _Scratch) -> tuple[IntArray, IntArray]:
    """(weight before, weight in) each block of columns bounds[b]:bounds[b + 1], per row.

    ``bounds`` None means every column is its own block.
    """
    rows, n = weights.shape
    cum = _exclusive_cumsum(weights, scratch("cum", rows, n + 1))
    if bounds is None:
        return cum[:, :-1], weights
    k = bounds.size - 1
    before = _take(cum, bounds[:-1], scratch("before", rows, k))
    at = _take(cum, bounds[1:], scratch("at", rows, k))
    at -= before
    return before, at


def _tie_pairs(weights: IntArray, bounds: IndexArray | None, scratch: _Scratch) -> IntArray:
    """Per row, sum over blocks of W_b (W_b - 1) / 2: the pairs tied within a block."""
    _, at = _block_totals(weights, bounds, scratch)
    return (np.einsum("ij,ij->i", at, at) - at.sum(axis=1)) // 2


# -- Kendall merge plan ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Level:
    """One bit of the rank of the 'bit' side (see ``WeightedPairs.kendall``).

    The columns of the current layout form groups of cases that share the
    higher bits of their bit-side rank; each group is contiguous and sorted
    on the other side. Within a group, cases whose bit is 0 have a strictly
    smaller bit-side rank than cases whose bit is 1. The next layout is
    ``regroup``: the bit-0 columns, then the bit-1 columns (each in their
    current order), which keeps every new group contiguous and sorted. With
    C the exclusive running sum over the bit-0 columns, the signed weight of
    the bit-0 cases of the group of the j-th bit-1 case (ahead of it on the
    other side minus behind it) is C[lt[j]] + C[le[j]] - C[start] - C[end]:
    lt / le count the bit-0 columns strictly before / not after it, start /
    end bound its group's bit-0 columns. ``le`` is None when it equals ``lt``
    everywhere (no tie on the other side between the halves of a group).

    ``start`` / ``end`` are per bit-1 case, or, when the groups are few
    (``one_bounds`` not None), per group: the bit-1 cases of group g are then
    the bit-1 columns one_bounds[g]:one_bounds[g + 1], and the group terms
    are summed once per group instead of gathered once per case.
    """

    regroup: IndexArray
    zeros: int
    lt: IndexArray
    le: IndexArray | None
    start: IndexArray
    end: IndexArray
    one_bounds: IndexArray | None


@dataclass(frozen=True)
class _MergePlan:
    """The levels from the highest bit down, and the value blocks of the final layout.

    After the last level every group holds one bit-side value, so the groups
    are the blocks for that side's tie count (``value_bounds``; None when
    that side has no ties).
    """

    levels: list[_Level]
    value_bounds: IndexArray | None

    @classmethod
    def build(cls, bits: _Ties, other: _Ties) -> _MergePlan:
        levels: list[_Level] = []
        cur = other.order.astype(np.int64)  # case ids in layout order
        group = np.zeros(cur.size, dtype=np.int64)  # non-decreasing group ids along the layout
        width = max(other.distinct, 1)
        n_bits = max(bits.distinct - 1, 0).bit_length()
        for bit in range(n_bits - 1, -1, -1):
            is_one = ((bits.codes[cur] >> bit) & 1).astype(bool)
            key = group * width + other.codes[cur]  # non-decreasing along the layout
            zero = np.flatnonzero(~is_one)
            one = np.flatnonzero(is_one)
            key0, key1, group1 = key[zero], key[one], group[one]
            lt = np.searchsorted(key0, key1, side="left")
            le = np.searchsorted(key0, key1, side="right")
            edges = np.flatnonzero(np.diff(group1)) + 1
            one_bounds = None
            if (edges.size + 1) * GROUPED_LEVEL_RATIO <= one.size:
                one_bounds = np.concatenate([[0], edges, [one.size]]).astype(np.int32)
                group1 = group1[one_bounds[:-1]]
            levels.append(_Level(
                regroup=np.concatenate([zero, one]).astype(np.int32), zeros=zero.size,
                lt=lt.astype(np.int32), le=None if np.array_equal(lt, le) else le.astype(np.int32),
                start=np.searchsorted(key0, group1 * width, side="left").astype(np.int32),
                end=np.searchsorted(key0, (group1 + 1) * width, side="left").astype(np.int32),
                one_bounds=one_bounds))
            cur = np.concatenate([cur[zero], cur[one]])
            group = np.concatenate([group[zero], group[one] + (1 << (n_bits - 1 - bit))])
        value_bounds = None
        if bits.tied:
            edges = np.flatnonzero(np.diff(group)) + 1
            value_bounds = np.concatenate([[0], edges, [cur.size]]).astype(np.int32)
        return cls(levels, value_bounds)


def _rescaled_sums(w: FloatArray, dx: FloatArray, dy: FloatArray) -> tuple[FloatArray, ...]:
    """sum w dx dx, sum w dx dy, sum w dy dy with dx and dy divided by their row's largest |value|.

    For rows whose spread is so small (relative to the largest magnitude of
    the data) that the squares underflow; the ratio is unchanged.
    """
    positive = w > 0
    dx = dx / np.where(positive, np.abs(dx), 0.0).max(axis=1, keepdims=True)
    dy = dy / np.where(positive, np.abs(dy), 0.0).max(axis=1, keepdims=True)
    wdx = w * dx
    return (np.einsum("ij,ij->i", wdx, dx), np.einsum("ij,ij->i", wdx, dy),
            np.einsum("ij,ij->i", w * dy, dy))


# -- weighted statistics -----------------------------------------------------------------------
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
        return differs.any(axis=1)

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
def _rows(a: ArrayLike, b: ArrayLike) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Both inputs as float matrices of one shape, and the rows free of NaN."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError("A and B must be matrices of the same shape")
    return a, b, ~(np.isnan(a).any(axis=1) | np.isnan(b).any(axis=1))


def rowwise_pearson(A: ArrayLike, B: ArrayLike) -> FloatArray:
    """Pearson's r of every row pair (A[r], B[r]); NaN for a constant side, a NaN or < 2 columns.

    Two passes (means, centred sums) vectorised over rows; two columns give
    exactly +-1, as scipy does.
    """
    a, b, ok = _rows(A, B)
    if a.shape[1] < 2:
        return np.full(a.shape[0], np.nan)
    ok &= (np.ptp(a, axis=1) > 0) & (np.ptp(b, axis=1) > 0)
    da = a - a.mean(axis=1, keepdims=True)
    db = b - b.mean(axis=1, keepdims=True)
    scale_a = np.abs(da).max(axis=1, keepdims=True)
    scale_b = np.abs(db).max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        da /= scale_a
        db /= scale_b
    r = _ratio(np.einsum("ij,ij->i", da, db), np.einsum("ij,ij->i", da, da),
               np.einsum("ij,ij->i", db, db))
    if a.shape[1] == 2:
        r = np.sign(a[:, 1] - a[:, 0]) * np.sign(b[:, 1] - b[:, 0])
    return np.where(ok, r, np.nan)


def _doubled_centred_ranks(a: FloatArray) -> IntArray:
    """2 * average rank - (s + 1) for every entry, ranking within each row (ties averaged).

    One sort per row; a tie block spanning sorted positions lo..hi gets
    average rank (lo + hi) / 2 + 1, found with running max / min over the
    block starts and ends.
    """
    rows, s = a.shape
    order = np.argsort(a, axis=1, kind="stable")
    sorted_a = np.take_along_axis(a, order, axis=1)
    pos = np.broadcast_to(np.arange(s), (rows, s))
    new = np.ones((rows, s), dtype=bool)
    new[:, 1:] = sorted_a[:, 1:] != sorted_a[:, :-1]
    last = np.ones((rows, s), dtype=bool)
    last[:, :-1] = new[:, 1:]
    lo = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    hi = np.minimum.accumulate(np.where(last, pos, s)[:, ::-1], axis=1)[:, ::-1]
    out = np.empty((rows, s), dtype=np.int64)
    np.put_along_axis(out, order, lo + hi + 1 - s, axis=1)
    return out


def rowwise_spearman(A: ArrayLike, B: ArrayLike) -> FloatArray:
    """Spearman's rho of every row pair (A[r], B[r]), ties averaged as in scipy.

    Ranks per row by one sort (vectorised over rows); the correlation of the
    doubled centred ranks is an exact integer ratio. NaN for a constant
    side, a NaN or fewer than 2 columns.
    """
    a, b, ok = _rows(A, B)
    if a.shape[1] < 2:
        return np.full(a.shape[0], np.nan)
    u = _doubled_centred_ranks(np.where(ok[:, None], a, 0.0))
    v = _doubled_centred_ranks(np.where(ok[:, None], b, 0.0))
    r = _ratio(np.einsum("ij,ij->i", u, v), np.einsum("ij,ij->i", u, u), np.einsum("ij,ij->i", v, v))
    return np.where(ok, r, np.nan)


def rowwise_kendall(A: ArrayLike, B: ArrayLike) -> FloatArray:
    """Kendall's tau-b of every row pair (A[r], B[r]) (e.g. per-system means of each draw).

    All s x s pair signs by broadcasting, in blocks of rows so that a block
    holds about ``PAIRWISE_BLOCK`` pairs (a few int8/bool arrays and one int64
    array of that size); O(s^2) per
    row, meant for s up to a few hundred. NaN for a constant side, a NaN or
    fewer than 2 columns.
    """
    a, b, ok = _rows(A, B)
    rows, s = a.shape
    out = np.full(rows, np.nan)
    if s < 2:
        return out
    step = max(1, PAIRWISE_BLOCK // (s * s))
    n0 = s * (s - 1) // 2
    for lo in range(0, rows, step):
        ab, bb = a[lo:lo + step], b[lo:lo + step]
        sign_a = _pair_signs(ab)
        sign_b = _pair_signs(bb)
        concordance = np.einsum("ijk,ijk->i", sign_a, sign_b, dtype=np.int64) // 2
        ties_a = (s * s - s - np.count_nonzero(sign_a, axis=(1, 2))) // 2
        ties_b = (s * s - s - np.count_nonzero(sign_b, axis=(1, 2))) // 2
        out[lo:lo + step] = _tau_b(concordance, np.full(ab.shape[0], n0), ties_a, ties_b)
    return np.where(ok, out, np.nan)


def _pair_signs(a: FloatArray) -> NDArray[np.int8]:
    """sign(a[r, i] - a[r, j]) for all i, j, as int8."""
    greater = a[:, :, None] > a[:, None, :]
    return greater.astype(np.int8) - greater.transpose(0, 2, 1)


# -- per-group correlations --------------------------------------------------------------------
def group_correlations(x: ArrayLike, y: ArrayLike, group_codes: ArrayLike, metric: str,
                       n_groups: int | None = None) -> FloatArray:
    """The correlation of x and y within every group (unweighted; ties averaged like scipy).

    ``group_codes[i]`` is case i's group, 0 <= code < n_groups (default: the
    largest code + 1). Groups of the same size are stacked into one matrix
    and handled by the ``rowwise_*`` function, so the Python loop runs over
    distinct group sizes, not groups. Kendall groups larger than
    ``PAIRWISE_MAX_SIZE`` (whose s^2 pair matrix would dominate) go one by one
    through :meth:`WeightedPairs.kendall` with unit weights. NaN for groups
    with fewer than 2 cases, a constant side or a non-finite value; 2-case
    groups give exactly +-1.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    xv = np.asarray(x, dtype=np.float64)
    yv = np.asarray(y, dtype=np.float64)
    codes = np.asarray(group_codes, dtype=np.int64)
    if not (xv.ndim == yv.ndim == codes.ndim == 1 and xv.size == yv.size == codes.size):
        raise ValueError("x, y and group_codes must be vectors of one length")
    if codes.size and codes.min() < 0:
        raise ValueError("group codes must be non-negative")
    g = n_groups if n_groups is not None else (int(codes.max()) + 1 if codes.size else 0)
    out = np.full(g, np.nan)
    sizes = np.bincount(codes, minlength=g)
    if sizes.size > g:
        raise ValueError("a group code is >= n_groups")
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rowwise = {"pearson": rowwise_pearson, "spearman": rowwise_spearman, "kendall": rowwise_kendall}[metric]
    for size in np.unique(sizes[sizes >= 2]):
        members = np.flatnonzero(sizes == size)
        idx = order[starts[members][:, None] + np.arange(size)]
        a, b = xv[idx], yv[idx]
        finite = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
        if metric == "kendall" and size > PAIRWISE_MAX_SIZE:
            ones = np.ones((1, int(size)), dtype=np.int64)
            for row in np.flatnonzero(finite):
                out[members[row]] = WeightedPairs(a[row], b[row]).kendall(ones)[0]
        else:
            out[members] = np.where(finite, rowwise(a, b), np.nan)
    return out
