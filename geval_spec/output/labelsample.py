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
    case texts come from anyone's data) gets a ``'`` in front, which spreadsheets show as text. A text holding a
    carriage return is quoted as one holding a line feed is: ``csv`` quotes only for its own line end (``\\n``
    here), and a lone ``\\r`` then split the case's row in two for every reader, the part after it a row of its
    own that could start with a formula."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for row in (sample.columns, *sample.rows):
        cells = [_inert(c) for c in row]
        if any(isinstance(c, str) and "\r" in c for c in cells):
            buffer.write(",".join(_quoted(c) for c in cells) + "\n")
        else:
            writer.writerow(cells)
    return buffer.getvalue()


def _quoted(cell: object) -> str:
    """A cell as ``csv`` writes it, quoted when it holds a carriage return, line feed, comma or quote."""
    text = "" if cell is None else str(cell)
    return '"' + text.replace('"', '""') + '"' if any(ch in text for ch in '\r\n,"') else text


def _inert(cell: object) -> object:
    if isinstance(cell, str) and cell.startswith(FORMULA_START) and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell
