"""Exact correlations of many small independent samples at once: one per row (system level) or per group.

Each statistic equals scipy's (``pearsonr``, ``spearmanr``, ``kendalltau`` tau-b) on the row or group, NaN where
undefined (fewer than two cases, a constant side). Large groups go through
:class:`geval_spec.analysis.fastcorr.WeightedPairs`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geval_spec.analysis.fastcorr import WeightedPairs
from geval_spec.analysis.fastcorr_core import METRICS, BoolArray, FloatArray, IntArray, _ratio, _tau_b

PAIRWISE_BLOCK = 1 << 20  # elements of one rows x s x s block in rowwise_kendall
PAIRWISE_MAX_SIZE = 256  # larger groups use WeightedPairs' O(s log s) Kendall

__all__ = ["group_correlations", "rowwise_kendall", "rowwise_pearson", "rowwise_spearman"]


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
