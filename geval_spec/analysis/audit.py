"""``geval-spec audit``: what can be known about a spec's data before any judge is called.

The splits (counts, duplicate ids, source groups that span splits, empty
splits), the agreement between human raters, and whether the gate's split has
enough labelled cases.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from geval_spec.analysis.agreement import human_agreement
from geval_spec.analysis.frame import Frame, Status, nanmean_rows
from geval_spec.analysis.results import Agreement, Result, SampleSize
from geval_spec.analysis.samplesize import HALFWIDTH, sample_size
from geval_spec.dataset.cases import Dataset
from geval_spec.dataset.splits import assign_splits
from geval_spec.dataset.splits import audit as split_audit
from geval_spec.spec.sections import SPLITS, Spec, SplitByField, SplitByHash


class SplitsBlock(Result):
    counts: dict[str, int]
    duplicate_ids: list[str]
    overlapping_groups: dict[str, list[str]]
    missing_splits: list[str]
    by: str | None
    groups: int
    undeclared: list[str] = Field(default_factory=list, exclude=True)  # missing splits the spec gives no share


class AuditCases(Result):
    n: int
    labelled: int


class Audit(Result):
    """What can be known about a spec's data before any judge call: splits, human agreement, sample size."""

    splits: SplitsBlock
    agreement: Agreement | None
    sample_size: SampleSize
    cases: AuditCases
    spec: str = Field(exclude=True)


VALID: tuple[Status] = ("valid",)


def _split_by(spec: Spec) -> str | None:
    if isinstance(spec.split, SplitByField):
        return f"column {spec.split.field}"
    if isinstance(spec.split, SplitByHash):
        return f"hash of {spec.split.by}"
    return None


def audit(spec: Spec, dataset: Dataset, halfwidth: float = HALFWIDTH) -> Audit:
    cases = dataset.cases
    splits = assign_splits(spec, cases)
    humans = np.asarray([[np.nan if h is None else h for h in c.human] for c in cases], dtype=float)
    human = nanmean_rows(humans)
    labelled = ~np.isnan(human)
    # every labelled case counts as usable: what the gate's split could hold if every judgment were valid
    frame = Frame(ids=tuple(c.id for c in cases), groups=tuple(c.group for c in cases),
                  systems=tuple(c.system for c in cases), categories=tuple(c.category for c in cases),
                  families=tuple(c.family for c in cases), splits=tuple(splits[c.id] for c in cases),
                  human=human, raters=humans, score=np.where(labelled, 0.0, np.nan), status=VALID * len(cases),
                  reasons=(None,) * len(cases), lengths=np.zeros(len(cases)), texts=("",) * len(cases))
    if spec.split is not None:
        report = split_audit(cases, splits)
        declared = set(spec.split.fractions) if isinstance(spec.split, SplitByHash) else set(SPLITS)
        block = SplitsBlock(counts=dict(report.counts), duplicate_ids=list(report.duplicate_ids),
                            overlapping_groups={g: list(s) for g, s in report.overlapping_groups.items()},
                            missing_splits=list(report.missing_splits), by=_split_by(spec),
                            groups=len({c.group for c in cases if c.group is not None}),
                            undeclared=[m for m in report.missing_splits if m not in declared])
    else:
        block = SplitsBlock(counts={}, duplicate_ids=[], overlapping_groups={}, missing_splits=[], by=None,
                            groups=len({c.group for c in cases if c.group is not None}))
    return Audit(splits=block, agreement=human_agreement(frame, spec), sample_size=sample_size(frame, spec, halfwidth=halfwidth),
                 cases=AuditCases(n=len(cases), labelled=int(labelled.sum())), spec=spec.name)
