"""Stage: deterministic language checks on each candidate, before the judge is called.

The spec's ``language.code`` picks a checker registered by a plugin (the Dutch
rules ship in ``plugins/nl``). Findings are rendered into the prompt (a
pre-checks section after the case text), stored per case with the run, and
summarised in the report; ``language.penalty`` can subtract a score per
finding at analysis time.
"""

from __future__ import annotations

from typing import Sequence

from .data import Case
from .errors import SpecError
from .plugins import Finding, load_plugins


def checked_text(case: Case) -> str:
    fields = case.fields
    if "candidate" in fields:
        return fields["candidate"]
    return next(iter(fields.values()), "")


def precheck(parsed, cases: Sequence[Case]) -> dict[str, list[Finding]]:
    """Findings per case id (cases without findings are left out); {} without language rules."""
    language = parsed.spec.language
    if language is None:
        return {}
    registry = load_plugins()
    checker = registry.checker_for(language.code)
    if checker is None:
        failed = "; ".join(f"{n}: {e}" for n, e in registry.failed)
        raise SpecError(problems=[parsed.key_problem(
            ("language", "code"), f"no installed plugin checks language {language.code!r}"
            + (f" (plugins that failed to load: {failed})" if failed else "")
            + "; the Dutch rules install with: pip install -e plugins/nl")])
    out: dict[str, list[Finding]] = {}
    for case in cases:
        if parsed.spec.pairwise is not None:
            found = []
            for var in parsed.spec.pairwise.candidates:
                found += [Finding(f.kind, f"{var}: {f.message}", f.start, f.end, f.text)
                          for f in checker(language, case.fields.get(var, ""))]
        else:
            found = checker(language, checked_text(case))
        if found:
            out[case.id] = list(found)
    return out
