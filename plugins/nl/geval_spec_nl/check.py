"""The checker geval-spec calls for ``language.code`` nl, nl-NL and nl-BE."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache
from importlib import resources
from typing import Any

from geval_spec.plugins import Finding

from . import compounds, formality
from .text import _FORMAT, FORMAT_CHARS, MARKS, Covered


@lru_cache(maxsize=1)
def flemish() -> tuple[str, ...]:
    """Belgian Dutch words and constructions that are standard in Flanders (never flagged)."""
    text = resources.files("geval_spec_nl").joinpath("flemish.txt").read_text(encoding="utf-8")
    return tuple(line.strip().lower() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def protected_spans(text: str, phrases) -> list[tuple[int, int]]:
    """Where the phrases stand in ``text``, in any case and however their letters are written, as the checks read
    words (:class:`.text.Token`): composed or decomposed (the text is matched in NFC, as the phrase), with invisible
    format characters inside a word. The offsets are the text's own. (Offsets found in ``text.lower()`` were off
    after a character whose lower case is longer, such as ``İ``.)"""
    seen, where = _as_read(text)
    spans = []
    for phrase in phrases:
        for m in phrase_regex(phrase).finditer(seen):
            if m.end() > m.start():
                spans.append((where[m.start()][0], where[m.end() - 1][1]))
    return spans


# Letters and combining marks: format characters between two of them are inside a word (text._INNER)
_WORDLIKE = rf"[^\W\d_]|[{MARKS}]"
_INSIDE = re.compile(rf"(?<={_WORDLIKE})[{FORMAT_CHARS}]+(?={_WORDLIKE})")
_CLUSTER = re.compile(r"[\x00-\x7f]?[^\x00-\x7f]+")  # what NFC may change: a run beyond ASCII, with the letter before


class _Offsets:
    """Where each character of a text as read (:func:`_as_read`) stands in the text. ``pieces``: (start as read,
    start and end in the text without the format characters inside words, whether each character stands for
    itself; if not, it stands for the piece's whole span: a letter composed from a letter and its marks).
    ``kept``: (start without them, start in the text) of each stretch of the text that was kept."""

    def __init__(self, pieces: list[tuple[int, int, int, bool]], kept: list[tuple[int, int]]) -> None:
        self.pieces, self.kept = pieces, kept
        self.starts, self.kept_starts = [p[0] for p in pieces], [k[0] for k in kept]

    def __getitem__(self, i: int) -> tuple[int, int]:
        if not self.pieces:
            return i, i + 1
        read, start, end, itself = self.pieces[bisect_right(self.starts, i) - 1]
        if itself:
            start, end = start + i - read, start + i - read + 1
        return self._in_text(start), self._in_text(end - 1) + 1

    def _in_text(self, i: int) -> int:
        stripped, at = self.kept[bisect_right(self.kept_starts, i) - 1]
        return at + i - stripped


def _as_read(text: str) -> tuple[str, _Offsets]:
    """``text`` as the phrases are matched in it: without the format characters inside its words, in NFC; and for
    each of its characters, the span of ``text`` it stands for. NFC composes a character only with the marks after
    it and never with an ASCII character: each run beyond ASCII, with the character before it, is normalised
    alone (a text in NFC without format characters, as most are, is read as it is)."""
    if _FORMAT.search(text) is None and unicodedata.is_normalized("NFC", text):
        return text, _Offsets([], [])
    kept: list[tuple[int, int]] = []
    parts: list[str] = []
    pos = length = 0
    for m in [*_INSIDE.finditer(text), None]:
        stop = len(text) if m is None else m.start()
        kept.append((length, pos))
        parts.append(text[pos:stop])
        length += stop - pos
        pos = 0 if m is None else m.end()
    stripped = "".join(parts)
    out: list[str] = []
    pieces: list[tuple[int, int, int, bool]] = []
    read = last = 0
    for m in _CLUSTER.finditer(stripped):
        normal = unicodedata.normalize("NFC", m.group())
        if normal == m.group():
            continue
        if m.start() > last:
            pieces.append((read, last, m.start(), True))
            out.append(stripped[last:m.start()])
            read += m.start() - last
        pieces.append((read, m.start(), m.end(), False))
        out.append(normal)
        read += len(normal)
        last = m.end()
    pieces.append((read, last, len(stripped), True))
    out.append(stripped[last:])
    return "".join(out), _Offsets(pieces, kept)


@lru_cache(maxsize=4096)
def phrase_regex(phrase: str) -> re.Pattern[str]:
    """``phrase`` read as the text is (:func:`_as_read`: NFC, no format characters inside its words), in any case,
    whole words only: not next to a letter, digit or underscore, nor followed by a combining mark (a different
    letter). The spaces between its words match any run of white space, as the compound check pairs words across
    one (two spaces, a tab, a no-break space): such a pair was flagged even with the phrase in the lexicon."""
    read, _ = _as_read(phrase)
    words = read.split()
    body = r"\s+".join(map(re.escape, words)) if words else re.escape(read)
    return re.compile(rf"(?<!\w){body}(?![\w{MARKS}])", re.IGNORECASE)


def check(language: Any, text: str) -> list[Finding]:
    phrases = list(language.lexicon)
    if language.code.endswith("-BE") or language.code == "nl":
        phrases += list(flemish())
    protected = Covered(protected_spans(text, phrases))
    found: list[Finding] = []
    formal, informal = formality.markers(text)
    wanted = language.formality
    if wanted == "u":
        flagged = [(t, f"informal '{t.text}' where the reader is addressed formally (u)") for t in informal]
    elif wanted == "je":
        flagged = [(t, f"formal '{t.text}' where the reader is addressed informally (je)") for t in formal]
    else:
        flagged = []
        if formal and informal:
            minority, form = (formal, "formal") if len(formal) < len(informal) else (informal, "informal")
            flagged = [(t, f"{form} '{t.text}' in a text that also uses the other form of address")
                       for t in minority]
    for tok, message in flagged:
        if not protected.overlaps(tok.start, tok.end):
            found.append(Finding("formality", message, tok.start, tok.end, tok.text))
    if language.compounds:
        for a, b, joined, r in compounds.candidates(text, language.compound_ratio):
            if protected.overlaps(a.start, b.end):
                continue
            span = text[a.start:b.end]
            found.append(Finding("compound", f"'{span}' is probably one word: '{joined}'", a.start, b.end, span))
    found.sort(key=lambda f: (f.start, f.kind))
    return found
