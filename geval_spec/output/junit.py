"""A gate as a JUnit XML file, for CI systems that show test results."""

from __future__ import annotations

import re

from geval_spec.analysis.verdict import GateBlock


# Characters XML 1.0 allows nowhere, not even as a reference: C0 controls but tab, newline and carriage return;
# lone surrogates; U+FFFE and U+FFFF. A split or case named with one (YAML's "\x01") made the whole file unreadable
# to a CI system's parser; each is written as U+FFFD, the replacement character.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


# The two escapes of xml.sax.saxutils, written out: importing that module imports urllib.request, http.client and
# ssl, about 20-30 ms of every report (tests/test_report.py checks that both give saxutils' output where XML can
# hold the text).

def escape(text: str) -> str:
    """XML character data: ``&``, ``<`` and ``>`` as entities, and what XML cannot hold as U+FFFD."""
    return _NOT_XML.sub("\ufffd", text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;"))


def quoteattr(text: str) -> str:
    """An XML attribute's value with its quotes: escaped as character data, with newlines, carriage returns and
    tabs as character references (a parser would make them spaces); in double quotes, or in single ones when it
    holds a double quote and no single one (with both, its double quotes escaped)."""
    value = escape(text).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    return '"' + value.replace('"', "&quot;") + '"'


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
