"""The Markdown pieces every report shares: escaped case text, tables, fixed number formats."""

from __future__ import annotations

import html
import re
from typing import Any, Sequence

from geval_spec.analysis.results import Interval, SweepTest
from geval_spec.redact import UNSEEN


def visible(text: str) -> str:
    """``text`` with control characters and bidirectional marks written out (``\\x1b``, ``\\u202e``): a case
    text in a report cannot move the cursor, colour a terminal or reorder what is shown around it."""
    return UNSEEN.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else
                       f"\\u{ord(m.group()):04x}", text)


def md_escape(text: Any) -> str:
    """Case text inside a Markdown table: no HTML, no table breaks, no emphasis surprises, nothing unseen."""
    s = html.escape(str(text), quote=False)
    for ch in ("\\", "|", "`", "*", "_", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return visible(s.replace("\r\n", " ").replace("\n", " ").replace("\r", " "))


def md_code(text: Any) -> str:
    """``text`` as a Markdown code span it cannot leave: a fence one backtick longer than any run of backticks in
    it (a judge label or file name with a backtick once closed the span and let HTML through). Inside a code span
    CommonMark shows HTML and escapes as written; line breaks become spaces."""
    s = visible(str(text).replace("\r", " ").replace("\n", " "))
    runs = [len(m) for m in re.findall(r"`+", s)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if s.startswith(("`", " ")) or s.endswith(("`", " ")) or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table; a column name ending in ':' is right-aligned. Cells are formatted already."""
    names = [c.rstrip(":") for c in columns]
    align = ["---:" if c.endswith(":") else "---" for c in columns]
    out = ["| " + " | ".join(names) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return out


def f3(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def est_md(e: Interval | SweepTest) -> str:
    if e.value is None:
        return "-"
    if e.ci_low is None:
        return f3(e.value)
    return f"{f3(e.value)} [{f3(e.ci_low)}, {f3(e.ci_high)}]"


def document(lines: list[str]) -> str:
    """Lines joined into a file: no trailing blank lines, one final newline."""
    return "\n".join(lines).rstrip() + "\n"
