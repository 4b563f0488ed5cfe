"""Deterministic language checks on each candidate, before the judge is called.

The spec's ``language.code`` picks a checker registered by a plugin (the Dutch
rules ship in ``plugins/nl``). Findings are rendered into the prompt (a
pre-checks section after the case text), stored per case with the run, and
summarised in the report; ``language.penalty`` can subtract a score per
finding at analysis time.
"""

from __future__ import annotations

from typing import Sequence

from geval_spec.dataset.cases import Case
from geval_spec.errors import SpecError
from geval_spec.plugins import Finding, load_plugins
from geval_spec.spec.load import ParsedSpec

Findings = dict[str, tuple[Finding, ...]]  # case id -> its findings (cases without findings are left out)


def precheck(parsed: ParsedSpec, cases: Sequence[Case]) -> Findings:
    """Findings per case id; {} without language rules."""
    spec = parsed.spec
    language = spec.language
    if language is None:
        return {}
    registry = load_plugins()
    checker = registry.checker_for(language.code)
    if checker is None:
        raise SpecError(problems=[parsed.key_problem(("language", "code"),
                                                     registry.missing_language(language.code) or "")])
    out: Findings = {}
    for case in cases:
        found: list[Finding] = []
        if spec.pairwise is not None:
            for var in spec.pairwise.candidates:
                found += [Finding(f.kind, f"{var}: {f.message}", f.start, f.end, f.text)
                          for f in checker(language, case.fields.get(var, ""))]
        else:
            found = list(checker(language, case.fields.get(spec.candidate_field, "")))
        if found:
            out[case.id] = tuple(found)
    return out
