"""Evaluation hygiene: split audits, honest denominators, paired resampling.

The three public functions follow the semantics, validation rules and random
number protocol of the evaluation-hygiene lesson this project follows:

- :func:`audit_eval_split` counts cases per split and finds duplicate ids,
  source groups that span splits, and empty splits. It removes nothing.
- :func:`summarize_eval` keeps invalid output in every denominator: validity,
  accuracy over all cases, accuracy over valid cases, per category and the
  unweighted mean over categories.
- :func:`paired_bootstrap` resamples the *same* case indices for two aligned
  variants (``np.random.default_rng(seed)``, ``rng.integers(0, N, size=...)``
  drawn in row chunks, which does not change the stream, and
  ``np.quantile(..., [.025, .975])``).

Their input limits (1 to 1000 records, ids of at most 100 characters, 100 to
5000 draws) are the published contract; the engine itself calls the
unrestricted cores (:func:`geval_spec.dataset.splits.split_audit`,
:func:`summary`, :func:`paired_resample`), which also resample whole groups.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from geval_spec.dataset.splits import split_audit
from geval_spec.spec.sections import SPLITS

_CHUNK_VALUES = 1 << 20  # values per resampling chunk: bounds memory, not the RNG stream


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 100


def audit_eval_split(records: list[dict[str, str]]) -> dict[str, Any]:
    """Audit case metadata for leakage between splits.

    ``records``: 1 to 1000 dicts with exactly ``id``, ``group`` and ``split``,
    each a non-empty string of at most 100 characters; ``split`` is one of
    examples, dev, test. Anything else raises ``ValueError``.
    """
    if not isinstance(records, list) or not 1 <= len(records) <= 1000:
        raise ValueError("expected a list of 1 to 1000 records")
    for row in records:
        if not isinstance(row, dict) or set(row) != {"id", "group", "split"}:
            raise ValueError("each record needs exactly the keys id, group and split")
        if not all(_is_name(row[k]) for k in ("id", "group", "split")):
            raise ValueError("id, group and split must be non-empty strings of at most 100 characters")
        if row["split"] not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}")
    report = split_audit((r["id"], r["group"], r["split"]) for r in records)
    return {"counts": dict(report.counts), "duplicate_ids": list(report.duplicate_ids),
            "overlapping_groups": {g: list(s) for g, s in report.overlapping_groups.items()},
            "missing_splits": list(report.missing_splits)}


def _metrics(items: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    n = len(items)
    valid = sum(1 for v, _ in items if v)
    correct = sum(1 for _, c in items if c)
    return {
        "n": n,
        "validity": valid / n,
        "accuracy": correct / n,
        "accuracy_when_valid": correct / valid if valid else None,
    }


def summary(rows: Iterable[tuple[str, bool, bool]]) -> dict[str, Any]:
    """(group, valid, correct) rows -> overall, per group, and macro accuracy."""
    groups: dict[str, list[tuple[bool, bool]]] = {}
    everything: list[tuple[bool, bool]] = []
    for group, valid, correct in rows:
        groups.setdefault(group, []).append((valid, correct))
        everything.append((valid, correct))
    if not everything:
        raise ValueError("nothing to summarise")
    by_group = {name: _metrics(items) for name, items in sorted(groups.items())}
    return {
        "overall": _metrics(everything),
        "groups": by_group,
        "macro_group_accuracy": sum(g["accuracy"] for g in by_group.values()) / len(by_group),
    }


def summarize_eval(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Validity and accuracy with invalid output kept in the denominator.

    ``rows``: 1 to 1000 dicts with exactly ``id``, ``group``, ``valid`` and
    ``correct``; unique non-empty ids and groups of at most 100 characters;
    ``valid`` and ``correct`` real booleans, and correct only when valid.
    """
    if not isinstance(rows, list) or not 1 <= len(rows) <= 1000:
        raise ValueError("expected a list of 1 to 1000 rows")
    ids: set[str] = set()
    for row in rows:
        if not isinstance(row, dict) or set(row) != {"id", "group", "valid", "correct"}:
            raise ValueError("each row needs exactly the keys id, group, valid and correct")
        if not _is_name(row["id"]) or not _is_name(row["group"]) or row["id"] in ids:
            raise ValueError("ids must be unique; id and group non-empty strings of at most 100 characters")
        if type(row["valid"]) is not bool or type(row["correct"]) is not bool:
            raise ValueError("valid and correct must be booleans")
        if row["correct"] and not row["valid"]:
            raise ValueError("a correct answer must also be valid")
        ids.add(row["id"])
    return summary((r["group"], r["valid"], r["correct"]) for r in rows)


def quantile_bounds(level: float) -> tuple[float, float]:
    lo = round((1.0 - level) / 2.0, 12)
    return lo, round(1.0 - lo, 12)


def paired_resample(delta: npt.ArrayLike, draws: int, seed: int, groups: Sequence[Any] | None = None,
                    level: float = 0.95) -> tuple[float, float, float, npt.NDArray[np.float64]]:
    """Bootstrap the mean of per-case differences ``delta``.

    With ``groups``, whole groups are drawn (with replacement) and the
    statistic is the mean over every case of the drawn groups. Returns
    (difference, low, high, samples).
    """
    delta = np.asarray(delta, dtype=float)
    rng = np.random.default_rng(seed)
    samples = np.empty(draws)
    if groups is None:
        n = delta.size
        rows = max(1, _CHUNK_VALUES // max(n, 1))
        for start in range(0, draws, rows):
            count = min(rows, draws - start)
            idx = rng.integers(0, n, size=(count, n))
            samples[start:start + count] = delta[idx].mean(axis=1)
    else:
        _, inverse = np.unique(np.asarray([str(g) for g in groups]), return_inverse=True)
        sums = np.bincount(inverse, weights=delta)
        sizes = np.bincount(inverse).astype(float)
        g = sums.size
        rows = max(1, _CHUNK_VALUES // max(g, 1))
        for start in range(0, draws, rows):
            count = min(rows, draws - start)
            idx = rng.integers(0, g, size=(count, g))
            samples[start:start + count] = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
    low, high = np.quantile(samples, list(quantile_bounds(level)))
    return float(delta.mean()), float(low), float(high), samples


def paired_bootstrap(a: npt.ArrayLike, b: npt.ArrayLike, draws: int = 1000, seed: int = 7,
                     groups: Sequence[Any] | None = None) -> dict[str, float]:
    """Paired bootstrap of correct(b) - correct(a) over the same cases.

    ``a`` and ``b``: aligned one-dimensional boolean vectors of 2 to 1000
    cases. ``draws``: an int from 100 to 5000; ``seed``: an int in [0, 2**32).
    Returns the observed ``difference`` and the 95% percentile interval
    ``low``/``high``. With ``groups`` (one label per case), whole groups are
    drawn instead of cases, for cases that are not independent (questions
    from the same source document); without it the published protocol is
    followed exactly.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 1 or not 2 <= a.size <= 1000 or b.shape != a.shape or a.dtype != bool or b.dtype != bool:
        raise ValueError("expected two aligned one-dimensional boolean vectors of 2 to 1000 cases")
    if type(draws) is not int or not 100 <= draws <= 5000:
        raise ValueError("draws must be an int from 100 to 5000")
    if type(seed) is not int or not 0 <= seed < 2**32:
        raise ValueError("seed must be an int in [0, 2**32)")
    if groups is not None and len(groups) != a.size:
        raise ValueError("groups needs one label per case")
    diff, low, high, _ = paired_resample(b.astype(float) - a.astype(float), draws, seed, groups=groups)
    return {"difference": diff, "low": low, "high": high}
