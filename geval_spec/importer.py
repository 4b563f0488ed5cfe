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
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .errors import DataError, Problem
from .load import ParsedSpec
from .precheck import precheck
from .run import _git_commit
from .scoring import Judgment, as_int_score, judge_verdicts, verdicts_from_items
from .store import RunInfo, Store

FORMS = ("score", "samples", "distribution", "verdicts", "error")
OPTIONAL = ("judge", "raw", "reason")


@dataclass(frozen=True)
class ImportResult:
    run_id: str
    reused: bool
    cases: int
    imported: int
    valid: int
    invalid: int
    missing: tuple[str, ...]
    forms: dict[str, int]


def _problem(file: str, line: int, message: str, hint: str | None = None, text: str | None = None) -> Problem:
    return Problem(message=message, file=file, line=line, hint=hint, source=text)


def parse_line(obj: Any, spec, judge: str, file: str, n: int, text: str) -> tuple[str, Judgment] | Problem:
    import difflib

    if not isinstance(obj, dict):
        return _problem(file, n, "each line must be a JSON object", text=text)
    unknown = [k for k in obj if k not in ("case_id", *FORMS, *OPTIONAL)]
    if unknown:
        close = difflib.get_close_matches(unknown[0], ["case_id", *FORMS, *OPTIONAL], n=1)
        return _problem(file, n, f"unknown key {unknown[0]!r}", f"did you mean {close[0]!r}?" if close else
                        f"keys: case_id and one of {', '.join(FORMS)}", text)
    case_id = obj.get("case_id")
    if isinstance(case_id, (int, float)) and not isinstance(case_id, bool):
        case_id = str(int(case_id)) if float(case_id).is_integer() else str(case_id)
    if not isinstance(case_id, str) or not case_id:
        return _problem(file, n, "missing 'case_id'", text=text)
    forms = [f for f in FORMS if f in obj]
    if len(forms) != 1:
        return _problem(file, n, f"give exactly one of {', '.join(FORMS)}" + (f" (found {', '.join(forms)})"
                                                                             if forms else ""), text=text)
    form = forms[0]
    value = obj[form]
    method = spec.scoring.method
    scale = None if spec.rubric is None else (spec.rubric.scale.min, spec.rubric.scale.max)
    if form == "error":
        if not isinstance(value, str) or not value:
            return _problem(file, n, "'error' must be a non-empty text", text=text)
        return case_id, Judgment.invalid(case_id, judge, method, value, imported="error")
    if form == "score":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return _problem(file, n, f"'score' must be a number, got {value!r}", text=text)
        lo, hi = scale if (scale and method != "verdicts") else (0.0, 1.0)
        if not lo <= value <= hi:
            return _problem(file, n, f"score {value} is outside {lo}..{hi}", text=text)
        return case_id, Judgment(case_id=case_id, judge=judge, method="direct", score=float(value), valid=True,
                                 details={"imported": "score"})
    if form == "samples":
        if scale is None:
            return _problem(file, n, "samples need the spec's rubric scale", text=text)
        if not isinstance(value, list) or not value:
            return _problem(file, n, "'samples' must be a non-empty list", text=text)
        parsed = []
        for v in value:
            s = as_int_score(v)
            parsed.append(float(s) if s is not None and scale[0] <= s <= scale[1] else None)
        good = [p for p in parsed if p is not None]
        if not good:
            return case_id, Judgment(case_id=case_id, judge=judge, method="samples", score=None, valid=False,
                                     reason="no valid sample", samples=tuple(parsed), details={"imported": "samples"})
        mean = sum(good) / len(good)
        spread = math.sqrt(sum((g - mean) ** 2 for g in good) / (len(good) - 1)) if len(good) > 1 else 0.0
        return case_id, Judgment(case_id=case_id, judge=judge, method="samples", score=mean, valid=True,
                                 samples=tuple(parsed), spread=spread,
                                 details={"imported": "samples", "invalid_samples": len(parsed) - len(good)})
    if form == "distribution":
        if scale is None:
            return _problem(file, n, "a distribution needs the spec's rubric scale", text=text)
        if not isinstance(value, dict) or not value:
            return _problem(file, n, "'distribution' must be a mapping of score to probability", text=text)
        probs: dict[int, float] = {s: 0.0 for s in range(scale[0], scale[1] + 1)}
        total = 0.0
        for k, p in value.items():
            if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0 or not math.isfinite(p):
                return _problem(file, n, f"probability of {k!r} must be a number >= 0", text=text)
            total += p
            s = as_int_score(k)
            if s in probs:
                probs[s] += float(p)
        mass = sum(probs.values())
        if mass <= 0:
            return case_id, Judgment(case_id=case_id, judge=judge, method="logprobs", score=None, valid=False,
                                     reason="no probability on the scale's scores",
                                     details={"imported": "distribution"})
        norm = {s: p / mass for s, p in probs.items()}
        return case_id, Judgment(case_id=case_id, judge=judge, method="logprobs",
                                 score=sum(s * p for s, p in norm.items()), valid=True, distribution=norm,
                                 valid_mass=mass / total if total else None, details={"imported": "distribution"})
    # verdicts
    if not isinstance(value, list):
        return _problem(file, n, "'verdicts' must be a list", text=text)
    verdicts, reason = verdicts_from_items(value)
    if verdicts is None:
        return _problem(file, n, f"verdicts: {reason}", text=text)
    j = judge_verdicts(case_id, judge, verdicts, None, spec.aggregation)
    return case_id, Judgment(case_id=j.case_id, judge=j.judge, method=j.method, score=j.score, valid=j.valid,
                             reason=j.reason, verdicts=j.verdicts, details={"imported": "verdicts"})


def import_judgments(parsed: ParsedSpec, path: Path, db: Path, judge: str | None = None,
                     ref: str = "") -> ImportResult:
    file = str(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise DataError(problems=[Problem(f"cannot read: {exc.strerror}", file=file)]) from None
    except UnicodeDecodeError:
        raise DataError(problems=[Problem("not UTF-8 text", file=file)]) from None
    dataset = parsed.load_data()
    known = {c.id for c in dataset.cases}
    label = judge or (parsed.spec.panel[0].label if parsed.spec.panel else "imported")
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    judgments: dict[str, Judgment] = {}
    forms: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            problems.append(_problem(file, n, f"not JSON: {exc.msg}", text=text))
            continue
        got = parse_line(obj, parsed.spec, label, file, n, text)
        if isinstance(got, Problem):
            problems.append(got)
            continue
        case_id, judgment = got
        if case_id not in known:
            import difflib

            close = difflib.get_close_matches(case_id, list(known), n=1)
            problems.append(_problem(file, n, f"case {case_id!r} is not in {parsed.data_display}",
                                     f"did you mean {close[0]!r}?" if close else None, text))
            continue
        if case_id in seen:
            problems.append(_problem(file, n, f"case {case_id!r} appears twice (first on line {seen[case_id]})",
                                     text=text))
            continue
        seen[case_id] = n
        judgments[case_id] = judgment
        form = next(f for f in FORMS if f in obj)
        forms[form] = forms.get(form, 0) + 1
    if problems:
        if len(problems) > 20:
            problems = problems[:20] + [Problem(f"... and {len(problems) - 20} more problems", file=file)]
        raise DataError(problems=problems)
    if not judgments:
        raise DataError(problems=[Problem("no judgments in the file", file=file)])
    cases = [c for c in dataset.cases if c.id in judgments]
    missing = tuple(c.id for c in dataset.cases if c.id not in judgments)
    ordered = [judgments[c.id] for c in cases]
    digest = hashlib.sha256(raw).hexdigest()
    with Store(db) as store:
        for run in store.find_runs(spec_name=parsed.name, judging_fp=parsed.judging_fp, kind="import"):
            if run.source_sha256 == digest and run.judges == [label] and run.status == "completed" \
                    and run.analysis_fp == parsed.analysis_fp and run.data_sha256 == dataset.sha256:
                valid = sum(1 for j in ordered if j.valid)
                return ImportResult(run.run_id, True, len(dataset.cases), len(ordered), valid, len(ordered) - valid,
                                    missing, forms)
        # the same import gives the same run id everywhere, so its reports are identical on every machine
        run_id = "run_" + hashlib.sha256(f"{parsed.judging_fp}|{parsed.analysis_fp}|{dataset.sha256}|{digest}|"
                                         f"{label}".encode()).hexdigest()[:20]
        if store.get_run(run_id) is not None:
            store.delete_run(run_id)  # an earlier, interrupted import of the same file
        info = RunInfo(run_id=run_id, kind="import", spec_name=parsed.name, spec_version=parsed.spec.version,
                       spec_ref=ref or parsed.name, spec_file=parsed.source.display, judging_fp=parsed.judging_fp,
                       analysis_fp=parsed.analysis_fp, spec_json=parsed.resolved(), judges=[label],
                       method=parsed.spec.scoring.method, data_path=str(parsed.data_path),
                       data_sha256=dataset.sha256, tool_version=__version__, git_commit=_git_commit(parsed),
                       options={"cases": len(cases), "missing": len(missing)}, source_file=file,
                       source_sha256=digest, status="running")
        store.create_run(info, dataset.cases, [])  # missing cases stay part of the run's denominator
        store.save_findings(run_id, precheck(parsed, dataset.cases))
        store.save_judgments(run_id, ordered)
        store.finish_run(run_id, "completed")
    valid = sum(1 for j in ordered if j.valid)
    return ImportResult(run_id, False, len(dataset.cases), len(ordered), valid, len(ordered) - valid, missing, forms)
