"""A gate as a JUnit XML file, for CI systems that show test results."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from geval_spec.analysis.results import GateBlock


def to_junit(spec_name: str, gate: GateBlock) -> str:
    """One test case per gate: failed when the gate failed; the notes (could flip, unseen data) go with it."""
    name = f"{gate.metric} {gate.level} {gate.split} >= {gate.threshold}"
    why = "; ".join([gate.reason, *gate.notes])
    failure = "" if gate.passed else f"<failure message={quoteattr(why)}>{escape(why)}</failure>"
    out = f"<system-out>{escape('; '.join(gate.notes))}</system-out>" if gate.passed and gate.notes else ""
    body = (f'<testcase classname={quoteattr("geval-spec." + spec_name)} name={quoteattr(name)}>{failure}{out}'
            "</testcase>")
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            f'<testsuites><testsuite name={quoteattr("geval-spec")} tests="1" failures="{0 if gate.passed else 1}" '
            f'errors="0">{body}</testsuite></testsuites>\n')
