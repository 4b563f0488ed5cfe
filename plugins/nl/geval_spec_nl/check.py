"""The checker geval-spec calls for ``language.code`` nl, nl-NL and nl-BE."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from importlib import resources
from typing import Any

from geval_spec.plugins import Finding

from . import compounds, formality
from .text import Covered


@lru_cache(maxsize=1)
def flemish() -> tuple[str, ...]:
    """Belgian Dutch words and constructions that are standard in Flanders (never flagged)."""
    text = resources.files("geval_spec_nl").joinpath("flemish.txt").read_text(encoding="utf-8")
    return tuple(line.strip().lower() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def protected_spans(text: str, phrases) -> list[tuple[int, int]]:
    """Where the phrases stand in ``text``, in any case. (Found in the text itself: offsets found in
    ``text.lower()`` were off after a character whose lower case is longer, such as ``İ``.)"""
    spans = []
    for phrase in phrases:
        for m in re.finditer(rf"(?<!\w){phrase_pattern(phrase)}(?!\w)", text, re.IGNORECASE):
            spans.append((m.start(), m.end()))
    return spans


_FORMAT_CHARS = "[\u00ad\u200b-\u200d\u2060\ufeff]*"  # (text._FORMAT: soft hyphen, zero-width characters)


@lru_cache(maxsize=1024)
def phrase_pattern(phrase: str) -> str:
    """A pattern for ``phrase`` however its letters are written, as the checks read words (:class:`.text.Token`):
    an accented letter composed (NFC) or as a letter and combining marks (NFD), in the phrase as in the text, and
    invisible format characters between its characters. (Matched as written, a lexicon in one form missed text in
    the other, and its words were flagged.)"""
    parts = []
    for ch in unicodedata.normalize("NFC", phrase):
        forms = sorted({ch, unicodedata.normalize("NFD", ch)}, key=len, reverse=True)
        parts.append(re.escape(ch) if len(forms) == 1 else "(?:" + "|".join(map(re.escape, forms)) + ")")
    return _FORMAT_CHARS.join(parts)


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
