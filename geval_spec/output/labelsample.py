"""A label sample as CSV, for an annotator to fill in (standard library ``csv``, ``\\n`` line ends)."""

from __future__ import annotations

import csv
import io

from geval_spec.analysis.labelsample import LabelSample


def to_csv(sample: LabelSample) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(sample.columns)
    writer.writerows(sample.rows)
    return buffer.getvalue()
