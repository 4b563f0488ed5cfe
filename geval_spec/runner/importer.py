"""``geval-spec import``: judgments made elsewhere, stored as a run.

One JSON object per line, keyed by the spec's case id, in one of five forms:

    {"case_id": "a1", "score": 3.5}
    {"case_id": "a2", "samples": ["4", "3", "4"]}
    {"case_id": "a3", "distribution": {"1": 0.05, "2": 0.1, "3": 0.2, "4": 0.4, "5": 0.25}}
    {"case_id": "a4", "verdicts": [{"statement": "...", "verdict": "mostly", "reason": "..."}]}
    {"case_id": "a5", "error": "judge returned invalid JSON"}

The method recorded for each judgment follows the line's form (score:
direct, samples: samples, distribution: logprobs, verdicts: verdicts, error:
the spec's method). A line with ``error`` is an invalid judgment and stays in
every denominator. Cases of the spec without a line are reported as missing.
Importing the same file for the same spec and judge twice reuses the first
run.

The file must fit the spec, or nothing is stored (exit 2, listing the lines):

- the form fits the spec's ``scoring.method``: a ``verdicts`` spec takes
  verdicts (or scores in 0..1), the score methods (``logprobs``, ``samples``,
  ``direct``) take score, samples and distribution lines, never verdicts;
- one form per file (error lines aside): a file that mixes score, samples and
  distribution lines is refused, naming the lines that differ from the most
  common form;
- ``case_id`` is text or a whole number; scores, samples and distribution
  keys are on the rubric's scale (a sample is a whole number or the judge's
  text); probabilities are numbers in 0..1 that sum
  to at most 1 (less is fine: the rest fell outside the scale).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import unicodedata
from pathlib import Path
from typing import Any, Mapping

from geval_spec import __version__
from geval_spec.dataset.cases import Dataset, read_cases
from geval_spec.dataset.splits import assign_splits
from geval_spec.errors import DataError, Problem
from geval_spec.files import KeyTwice, ReadError, keys_once, lines, prepare_output, read_text
from geval_spec.judge.outputs import as_int_score, verdicts_from_items
from geval_spec.judge.precheck import precheck
from geval_spec.judge.scoring import judge_verdicts, mean_and_spread
from geval_spec.judge.types import Details, Judgment
from geval_spec.redact import SURROGATE, lone_surrogate, redact_json
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import Spec
from geval_spec.store.db import Store
from geval_spec.store.records import RunInfo, RunJudge, RunSettings
from geval_spec.values import frozen

FORMS = ("score", "samples", "distribution", "verdicts", "error")
OPTIONAL = ("judge", "raw", "reason")
MAX_PROBLEMS = 20


@frozen
class ImportResult:
    run_id: str
    reused: bool
    cases: int
    imported: int
    valid: int
    invalid: int
    missing: tuple[str, ...]
    forms: Mapping[str, int]


class _Line:
    """One line of an import file: makes problems that point at it."""

    def __init__(self, file: str, n: int, text: str) -> None:
        self.file, self.n, self.text = file, n, text

    def problem(self, message: str, hint: str | None = None) -> Problem:
        return Problem(message=message, file=self.file, line=self.n, hint=hint, source=self.text)


def _case_id(obj: dict[str, Any]) -> str | None:
    case_id = obj.get("case_id")
    if isinstance(case_id, (int, float)) and not isinstance(case_id, bool) and math.isfinite(case_id):
        case_id = str(int(case_id)) if float(case_id).is_integer() else str(case_id)
    return case_id if isinstance(case_id, str) and case_id else None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a number" if isinstance(value, (int, float)) else "text"


def forms_for(spec: Spec) -> tuple[str, ...]:
    """The line forms that fit the spec's scoring method (error lines always do)."""
    if spec.scoring.method == "verdicts":
        return ("verdicts", "score", "error")
    return ("score", "samples", "distribution", "error")


def redacted_line(obj: Any) -> Any:
    """An import line with every secret masked in its values but the case id (an error or a reason can quote a
    key; what is imported is stored and reported)."""
    if not isinstance(obj, dict):
        return obj
    return {k: v if k == "case_id" else redact_json(v) for k, v in obj.items()}


def parse_line(obj: Any, spec: Spec, judge: str, line: _Line) -> tuple[str, Judgment] | Problem:
    """The judgment one line stands for, or the problem with it."""
    if not isinstance(obj, dict):
        return line.problem("each line must be a JSON object")
    unknown = [k for k in obj if k not in ("case_id", *FORMS, *OPTIONAL)]
    if unknown:
        close = difflib.get_close_matches(unknown[0], ["case_id", *FORMS, *OPTIONAL], n=1)
        return line.problem(f"unknown key {unknown[0]!r}", f"did you mean {close[0]!r}?" if close else
                            f"keys: case_id and one of {', '.join(FORMS)}")
    if "case_id" not in obj:
        return line.problem("missing 'case_id'")
    case_id = _case_id(obj)
    if case_id is None:
        return line.problem(f"case_id must be text or a whole number, not {_json_type(obj['case_id'])}")
    forms = [f for f in FORMS if f in obj]
    if len(forms) != 1:
        return line.problem(f"give exactly one of {', '.join(FORMS)}" + (f" (found {', '.join(forms)})"
                                                                         if forms else ""))
    form = forms[0]
    if form not in forms_for(spec):
        fits = ", ".join(f for f in forms_for(spec) if f != "error")
        return line.problem(f"a {form!r} line does not fit scoring.method {spec.scoring.method} (its forms: {fits})",
                            "import judgments made with the spec's method, or change the method")
    value = obj[form]
    if form == "error":
        if not isinstance(value, str) or not value:
            return line.problem("'error' must be a non-empty text")
        return case_id, Judgment.invalid(case_id, judge, spec.scoring.method, value, Details(imported="error"))
    if form == "verdicts":
        if not isinstance(value, list):
            return line.problem("'verdicts' must be a list")
        verdicts, reason = verdicts_from_items(value)
        if verdicts is None:
            return line.problem(f"verdicts: {reason}")
        return case_id, judge_verdicts(case_id, judge, verdicts, None, spec.aggregation, Details(imported="verdicts"))
    if form == "score":
        return _score_line(case_id, value, spec, judge, line)
    if spec.rubric is None:
        what = "samples need" if form == "samples" else "a distribution needs"
        return line.problem(f"{what} the spec's rubric scale")
    scale = (spec.rubric.scale.min, spec.rubric.scale.max)
    if form == "samples":
        return _samples_line(case_id, value, scale, judge, line)
    return _distribution_line(case_id, value, scale, judge, line)


def _score_line(case_id: str, value: Any, spec: Spec, judge: str, line: _Line) -> tuple[str, Judgment] | Problem:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return line.problem(f"'score' must be a finite number, got {value!r}")
    scale = None if spec.rubric is None else (spec.rubric.scale.min, spec.rubric.scale.max)
    lo, hi = scale if (scale and spec.scoring.method != "verdicts") else (0.0, 1.0)
    if not lo <= value <= hi:
        return line.problem(f"score {value} is outside {lo}..{hi}")
    return case_id, Judgment(case_id=case_id, judge=judge, method="direct", score=float(value) + 0.0, valid=True,
                             details=Details(imported="score"))  # (+ 0.0: -0.0 is 0, not "-0.000" in reports)


def _samples_line(case_id: str, value: Any, scale: tuple[int, int], judge: str,
                  line: _Line) -> tuple[str, Judgment] | Problem:
    """Samples as the judge wrote them: text that is no score is an invalid sample; a score off the scale is
    an error of the file (it was not made on this spec's scale), and so is a value that is neither text nor a
    whole number (true, 3.7, NaN, Infinity: no judge's answer, and no score)."""
    if not isinstance(value, list) or not value:
        return line.problem("'samples' must be a non-empty list")
    odd = [v for v in value if v is not None and not isinstance(v, str) and as_int_score(v) is None]
    if odd:
        return line.problem(f"sample(s) {', '.join(map(json.dumps, odd))}: a sample is a whole number of the scale "
                            "or the text the judge wrote")
    parsed: list[float | None] = []
    off = []
    for v in value:
        s = as_int_score(v)
        if s is not None and not scale[0] <= s <= scale[1]:
            off.append(s)
        parsed.append(float(s) if s is not None and scale[0] <= s <= scale[1] else None)
    if off:
        return line.problem(f"sample(s) {', '.join(map(str, off))} outside the scale {scale[0]}..{scale[1]}")
    good = [p for p in parsed if p is not None]
    if not good:
        return case_id, Judgment(case_id=case_id, judge=judge, method="samples", score=None, valid=False,
                                 reason="no valid sample", samples=tuple(parsed),
                                 details=Details(imported="samples"))
    mean, spread = mean_and_spread(good)
    return case_id, Judgment(case_id=case_id, judge=judge, method="samples", score=mean, valid=True,
                             samples=tuple(parsed), spread=spread,
                             details=Details(imported="samples", invalid_samples=len(parsed) - len(good)))


def _distribution_line(case_id: str, value: Any, scale: tuple[int, int], judge: str,
                       line: _Line) -> tuple[str, Judgment] | Problem:
    if not isinstance(value, dict) or not value:
        return line.problem("'distribution' must be a mapping of score to probability")
    probs: dict[int, float] = {s: 0.0 for s in range(scale[0], scale[1] + 1)}
    for k, p in value.items():
        s = as_int_score(k)
        if s is None:
            return line.problem(f"distribution key {k!r} is not a score (a whole number of the scale "
                                f"{scale[0]}..{scale[1]})")
        if s not in probs:
            return line.problem(f"distribution key {k!r} is outside the scale {scale[0]}..{scale[1]}")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p < 0:
            return line.problem(f"probability of {k!r} must be a number >= 0, got {p!r}")
        if p > 1:
            return line.problem(f"probability of {k!r} is {p}: probabilities are between 0 and 1")
        probs[s] += float(p)
    mass = sum(probs.values())
    if mass > 1 + 1e-6:
        return line.problem(f"the probabilities sum to {mass:g}, more than 1")
    details = Details(imported="distribution")
    if mass <= 0:
        return case_id, Judgment(case_id=case_id, judge=judge, method="logprobs", score=None, valid=False,
                                 reason="no probability on the scale's scores", details=details)
    norm = {s: p / mass for s, p in probs.items()}
    return case_id, Judgment(case_id=case_id, judge=judge, method="logprobs",
                             score=sum(s * p for s, p in norm.items()), valid=True, distribution=norm,
                             valid_mass=mass, details=details)


@frozen
class _Parsed:
    judgments: dict[str, Judgment]  # case id -> judgment, in file order
    forms: dict[str, int]
    digest: str


def read_judgments(parsed: ParsedSpec, path: Path, dataset: Dataset, label: str) -> _Parsed:
    """Every line of an import file as a judgment; DataError listing the lines that are wrong."""
    file = str(path)
    try:
        text = read_text(path, "import file")
        numbered = list(lines(text, "import file"))
    except ReadError as exc:
        raise DataError(problems=[Problem(str(exc), file=file, line=exc.line)]) from None
    known = {c.id for c in dataset.cases}
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    judgments: dict[str, Judgment] = {}
    forms: dict[str, list[int]] = {}
    for n, line_text in numbered:
        if not line_text.strip():
            continue
        if len(problems) > MAX_PROBLEMS:
            problems[-1] = Problem(f"more problems: reading stopped at line {n}", file=file)
            break
        line = _Line(file, n, text)
        try:
            obj = json.loads(line_text, object_pairs_hook=keys_once)
        except RecursionError:
            problems.append(line.problem("JSON nested too deeply"))
            continue
        except KeyTwice as exc:
            problems.append(line.problem(str(exc)))
            continue
        except ValueError as exc:
            problems.append(line.problem(f"not JSON: {getattr(exc, 'msg', exc)}"))
            continue
        if lone_surrogate(line_text, obj):
            problems.append(line.problem(f"a value {SURROGATE}"))
            continue
        got = parse_line(redacted_line(obj), parsed.spec, label, line)
        if isinstance(got, Problem):
            problems.append(got)
            continue
        case_id, judgment = got
        if case_id not in known:
            same = [k for k in known if unicodedata.normalize("NFC", k) == unicodedata.normalize("NFC", case_id)]
            close = difflib.get_close_matches(case_id, list(known), n=1)
            hint = (f"the data's {same[0]!r} differs only in how its accents are encoded (Unicode normalisation, "
                    "NFC against NFD): write the id as the data does" if same else
                    f"did you mean {close[0]!r}?" if close else None)
            problems.append(line.problem(f"case {case_id!r} is not in {parsed.data_display}", hint))
            continue
        if case_id in seen:
            problems.append(line.problem(f"case {case_id!r} appears twice (first on line {seen[case_id]})"))
            continue
        seen[case_id] = n
        judgments[case_id] = judgment
        forms.setdefault(next(f for f in FORMS if f in obj), []).append(n)
    problems += _mixed_forms(forms, file, text)[:max(0, MAX_PROBLEMS - len(problems))]
    if problems:
        raise DataError(problems=problems)
    if not judgments:
        raise DataError(problems=[Problem("no judgments in the file", file=file)])
    return _Parsed(judgments, {f: len(ns) for f, ns in forms.items()}, hashlib.sha256(text.encode("utf-8")).hexdigest())


def _mixed_forms(forms: dict[str, list[int]], file: str, text: str) -> list[Problem]:
    """One form per file (error lines aside): the lines whose form is not the file's most common one."""
    counted = {f: ns for f, ns in forms.items() if f != "error"}
    if len(counted) < 2:
        return []
    main = max(counted, key=lambda f: (len(counted[f]), -counted[f][0]))
    out = []
    for form, numbers in counted.items():
        if form != main:
            out += [_Line(file, n, text).problem(
                f"a {form!r} line in a file of {main!r} lines: one form per file, not a mix",
                "import each form from its own file (a run's judgments are made one way)") for n in numbers]
    return sorted(out, key=lambda p: p.line or 0)


def import_judgments(parsed: ParsedSpec, path: Path, db: Path, judge: str | None = None,
                     ref: str = "") -> ImportResult:
    prepare_output(db, "database")
    dataset = read_cases(parsed)
    label = judge or (parsed.spec.panel[0].label if parsed.spec.panel else "imported")
    lines = read_judgments(parsed, path, dataset, label)
    cases = [c for c in dataset.cases if c.id in lines.judgments]
    missing = tuple(c.id for c in dataset.cases if c.id not in lines.judgments)
    ordered = [lines.judgments[c.id] for c in cases]
    valid = sum(1 for j in ordered if j.valid)

    def result(run_id: str, reused: bool) -> ImportResult:
        return ImportResult(run_id, reused, len(dataset.cases), len(ordered), valid, len(ordered) - valid, missing,
                            lines.forms)

    with Store(db) as store:
        for run in store.find_runs(spec_name=parsed.name, judging_fp=parsed.judging_fp, kind="import"):
            if run.source_sha256 == lines.digest and run.labels == (label,) and run.status == "completed" \
                    and run.analysis_fp == parsed.analysis_fp and run.data_sha256 == dataset.sha256:
                return result(run.run_id, True)
        # the same import gives the same run id everywhere, so its reports are identical on every machine; the
        # spec's name and version are part of it, as they are of a run's: two specs (or versions) that judge and
        # analyse alike once shared an id, and importing into the second deleted the first one's run
        run_id = "run_" + hashlib.sha256(f"{parsed.name}|{parsed.spec.version}|{parsed.judging_fp}|"
                                         f"{parsed.analysis_fp}|{dataset.sha256}|{lines.digest}|"
                                         f"{label}".encode()).hexdigest()[:20]
        if store.get_run(run_id) is not None:
            store.delete_run(run_id)  # an earlier, interrupted import of the same file
        info = RunInfo(run_id=run_id, kind="import", spec_name=parsed.name, spec_version=parsed.spec.version,
                       spec_ref=ref or parsed.name, spec_file=parsed.source.report_name, judging_fp=parsed.judging_fp,
                       analysis_fp=parsed.analysis_fp, resolved=parsed.resolved(), judges=(RunJudge(label),),
                       method=parsed.spec.scoring.method, data_path=str(parsed.data_path),
                       data_sha256=dataset.sha256, tool_version=__version__, git_commit=parsed.source.commit(),
                       settings=RunSettings(cases=len(cases), missing=len(missing)), source_file=str(path),
                       source_sha256=lines.digest, status="running")
        # missing cases stay part of the run's denominator; each case's split is stored, as a run's is
        store.create_run(info, dataset.cases, splits=assign_splits(parsed.spec, dataset.cases))
        store.save_findings(run_id, precheck(parsed, dataset.cases))
        store.save_judgments(run_id, ordered)
        store.finish_run(run_id, "completed")
    return result(run_id, False)
