"""The spec pipeline: source text -> YAML -> typed spec -> checked, fingerprinted spec.

:func:`load_spec` does everything that needs only the spec and its template
(fast: this is what ``list`` and editors' feedback rely on); :func:`deep_check`
also reads the data, renders a case and audits the splits (``validate``).
Problems are collected per stage and reported together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .checks import file_problems, semantic_problems
from .data import Dataset, load_dataset
from .errors import DataError, GevalError, Problem, SpecError, TemplateError, errors_only
from .fingerprint import fingerprints
from .lock import StepsLock, lock_rel, parse_lock, stale_problem
from .model import GenerateSteps, Spec
from .parse import parse_spec
from .registry import SpecSource
from .render import Renderer, TemplateSource
from .splits import assign_splits, audit
from .yamlsource import YamlDocument, load_yaml


@dataclass(frozen=True)
class ParsedSpec:
    spec: Spec
    source: SpecSource
    doc: YamlDocument
    template: TemplateSource
    steps: tuple[str, ...]
    lock: StepsLock | None
    judging_fp: str
    analysis_fp: str
    warnings: tuple[Problem, ...] = field(default=())
    steps_stale: bool = False  # the lock was generated from another task, criterion, count or model
    compiled: Renderer | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def data_path(self) -> Path:
        return self.source.base_dir / self.spec.data.path

    @property
    def data_display(self) -> str:
        from .registry import display_path

        return display_path(self.data_path, self.source.root)

    @property
    def lock_path(self) -> Path:
        return self.source.base_dir / f"{self.spec.name}.lock.yaml"

    @property
    def steps_pending(self) -> bool:
        return isinstance(self.spec.steps, GenerateSteps) and not self.steps

    def resolved(self) -> dict:
        """The spec as it is judged: every default filled in, the steps resolved, the template's text."""
        return {"spec": self.spec.model_dump(mode="json"), "steps": list(self.steps),
                "template": {"name": self.template.name, "text": self.template.text},
                "source": {"file": self.source.display, "rev": self.source.rev}}

    def key_problem(self, path, message: str, severity: str = "error") -> Problem:
        return self.doc.problem(tuple(path), message, severity=severity)

    def renderer(self) -> Renderer:
        return self.compiled if self.compiled is not None else Renderer(self.spec, self.template, self.steps)

    def load_data(self) -> Dataset:
        return load_dataset(self.spec, self.data_path, self.data_display, self.key_problem)


def _template_source(spec: Spec, source: SpecSource) -> TemplateSource:
    rel = spec.prompt.template
    if rel is None:
        return TemplateSource.builtin(spec.scoring.method, pairwise=spec.pairwise is not None)
    display, text = source.read_relative(rel)
    folder = Path(rel).parent

    def include(name: str) -> tuple[str, str]:
        return source.read_relative((folder / name).as_posix())

    return TemplateSource(name=display, text=text, read_include=include)


def _template_exists(source: SpecSource):
    def exists(rel: str) -> bool:
        try:
            source.read_relative(rel)
            return True
        except (OSError, UnicodeDecodeError):
            return False

    return exists


def load_spec(source: SpecSource) -> ParsedSpec:
    """Parse and check one spec file; raise with every problem found."""
    doc = load_yaml(source.text, source.display)
    spec = parse_spec(doc)
    problems = semantic_problems(spec, doc) + file_problems(spec, doc, source.base_dir, _template_exists(source))
    if errors_only(problems):
        raise SpecError(problems=problems)
    warnings = list(problems)
    template = _template_source(spec, source)
    steps: tuple[str, ...] = tuple(spec.steps) if isinstance(spec.steps, list) else ()
    lock = None
    stale = None
    if isinstance(spec.steps, GenerateSteps):
        rel = f"{spec.name}.lock.yaml"
        try:
            display, text = source.read_relative(rel)
        except (OSError, UnicodeDecodeError):
            warnings.append(doc.problem(("steps",), f"steps are not generated yet ({lock_rel(source.rel or '', spec.name)} "
                                                    "is missing); the first run writes them", severity="warning"))
        else:
            lock = parse_lock(text, display)
            steps = lock.steps
            stale = stale_problem(lock, spec, spec.panel[0].model) if spec.panel else None
            if stale:
                warnings.append(stale)
    renderer = Renderer(spec, template, steps)
    judging, analysis = fingerprints(spec, steps, template.text)
    return ParsedSpec(spec=spec, source=source, doc=doc, template=template, steps=steps, lock=lock,
                      judging_fp=judging, analysis_fp=analysis, warnings=tuple(warnings), steps_stale=stale is not None,
                      compiled=renderer)


def deep_check(parsed: ParsedSpec) -> tuple[Dataset, list[Problem]]:
    """Read the data, render the first case and audit the splits.

    Returns the dataset and warnings; raises on errors.
    """
    warnings: list[Problem] = []
    dataset = parsed.load_data()
    spec = parsed.spec
    renderer = parsed.renderer()
    if not parsed.steps_pending:
        first = dataset.cases[0]
        renderer.render(first.id, first.fields)
        if len(dataset.cases) > 1:
            # templates that branch on case text can fail on other cases too
            last = dataset.cases[-1]
            renderer.render(last.id, last.fields)
    splits = assign_splits(spec, dataset.cases)
    if spec.split is not None:
        report = audit(spec, dataset.cases, splits)
        for group, names in list(report["overlapping_groups"].items())[:10]:
            warnings.append(parsed.key_problem(("split",), f"source group {group!r} spans splits "
                                                           f"{', '.join(names)}: its cases can leak between them",
                                               severity="warning"))
        if len(report["overlapping_groups"]) > 10:
            warnings.append(parsed.key_problem(("split",), f"{len(report['overlapping_groups']) - 10} more groups "
                                                           "span splits", severity="warning"))
        if spec.calibration.split in report["missing_splits"]:
            warnings.append(parsed.key_problem(("calibration", "split"),
                                               f"split {spec.calibration.split!r} has no cases", severity="warning"))
    unlabelled = sum(1 for c in dataset.cases if c.human_mean is None)
    if unlabelled:
        warnings.append(parsed.key_problem(("data", "human"), f"{unlabelled} case(s) have no human score",
                                           severity="warning"))
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
