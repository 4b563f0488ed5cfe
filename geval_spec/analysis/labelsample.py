"""``geval-spec label-sample``: the unlabelled cases to label next, drawn at random.

The estimate (:mod:`geval_spec.analysis.estimate`) is unbiased only when the
labelled cases are a random sample of the cases: labelling the judge's worst
disagreements instead, or the easy cases, biases it. So the sample is drawn
uniformly at random from the unlabelled cases of the spec's data, and, when
``data.system`` is set, proportionally per system (each system gets its share
of the sample, the rounding given to the largest remainders), uniformly
within each. The same seed gives the same sample: Python's ``random.Random``,
whose ``sample`` is the same on every platform.

The rows keep the data file's order. Columns: the id, the group and system
when set (named as in the data), the spec's fields (named as in the
template), and one empty column per human column, named like ``data.human``,
for the annotator to fill.
"""

from __future__ import annotations

import random
import re
from typing import Any

from geval_spec.dataset.cases import Case, Dataset
from geval_spec.errors import InputError, Problem
from geval_spec.spec.sections import Spec
from geval_spec.values import frozen


@frozen
class LabelSample:
    """The cases to label: a header and one row per case, and how the sample was drawn."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    unlabelled: int  # unlabelled cases in the data
    per_system: tuple[tuple[str, int, int], ...]  # (system, drawn, unlabelled), when data.system is set
    seed: int


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def allocate(n: int, sizes: dict[str, int]) -> dict[str, int]:
    """``n`` split over strata in proportion to ``sizes``: floors, then the largest remainders (ties: stratum order)."""
    total = sum(sizes.values())
    quotas = {name: n * size / total for name, size in sizes.items()}
    out = {name: int(q) for name, q in quotas.items()}
    order = sorted(sizes, key=lambda name: (-(quotas[name] - out[name]), list(sizes).index(name)))
    for name in order[: n - sum(out.values())]:
        out[name] += 1
    return out


def label_sample(spec: Spec, dataset: Dataset, n: int, seed: int = 0) -> LabelSample:
    """Draw ``n`` unlabelled cases at random (proportionally per system); InputError when n does not fit."""
    unlabelled = [c for c in dataset.cases if c.human_mean is None]
    if n < 1:
        raise InputError(problems=[Problem(f"--n must be at least 1, got {n}",
                                           hint=f"{dataset.display} has {len(unlabelled)} unlabelled case(s)")])
    if n > len(unlabelled):
        raise InputError(problems=[Problem(
            f"--n {n} is more than the {len(unlabelled)} unlabelled case(s) of {dataset.display}",
            hint=f"give --n {len(unlabelled)} or fewer" if unlabelled else
            "every case has a human score: there is nothing to label")])
    rng = random.Random(seed)
    per_system: tuple[tuple[str, int, int], ...] = ()
    if spec.data.system is not None:
        strata: dict[str, list[Case]] = {}
        for case in unlabelled:
            strata.setdefault(str(case.system), []).append(case)
        strata = {name: strata[name] for name in sorted(strata, key=_natural)}
        quota = allocate(n, {name: len(cases) for name, cases in strata.items()})
        chosen = {c.id for name, cases in strata.items() for c in rng.sample(cases, quota[name])}
        per_system = tuple((name, quota[name], len(cases)) for name, cases in strata.items())
    else:
        chosen = {c.id for c in rng.sample(unlabelled, n)}
    d = spec.data
    humans = [d.human] if isinstance(d.human, str) else list(d.human)
    columns = [d.id] + [col for col in (d.group, d.system) if col is not None] + list(d.fields) + humans
    rows = []
    for case in dataset.cases:
        if case.id in chosen:
            ids = [case.id] + [value or "" for col, value in ((d.group, case.group), (d.system, case.system))
                               if col is not None]
            rows.append(tuple(ids + [case.fields.get(var, "") for var in d.fields] + [""] * len(humans)))
    return LabelSample(columns=tuple(columns), rows=tuple(rows), unlabelled=len(unlabelled), per_system=per_system,
                       seed=seed)
