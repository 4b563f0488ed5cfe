"""``validate`` and ``render``: everything that can be checked or shown without a judge.

:func:`geval_spec.spec.load.load_spec` checks the spec itself; this module
also reads the data, compiles the template and renders the first and last
cases, and audits the splits for leakage. Problems of every stage are
collected and reported together.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Sequence

from geval_spec.dataset.cases import Dataset, read_cases
from geval_spec.dataset.splits import assign_splits, audit
from geval_spec.errors import DataError, GevalError, InputError, Problem, RefError, SpecError, TemplateError
from geval_spec.judge.render import prefix_share, renderer_for
from geval_spec.spec.checks import CASE_RESAMPLING, halfwidth_problem
from geval_spec.spec.load import ParsedSpec, load_spec
from geval_spec.spec.project import Project, SpecSource
from geval_spec.values import frozen

if TYPE_CHECKING:  # the requests of a preview: imported by render, not by validate
    from geval_spec.judge.requests import Plan

MAX_GROUP_WARNINGS = 10


def deep_check(parsed: ParsedSpec) -> tuple[Dataset, list[Problem]]:
    """Read the data, render the first and last case and audit the splits; return warnings, raise on errors."""
    warnings: list[Problem] = []
    dataset = read_cases(parsed)
    spec = parsed.spec
    renderer = renderer_for(parsed)
    if not parsed.steps_pending:
        # templates that branch on case text can fail on some cases only: try both ends
        picks = (dataset.cases[0], dataset.cases[-1]) if len(dataset.cases) > 1 else dataset.cases[:1]
        for case in picks:
            renderer.render(case.id, case.fields)
    splits = assign_splits(spec, dataset.cases)
    if spec.split is not None:
        report = audit(dataset.cases, splits)
        overlapping = list(report.overlapping_groups.items())
        for group, names in overlapping[:MAX_GROUP_WARNINGS]:
            warnings.append(parsed.key_problem(("split",), f"source group {group!r} spans splits "
                                                           f"{', '.join(names)}: its cases can leak between them",
                                               severity="warning"))
        if len(overlapping) > MAX_GROUP_WARNINGS:
            warnings.append(parsed.key_problem(("split",), f"{len(overlapping) - MAX_GROUP_WARNINGS} more groups "
                                                           "span splits", severity="warning"))
        if spec.calibration.split in report.missing_splits:
            warnings.append(parsed.key_problem(("calibration", "split"),
                                               f"split {spec.calibration.split!r} has no cases", severity="warning"))
    if spec.bootstrap.unit == "case" and any(c.group is not None for c in dataset.cases):
        warnings.append(parsed.key_problem(("bootstrap", "unit"), CASE_RESAMPLING, severity="warning"))
    labels = [h for c in dataset.cases if (h := c.human_mean) is not None]
    unlabelled = len(dataset.cases) - len(labels)
    if unlabelled:
        warnings.append(parsed.key_problem(("data", "human"), f"{unlabelled} case(s) have no human score: "
                                           "calibration uses the labelled ones, and the report estimates the "
                                           "human-scale mean from both (docs/estimate.md)", severity="warning"))
    target = spec.estimate.target_halfwidth if spec.estimate is not None else None
    if target is not None and spec.data.human_scale is None and labels:
        why = halfwidth_problem(target, (min(labels), max(labels)), "the range of the human scores, since "
                                "data.human_scale is not set")
        if why:
            raise SpecError(problems=[parsed.key_problem(("estimate", "target_halfwidth"), why)])
    return dataset, warnings


def check_all(source: SpecSource) -> tuple[ParsedSpec | None, list[Problem]]:
    """Everything ``validate`` checks for one file: (spec or None, problems)."""
    try:
        parsed = load_spec(source)
    except GevalError as exc:
        return None, list(exc.problems) or [Problem(str(exc), file=source.display)]
    problems = list(parsed.warnings)
    try:
        _, more = deep_check(parsed)
        problems += more
    except (DataError, TemplateError, SpecError) as exc:
        problems += list(exc.problems)
    return parsed, problems


@frozen
class Checked:
    """What ``validate`` found for one spec file."""

    display: str
    problems: tuple[Problem, ...]

    @property
    def errors(self) -> int:
        return sum(1 for p in self.problems if p.severity == "error")


def validate_specs(project: Project, refs: Sequence[str]) -> tuple[list[Checked], list[Problem]]:
    """Check the specs ``refs`` name (every spec when none): per file, and the project's own problems."""
    sources = [project.resolve(r) for r in refs] if refs else [project.source_of(p) for p in project.spec_files()]
    if not sources:
        raise InputError(problems=[Problem(f"no specs in {project.specs_dir}")])
    checked = [Checked(source.display, tuple(check_all(source)[1])) for source in sources]
    return checked, ([] if refs else project.duplicate_name_problems())


@frozen
class Preview:
    """The exact requests of one case, and how much of its prompt every case shares."""

    parsed: ParsedSpec
    case_id: str
    plan: Plan
    static_tokens: int
    total_tokens: int


def preview(parsed: ParsedSpec, case_id: str | None) -> Preview:
    """What ``render`` shows: the requests of one case (default: the first)."""
    dataset = read_cases(parsed)
    cases = {c.id: c for c in dataset.cases}
    if case_id is not None and case_id not in cases:
        close = difflib.get_close_matches(case_id, list(cases), n=3)
        hint = ("did you mean " + ", ".join(repr(c) for c in close) + "?") if close else None
        raise RefError(problems=[Problem(f"no case {case_id!r} in {dataset.display}", hint=hint)])
    chosen = cases[case_id] if case_id is not None else dataset.cases[0]
    from geval_spec.judge.requests import prepare_requests

    plan = prepare_requests(parsed, [chosen])
    static, total = prefix_share(plan.renderer.static_prefix(), plan.rendered[chosen.id][0].messages)
    return Preview(parsed=parsed, case_id=chosen.id, plan=plan, static_tokens=static, total_tokens=total)
