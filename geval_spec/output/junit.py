"""A gate as a JUnit XML file, for CI systems that show test results."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from geval_spec.analysis.results import GateBlock


def to_junit(spec_name: str, gate: GateBlock) -> str:
    """One test case per gate: failed when the gate failed."""
    name = f"{gate.metric} {gate.level} {gate.split} >= {gate.threshold}"
    failure = "" if gate.passed else f"<failure message={quoteattr(gate.reason)}>{escape(gate.reason)}</failure>"
    body = f'<testcase classname={quoteattr("geval-spec." + spec_name)} name={quoteattr(name)}>{failure}</testcase>'
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            f'<testsuites><testsuite name={quoteattr("geval-spec")} tests="1" failures="{0 if gate.passed else 1}" '
            f'errors="0">{body}</testsuite></testsuites>\n')
