"""An :class:`~geval_spec.analysis.results.Audit` as Markdown."""

from __future__ import annotations

from geval_spec.analysis.audit import Audit
from geval_spec.output.markdown import document, f3
from geval_spec.output.report import precision_line

MAX_GROUPS_SHOWN = 20


def to_markdown(result: Audit) -> str:
    s, a, z = result.splits, result.agreement, result.sample_size
    lines = [f"# audit: {result.spec} ({result.cases.n} cases, {result.cases.labelled} with a human score)", "",
             "## Splits", ""]
    if s.by is None:
        lines.append("no splits defined: the gate is judged on all cases, the same ones any tuning looked at")
    else:
        lines.append(f"split by {s.by}; " + ", ".join(f"{k} {v}" for k, v in s.counts.items()))
        lines.append(f"duplicate ids: {', '.join(s.duplicate_ids) or 'none'}")
        if s.overlapping_groups:
            lines.append(f"source groups in more than one split ({len(s.overlapping_groups)}):")
            lines += [f"  {group}: {', '.join(names)}"
                      for group, names in list(s.overlapping_groups.items())[:MAX_GROUPS_SHOWN]]
        else:
            lines.append("source groups in more than one split: none")
        empty = [f"{m}{' (not in split.fractions)' if m in s.undeclared else ''}" for m in s.missing_splits]
        lines.append(f"splits without cases: {', '.join(empty) or 'none'}")
    lines += ["", "## Human agreement", ""]
    if a is None:
        lines.append("one human score column: agreement between raters cannot be measured "
                     "(list the rater columns in data.human to measure it)")
    else:
        lines.append(f"Krippendorff's alpha over {len(a.raters)} raters, {a.n} cases: interval "
                     f"{f3(a.alpha_interval)}, ordinal {f3(a.alpha_ordinal)}")
        if a.warning:
            lines.append(f"warning: {a.warning}")
    lines += ["", "## Sample size", ""]
    if z.required is None:
        lines.append(z.method)
    else:
        has = f"{z.available} labelled cases" if z.unit == "cases" else f"{z.available_units} {z.unit}"
        lines += [f"to tell {z.alternative} from 0.5: {z.required} {z.unit}; the {z.split} split has {has}: "
                  + (f"enough to tell {z.alternative} from 0.5" if z.enough else
                     f"NOT enough to tell {z.alternative} from 0.5"),
                  f"method: {z.method}", f"formula: {z.formula}"]
    line = precision_line(z)
    if line is not None and z.precision is not None:
        lines += [line, f"formula: {z.precision.formula}"]
    return document(lines)
