"""A label sample as CSV, for an annotator to fill in (standard library ``csv``, ``\\n`` line ends)."""

from __future__ import annotations

import csv
import io
import re

from geval_spec.analysis.labelsample import LabelSample


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def to_csv(sample: LabelSample) -> str:
    """The sample as CSV; a text that a spreadsheet would run as a formula (``=HYPERLINK(...)``, ``@SUM(...)``:
    case texts come from anyone's data) gets a ``'`` in front, which spreadsheets show as text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([_inert(c) for c in sample.columns])
    writer.writerows([_inert(c) for c in row] for row in sample.rows)
    return buffer.getvalue()


def _inert(cell: object) -> object:
    if isinstance(cell, str) and cell.startswith(FORMULA_START) and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell
