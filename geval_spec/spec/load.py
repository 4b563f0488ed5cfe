"""A spec file, checked and fingerprinted: source text -> YAML -> typed spec -> :class:`ParsedSpec`.

:func:`load_spec` does everything that needs only the spec, its template and
its lock file (fast: this is what ``list`` and editors' feedback rely on).
What also needs the data or a rendered prompt is checked by
:mod:`geval_spec.runner.validate`. Problems are collected per stage and
reported together.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from geval_spec.errors import GevalError, Problem, Severity, SpecError, errors_only
from geval_spec.files import OutsideProject, ReadError, check_input
from geval_spec.redact import url_credentials
from geval_spec.spec.checks import file_problems, semantic_problems
from geval_spec.spec.fingerprint import fingerprints
from geval_spec.spec.lock import StepsLock, lock_rel, parse_lock, stale_problem
from geval_spec.spec.parse import parse_spec
from geval_spec.spec.project import Project, SpecSource, display_path
from geval_spec.spec.sections import GenerateSteps, Spec
from geval_spec.spec.template import TemplateSource
from geval_spec.spec.yamldoc import Path as KeyPath
from geval_spec.spec.yamldoc import YamlDocument, load_yaml
from geval_spec.values import frozen


@frozen
class ResolvedSpec:
    """The spec as it is judged: every default filled in, the steps resolved, the template's text.

    Stored with every run (so a run can be analysed with the settings it was
    made with) and diffed by ``compare``.
    """

    spec: Spec
    steps: tuple[str, ...]
    template_name: str
    template_text: str
    file: str
    rev: str | None

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec.model_dump(mode="json"), "steps": list(self.steps),
                "template": {"name": self.template_name, "text": self.template_text},
                "source": {"file": self.file, "rev": self.rev}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ResolvedSpec":
        """The spec stored with a run: validated by geval-spec before it was written, and JSON (so rubric scores
        are text keys): read without the strictness of a spec file."""
        template = data.get("template") or {}
        source = data.get("source") or {}
        return cls(spec=Spec.model_validate(data["spec"], strict=False), steps=tuple(data.get("steps") or ()),
                   template_name=str(template.get("name") or ""), template_text=str(template.get("text") or ""),
                   file=str(source.get("file") or ""), rev=source.get("rev"))

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True)


@frozen
class ParsedSpec:
    """A spec file loaded and checked: the spec, its source, template, steps and fingerprints."""

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

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def data_path(self) -> Path:
        return self.source.base_dir / self.spec.data.path

    @property
    def data_display(self) -> str:
        return display_path(self.data_path, self.source.root)

    @property
    def lock_path(self) -> Path:
        return self.source.base_dir / f"{self.spec.name}.lock.yaml"

    @property
    def steps_pending(self) -> bool:
        return isinstance(self.spec.steps, GenerateSteps) and not self.steps

    def resolved(self) -> ResolvedSpec:
        return ResolvedSpec(spec=self.spec, steps=self.steps, template_name=self.template.name,
                            template_text=self.template.text, file=self.source.display, rev=self.source.rev)

    def key_problem(self, path: KeyPath, message: str, severity: Severity = "error") -> Problem:
        return self.doc.problem(tuple(path), message, severity=severity)


def _template_source(spec: Spec, source: SpecSource) -> TemplateSource:
    rel = spec.prompt.template
    if rel is None:
        return TemplateSource.builtin(spec.scoring.method, pairwise=spec.pairwise is not None)
    display, text = source.read_relative(rel, "template")
    folder = Path(rel).parent

    def include(name: str) -> tuple[str, str]:
        """A template another one includes, imports or extends: relative to the spec's template, in the project."""
        return source.read_relative((folder / name).as_posix(), "template")

    return TemplateSource(name=display, text=text, read_include=include)


def _template_exists(source: SpecSource, rel: str) -> bool:
    try:
        source.read_relative(rel, "template")
        return True
    except (OSError, ReadError):
        return False


def _path_problems(spec: Spec, doc: YamlDocument, source: SpecSource) -> tuple[list[Problem], set[str]]:
    """Files the spec names that lead out of the project or are not regular files (and which keys they are)."""
    out: list[Problem] = []
    keys: set[str] = set()
    rel = spec.prompt.template
    if rel is not None:
        try:
            source.read_relative(rel, "template")
        except (OutsideProject, ReadError) as exc:
            out.append(doc.problem(("prompt", "template"), str(exc)))
            keys.add("prompt.template")
        except OSError:
            pass  # not found: file_problems says so
    try:
        path = source.inside(spec.data.path, "data file")
        if path.exists() or path.is_symlink():
            check_input(path, f"data file {spec.data.path}")
    except ReadError as exc:
        out.append(doc.problem(("data", "path"), str(exc)))
        keys.add("data.path")
    except OSError:
        pass
    return out, keys


def api_base_problem(value: str) -> str | None:
    """Why ``judge.api_base`` is no URL the client can send to, or None (``http://``, ``http://[zz]/v1``, a port
    past 65535 or a space passed validate, and the run then failed every request as if the server were down:
    exit 3). Checked when a spec file is read, not when a stored run's spec is (a run stored before the check
    must stay readable). The value is not repeated: it may hold a password."""
    if any(c.isspace() or ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        return "api_base is not a URL: it holds a space or a control character"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises for a port that is not a number from 0 to 65535)
        host = parts.hostname
    except ValueError as exc:
        return f"api_base is not a URL ({str(exc).split(':')[0]})"
    if not host:
        return "api_base has no host: write it as http://host:port/path, e.g. http://localhost:8000/v1"
    if "[" in parts.netloc:
        import ipaddress

        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "api_base is not a URL: what is inside [ ] is not an IPv6 address"
    return None


def _credential_problems(spec: Spec, doc: YamlDocument) -> list[Problem]:
    """A judge.api_base that is no URL, or holds a password or key: it would be committed, printed and stored."""
    out = []
    for i, judge in enumerate(spec.panel):
        if judge.api_base is None:
            continue
        where: KeyPath = ("judge", "api_base") if spec.judge is not None else ("judges", i, "api_base")
        if (not_a_url := api_base_problem(judge.api_base)) is not None:
            out.append(doc.problem(where, not_a_url))
            continue
        reason = url_credentials(judge.api_base)
        if reason is None:
            continue
        out.append(doc.problem(where, f"api_base holds credentials ({reason}); a spec is committed and printed, "
                                      "so keys never belong in it",
                               hint="remove them from the URL and set the provider's key variable "
                                    "(OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) in the environment instead"))
    return out


def load_spec(source: SpecSource) -> ParsedSpec:
    """Parse and check one spec file; raise :class:`SpecError` with every problem found."""
    doc = load_yaml(source.text, source.display)
    spec = parse_spec(doc)
    path_problems, flagged = _path_problems(spec, doc, source)
    found = file_problems(spec, doc, source.base_dir, lambda rel: "prompt.template" in flagged or _template_exists(
        source, rel))
    problems = _credential_problems(spec, doc) + semantic_problems(spec, doc) + path_problems + [
        p for p in found if p.key not in flagged]
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
            display, text = source.read_relative(rel, "lock file")
        except FileNotFoundError:
            warnings.append(doc.problem(("steps",), f"steps are not generated yet ({lock_rel(source.rel or '', spec.name)} "
                                                    "is missing); the first run writes them", severity="warning"))
        except (OSError, ReadError) as exc:  # a link out of the project, a FIFO, a folder: not "missing"
            where = lock_rel(source.rel or "", spec.name)
            raise SpecError(problems=[doc.problem(("steps",), f"cannot read the lock file {where}: {exc}")]) from None
        else:
            lock = parse_lock(text, display)
            steps = lock.steps
            stale = stale_problem(lock, spec, spec.panel[0].model) if spec.panel else None
            if stale:
                warnings.append(stale)
    judging, analysis = fingerprints(spec, steps, template.text)
    return ParsedSpec(spec=spec, source=source, doc=doc, template=template, steps=steps, lock=lock,
                      judging_fp=judging, analysis_fp=analysis, warnings=tuple(warnings), steps_stale=stale is not None)


@frozen
class Listed:
    """One spec file of a project: the loaded spec, or the problems that kept it from loading."""

    source: SpecSource
    parsed: ParsedSpec | None
    problems: tuple[Problem, ...] = ()


def load_all(project: Project) -> list[Listed]:
    """Every spec file of the project, loaded (``list``)."""
    out = []
    for path in project.spec_files():
        try:
            source = project.source_of(path)
        except GevalError as exc:
            out.append(Listed(SpecSource(display_path(path, project.root), "", project.root, None), None,
                              exc.problems))
            continue
        try:
            out.append(Listed(source, load_spec(source)))
        except GevalError as exc:
            out.append(Listed(source, None, exc.problems))
    return out
