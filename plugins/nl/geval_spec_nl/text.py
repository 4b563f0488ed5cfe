"""Words with their positions, and the parts of a text that are quotations."""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*", re.UNICODE)
QUOTES = (("\"", "\""), ("“", "”"), ("„", "”"), ("«", "»"), ("‘", "’"))
SENTENCE_END = re.compile(r"[.!?;:]\s")


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int

    @property
    def lower(self) -> str:
        return self.text.lower()


def tokens(text: str) -> list[Token]:
    return [Token(m.group(0), m.start(), m.end()) for m in WORD.finditer(text)]


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """Spans of reported speech in double quotes (and 'single' quotes opened after a space or a colon)."""
    spans = []
    for opening, closing in QUOTES:
        pos = 0
        while True:
            i = text.find(opening, pos)
            if i < 0:
                break
            j = text.find(closing, i + 1)
            if j < 0:
                break
            spans.append((i, j + 1))
            pos = j + 1
    for m in re.finditer(r"(?:(?<=\s)|(?<=:)|^)'([^'\n]{1,200})'(?=[\s.,;:!?)]|$)", text):
        spans.append((m.start(), m.end()))
    return sorted(spans)


def inside(spans: list[tuple[int, int]], pos: int) -> bool:
    return any(a <= pos < b for a, b in spans)


def separated(text: str, a: Token, b: Token) -> bool:
    """True when anything but spaces lies between two tokens (punctuation, a line break)."""
    gap = text[a.end:b.start]
    return gap.strip() != "" or "\n" in gap
