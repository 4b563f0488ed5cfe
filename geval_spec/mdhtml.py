"""The Markdown subset the reports use, converted to HTML.

Headings (``#``), paragraphs, ``- `` lists, ``> `` quotes, pipe tables, code
spans, ``**bold**`` and backslash escapes: nothing else. Every piece of text
is HTML-escaped after its entities are normalised (``html.unescape`` first),
so text that the Markdown already escaped is not escaped twice and raw text
never reaches the page as markup. No link or image syntax is produced, so the
page cannot load anything.
"""

from __future__ import annotations

import html
import re

_CODE = re.compile(r"(?<!\\)`([^`]*)(?<!\\)`")
_BOLD = re.compile(r"(?<!\\)\*\*(.+?)(?<!\\)\*\*")
_ESCAPED = re.compile(r"\\(.)")
_CELL = re.compile(r"(?<!\\)\|")


def _text(raw: str) -> str:
    return html.escape(html.unescape(_ESCAPED.sub(r"\1", raw)), quote=True)


def _emphasis(raw: str) -> str:
    out, pos = [], 0
    for m in _BOLD.finditer(raw):
        out.append(_text(raw[pos:m.start()]))
        out.append(f"<strong>{_text(m.group(1))}</strong>")
        pos = m.end()
    out.append(_text(raw[pos:]))
    return "".join(out)


def inline(raw: str) -> str:
    out, pos = [], 0
    for m in _CODE.finditer(raw):
        out.append(_emphasis(raw[pos:m.start()]))
        out.append(f"<code>{html.escape(html.unescape(m.group(1)), quote=True)}</code>")
        pos = m.end()
    out.append(_emphasis(raw[pos:]))
    return "".join(out)


def _cells(line: str) -> list[str]:
    parts = _CELL.split(line.strip())
    return [p.strip() for p in parts[1:-1]]


def render(markdown: str) -> str:
    lines = markdown.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{inline(line[level:].strip())}</h{level}>")
            i += 1
        elif line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|\s*:?-{3,}", lines[i + 1]):
            aligns = ["right" if c.endswith(":") else "left" for c in _cells(lines[i + 1])]
            head = "".join(f"<th>{inline(c)}</th>" for c in _cells(line))
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = _cells(lines[i])
                rows.append("<tr>" + "".join(
                    f'<td style="text-align:{aligns[k] if k < len(aligns) else "left"}">{inline(c)}</td>'
                    for k, c in enumerate(cells)) + "</tr>")
                i += 1
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{inline(lines[i][2:])}</li>")
                i += 1
            out.append(f"<ul>{''.join(items)}</ul>")
        elif line.startswith("> "):
            quoted = []
            while i < len(lines) and lines[i].startswith("> "):
                quoted.append(inline(lines[i][2:]))
                i += 1
            out.append(f"<blockquote>{' '.join(quoted)}</blockquote>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "- ", "> ")):
                para.append(inline(lines[i]))
                i += 1
            out.append(f"<p>{' '.join(para)}</p>")
    return "\n".join(out)
