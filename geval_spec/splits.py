"""Which split each case belongs to.

Either a column says so (``split: {field: split}``), or the split is drawn from
a hash of the case's group (or id) with the spec's seed: SHA-256 of
``"<seed>:<key>"``, its first 8 bytes as a number in [0, 1), placed on the
cumulative fractions in the order examples, dev, test. The same seed and key
give the same split on every machine and in every run, and all cases of a
source group land in the same split.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .data import Case
from .hygiene import SPLIT_ORDER, split_audit
from .model import Spec, SplitByField


def hash_unit(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def hash_split(seed: int, key: str, fractions: dict[str, float]) -> str:
    u = hash_unit(seed, key)
    edge = 0.0
    last = None
    for name in SPLIT_ORDER:
        share = fractions.get(name, 0.0)
        if share <= 0:
            continue
        last = name
        edge += share
        if u < edge:
            return name
    return last or "test"


def assign_splits(spec: Spec, cases: tuple[Case, ...]) -> dict[str, str | None]:
    """Case id -> split name (None when the spec has no splits)."""
    split = spec.split
    if split is None:
        return {c.id: None for c in cases}
    if isinstance(split, SplitByField):
        return {c.id: c.split_value for c in cases}
    fractions = {str(k): float(v) for k, v in split.fractions.items()}
    out = {}
    for c in cases:
        key = c.id if split.by == "id" or c.group is None else c.group
        out[c.id] = hash_split(split.seed, key, fractions)
    return out


def audit(spec: Spec, cases: tuple[Case, ...], splits: dict[str, str | None] | None = None) -> dict[str, Any]:
    splits = splits if splits is not None else assign_splits(spec, cases)
    return split_audit((c.id, c.group, splits.get(c.id)) for c in cases)
