"""The building blocks of :mod:`geval_spec.analysis.fastcorr`: reused buffers, exact tie counts, the Kendall merge plan."""

from __future__ import annotations


import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from geval_spec.values import frozen

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
IndexArray = NDArray[np.int32]
BoolArray = NDArray[np.bool_]

METRICS = ("spearman", "pearson", "kendall")
MAX_ROW_WEIGHT = 2_000_000  # N**3 must fit int64 for the exact Spearman sums
BLOCK_ELEMENTS = 1 << 17  # weights per block inside WeightedPairs (buffers of 1 MB)
GROUPED_LEVEL_RATIO = 8  # a Kendall level sums group terms per group when groups <= bit-1 cases / 8
TINY_SUM = 1e-200  # centred sums below this are recomputed on rescaled deviations


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
@frozen
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
    pairs: IntArray = (np.einsum("ij,ij->i", at, at) - at.sum(axis=1)) // 2
    return pairs


# -- Kendall merge plan ------------------------------------------------------------------------
@frozen
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


@frozen
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
