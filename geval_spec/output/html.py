"""The HTML report: the Markdown report converted to HTML, with inline SVG plots, in one self-contained page.

The Markdown subset the reports use is converted here:

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

from geval_spec.analysis.results import Calibration
from geval_spec.output import plots
from geval_spec.output.report import to_markdown

# a code span: a fence of backticks (not escaped, not part of a longer run), then the same fence (md_code fences
# a value with backticks in it longer); inside, no escapes: text as written (CommonMark)
_CODE = re.compile(r"(?<![\\`])(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_BOLD = re.compile(r"(?<!\\)\*\*(.+?)(?<!\\)\*\*")
# a Markdown escape: a backslash before ASCII punctuation (CommonMark); before anything else it is the backslash of
# a character written out (``\\x1b``, ``\\u202e``: markdown.visible), which the HTML shows as it is
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
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
        body = m.group(2)
        if len(body) > 2 and body.startswith(" ") and body.endswith(" ") and body.strip():
            body = body[1:-1]  # the padding md_code adds around a value that starts or ends with a backtick
        out.append(f"<code>{html.escape(body, quote=True)}</code>")
        pos = m.end()
    out.append(_emphasis(raw[pos:]))
    return "".join(out)


def _cells(line: str) -> list[str]:
    parts = _CELL.split(line.strip())
    return [p.strip() for p in parts[1:-1]]


def render(markdown: str) -> str:
    lines = markdown.split("\n")  # (not splitlines: a report's lines end at \n only)
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
        else:  # (a line that starts like a table but is none is text too: each pass takes at least one line)
            para = [inline(line)]
            i += 1
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "- ", "> ")):
                para.append(inline(lines[i]))
                i += 1
            out.append(f"<p>{' '.join(para)}</p>")
    return "\n".join(out)


CSS = ("body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;background:#fafafa;color:#1a1a1a}"
       "main{max-width:1100px;margin:0 auto;padding:24px}table{border-collapse:collapse;margin:8px 0 16px}"
       "td,th{border:1px solid #ddd;padding:4px 8px;font-size:14px}th{background:#f0f0f0}"
       "code{background:#eee;padding:1px 4px;border-radius:3px}blockquote{border-left:4px solid #e0a800;margin:8px 0;"
       "padding:4px 12px;background:#fff8e1}figure{display:inline-block;margin:8px;vertical-align:top;background:#fff;"
       "border:1px solid #ddd;padding:8px}figcaption{font-weight:600;margin-bottom:4px}svg{max-width:100%;height:auto}"
       "h2{border-bottom:1px solid #ddd;padding-bottom:4px}"
       ".gate{border-radius:6px;padding:12px 16px;margin:12px 0 16px;font-size:16px;border:2px solid}"
       ".gate strong{font-size:20px;margin-right:8px}"
       ".gate.passed{background:#e7f6ea;border-color:#2e7d32;color:#1b5e20}"
       ".gate.failed{background:#fdecea;border-color:#c62828;color:#8e1b1b}"
       ".gate p{margin:6px 0 0;font-size:14px;color:#333}")


def gate_banner(r: Calibration) -> str:
    """The verdict first: green when the gate passed, red when it failed, with its reason and notes."""
    g = r.gate
    verdict = "PASSED" if g.passed else "FAILED"
    notes = "".join(f"<p>{html.escape(note)}</p>" for note in g.notes)
    return (f'<section class="gate {"passed" if g.passed else "failed"}" role="status">'
            f"<strong>Gate {verdict}</strong>{html.escape(g.reason)}{notes}</section>")


def to_html(r: Calibration) -> str:
    """One self-contained file: inline CSS, inline SVG plots, no scripts, nothing loaded from elsewhere.

    The page starts with the title, the gate's verdict (coloured) and the plots; the tables follow.
    """
    body = render(to_markdown(r))
    figures = "".join(f"<figure><figcaption>{html.escape(title)}</figcaption>{svg}</figure>"
                      for title, svg in plots.all_plots(r).items())
    top = gate_banner(r) + (f'\n<section class="plots"><h2>Plots</h2>{figures}</section>' if figures else "")
    head, sep, rest = body.partition("</h1>")
    page = f"{head}{sep}\n{top}{rest}" if sep else f"{top}\n{body}"
    title = html.escape(f"{r.spec.name} v{r.spec.version}: calibration report")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">\n"
            f"<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n{page}\n</main>\n</body>\n</html>\n")
