"""Words with their positions, and the parts of a text that are quotations."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterable

# A word: letters, with the combining marks and the invisible format characters (zero-width joiner and non-joiner,
# zero-width space, word joiner, soft hyphen) written inside it: "je" with a combining accent or a joiner inside is
# one word, as it reads, not two.
MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"  # combining marks (a character class's)
FORMAT_CHARS = "\u00ad\u200b-\u200d\u2060\ufeff"
_INNER = MARKS + FORMAT_CHARS
_LETTERS = rf"[^\W\d_][^\W\d_{_INNER}]*(?:[{_INNER}]+[^\W\d_]*)*"
WORD = re.compile(rf"{_LETTERS}(?:['’-]{_LETTERS})*", re.UNICODE)
_FORMAT = re.compile(f"[{FORMAT_CHARS}]")
QUOTES = (("\"", "\""), ("“", "”"), ("„", "”"), ("«", "»"), ("‘", "’"))
SENTENCE_END = re.compile(r"[.!?;:]\s")


@dataclass(frozen=True)
class Token:
    """A word of a text and where it stands (character offsets)."""

    text: str
    start: int
    end: int

    @property
    def clean(self) -> str:
        """The word in NFC without invisible format characters: the same for every way of writing it."""
        return unicodedata.normalize("NFC", _FORMAT.sub("", self.text))

    @property
    def lower(self) -> str:
        return self.clean.lower()

    @property
    def key(self) -> str:
        """The word in lower case without accents: an emphasised ``jé``, ``jíj`` or ``ú`` is the pronoun."""
        return "".join(ch for ch in unicodedata.normalize("NFD", self.lower) if not unicodedata.combining(ch))


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


class Covered:
    """Spans of a text, asked about a position or a span at a time in logarithmic time: a text of n words with
    n quotations made a scan of every span per word, tens of seconds for a 120 KB candidate."""

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for a, b in sorted(spans):
            if merged and a < merged[-1][1]:  # overlapping: one span (adjacent ones stay apart)
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.starts = [a for a, _ in merged]
        self.ends = [b for _, b in merged]

    def inside(self, pos: int) -> bool:
        """Whether some span holds ``pos`` (``a <= pos < b``)."""
        i = bisect_right(self.starts, pos) - 1
        return i >= 0 and pos < self.ends[i]

    def overlaps(self, start: int, end: int) -> bool:
        """Whether some span ``(a, b)`` has ``a < end and start < b``."""
        i = bisect_right(self.ends, start)
        return i < len(self.starts) and self.starts[i] < end


def separated(text: str, a: Token, b: Token) -> bool:
    """True when anything but spaces lies between two tokens (punctuation, a line break)."""
    gap = text[a.end:b.start]
    return gap.strip() != "" or "\n" in gap
