"""Which split each case belongs to, and an audit of the splits for leakage.

Either a column says so (``split: {field: split}``), or the split is drawn from
a hash of the case's group (or id) with the spec's seed: SHA-256 of
``"<seed>:<key>"``, its first 8 bytes as a number in [0, 1), placed on the
cumulative fractions in the order examples, dev, test. The same seed and key
give the same split on every machine and in every run, and all cases of a
source group land in the same split.

The audit counts cases per split and finds duplicate ids, source groups that
span splits and empty splits. It removes nothing.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Mapping

from geval_spec.dataset.cases import Case
from geval_spec.spec.sections import SPLITS, Spec, SplitByField
from geval_spec.values import frozen


def hash_unit(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def hash_split(seed: int, key: str, fractions: Mapping[str, float]) -> str:
    u = hash_unit(seed, key)
    edge = 0.0
    last = None
    for name in SPLITS:
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
    out: dict[str, str | None] = {}
    by_key: dict[str, str] = {}  # cases of one group share its split: hashed once
    for c in cases:
        key = c.id if split.by == "id" or c.group is None else c.group
        name = by_key.get(key)
        if name is None:
            name = by_key[key] = hash_split(split.seed, key, fractions)
        out[c.id] = name
    return out


@frozen
class SplitAudit:
    """What a split assignment looks like: cases per split, duplicates, groups across splits."""

    counts: Mapping[str, int]  # every split name, in order
    duplicate_ids: tuple[str, ...]
    overlapping_groups: Mapping[str, tuple[str, ...]]  # group -> the splits it spans (sorted)
    missing_splits: tuple[str, ...]


def split_audit(records: Iterable[tuple[str, str | None, str | None]]) -> SplitAudit:
    """Audit (id, group, split) triples; cases without a split are ignored."""
    counts: dict[str, int] = {name: 0 for name in SPLITS}
    seen: set[str] = set()
    duplicates: set[str] = set()
    splits_of: dict[str, set[str]] = {}
    for case_id, group, split in records:
        if split is None:
            continue
        counts[split] += 1
        if case_id in seen:
            duplicates.add(case_id)
        seen.add(case_id)
        splits_of.setdefault(group if group is not None else case_id, set()).add(split)
    return SplitAudit(counts=dict(counts), duplicate_ids=tuple(sorted(duplicates)),
                      overlapping_groups={g: tuple(sorted(s)) for g, s in sorted(splits_of.items()) if len(s) > 1},
                      missing_splits=tuple(name for name in SPLITS if counts[name] == 0))


def audit(cases: tuple[Case, ...], splits: Mapping[str, str | None]) -> SplitAudit:
    return split_audit((c.id, c.group, splits.get(c.id)) for c in cases)
