"""The checker geval-spec calls for ``language.code`` nl, nl-NL and nl-BE."""

from __future__ import annotations

import re
import unicodedata
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
    """Where the phrases stand in ``text``, in any case and however their letters are written (:func:`phrase_regex`),
    with invisible format characters inside, as the checks read words (:class:`.text.Token`). (Found in the text
    itself: offsets found in ``text.lower()`` were off after a character whose lower case is longer, such as
    ``İ``.)"""
    seen, where = _without_format(text)
    spans = []
    for phrase in phrases:
        for m in phrase_regex(phrase).finditer(seen):
            if m.end() > m.start():
                spans.append((where[m.start()], where[m.end() - 1] + 1))
    return spans


class _Same:
    """The identity map of offsets (a text without format characters)."""

    def __getitem__(self, i: int) -> int:
        return i


def _without_format(text: str) -> tuple[str, _Same | list[int]]:
    """``text`` without its invisible format characters, and the offset in ``text`` of each of its characters."""
    if _FORMAT.search(text) is None:
        return text, _Same()
    kept = [i for i, ch in enumerate(text) if _FORMAT.match(ch) is None]
    return "".join(text[i] for i in kept), kept


@lru_cache(maxsize=4096)
def phrase_regex(phrase: str) -> re.Pattern[str]:
    """``phrase`` as a pattern in any case, whole words only, however its letters are written: an accented letter
    composed (NFC) or as a letter and combining marks (NFD), in the phrase as in the text (format characters are
    taken out of both). Matched as written, a lexicon in one form missed text in the other, and its words were
    flagged. Each letter with a decomposition is an alternative of its two forms; the others stay as written, so a
    long phrase compiles as fast as before."""
    parts = []
    for ch in unicodedata.normalize("NFC", _FORMAT.sub("", phrase)):
        decomposed = unicodedata.normalize("NFD", ch)
        parts.append(re.escape(ch) if decomposed == ch else f"(?:{re.escape(ch)}|{re.escape(decomposed)})")
    return re.compile(rf"(?<!\w){''.join(parts)}(?!\w)", re.IGNORECASE)


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
