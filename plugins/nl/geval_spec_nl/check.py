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
from .text import _FORMAT, Covered


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


# Letters and combining marks: a format character between two of them is inside a word (text._INNER).
_WORDLIKE = re.compile(r"[^\W\d_]|[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_INSIDE = re.compile(rf"(?<={_WORDLIKE.pattern}){_FORMAT.pattern}+(?={_WORDLIKE.pattern})")


_CLUSTER = re.compile(r"[\x00-\x7f]?[^\x00-\x7f]+")  # what NFC may change: a run beyond ASCII, with the letter before


class _Offsets:
    """Where each character of a text as read (:func:`_as_read`) stands in the text: ``pieces`` are (start as
    read, start in the text, end in the text, whether each character stands for itself); a piece that does not
    stands for its whole span (a letter composed from a letter and its marks)."""

    def __init__(self, pieces: list[tuple[int, int, int, bool]]) -> None:
        self.pieces = pieces
        self.starts = [p[0] for p in pieces]

    def __getitem__(self, i: int) -> tuple[int, int]:
        if not self.pieces:
            return i, i + 1
        read, start, end, itself = self.pieces[max(0, bisect_right(self.starts, i) - 1)]
        return (start + i - read, start + i - read + 1) if itself else (start, end)


def _as_read(text: str) -> tuple[str, _Offsets]:
    """``text`` as the phrases are matched in it: without the format characters inside its words, in NFC; and for
    each of its characters, the span of ``text`` it stands for. NFC composes a character only with the marks after
    it and never with an ASCII character: each run beyond ASCII, with the character before it, is normalised
    alone (a text in NFC without format characters, as most are, is read as it is)."""
    if _FORMAT.search(text) is None and unicodedata.is_normalized("NFC", text):
        return text, _Offsets([])
    kept: list[tuple[int, int]] = []  # the text without the format characters inside words: (start, end) pieces
    pos = 0
    for m in _INSIDE.finditer(text):
        kept.append((pos, m.start()))
        pos = m.end()
    kept.append((pos, len(text)))
    out: list[str] = []
    pieces: list[tuple[int, int, int, bool]] = []
    read = 0
    for a, b in kept:
        part = text[a:b]
        last = 0
        for m in _CLUSTER.finditer(part):
            normal = unicodedata.normalize("NFC", m.group())
            if normal == m.group():
                continue
            if m.start() > last:
                pieces.append((read, a + last, a + m.start(), True))
                out.append(part[last:m.start()])
                read += m.start() - last
            pieces.append((read, a + m.start(), a + m.end(), False))
            out.append(normal)
            read += len(normal)
            last = m.end()
        if b - a > last:
            pieces.append((read, a + last, b, True))
            out.append(part[last:])
            read += b - a - last
    return "".join(out), _Offsets(pieces)


@lru_cache(maxsize=4096)
def phrase_regex(phrase: str) -> re.Pattern[str]:
    """``phrase`` read as the text is (:func:`_as_read`: NFC, no format characters inside its words), in any case,
    whole words only: not next to a letter, digit or underscore, nor followed by a combining mark (a different
    letter)."""
    read, _ = _as_read(phrase)
    return re.compile(rf"(?<!\w){re.escape(read)}(?![\w\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f])",
                      re.IGNORECASE)


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
