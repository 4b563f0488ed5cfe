"""Formal (u) and informal (je/jij) address in Dutch.

Markers: formal ``u``, ``uw``, ``uzelf``; informal ``je``, ``jij``, ``jou``,
``jouw``, ``jezelf``, ``jullie``. Not counted as address:

- anything inside quotation marks (reported speech);
- ``u`` after a number or a time word: the Belgian abbreviation of "uur"
  ("om 20 u");
- ``U`` in an abbreviation or name (``U2``, ``U-bocht``: tokens with
  digits or hyphens are other words);
- ``je`` inside French ("je ne sais quoi", "je suis"): followed by a French
  word;
- a marker written about as a word ("het woord je", "de letter u").

Generic ``je`` ("als je ouder wordt, ...") is informal register and counts:
in a text that must say ``u``, generic ``je`` is the same register slip a
Dutch panel marks down.
"""

from __future__ import annotations

import re

from .text import Covered, Token, quoted_spans, tokens

FORMAL = {"u", "uw", "uwe", "uzelf"}
INFORMAL = {"je", "jij", "jou", "jouw", "jouwe", "jezelf", "jullie", "jij'"}
FRENCH_AFTER_JE = {"ne", "suis", "sais", "t'aime", "pense", "veux", "vais", "crois", "maintiendrai", "me", "te",
                   "vous", "n'ai", "n'en", "ai", "dis", "parle", "m'appelle", "t'", "trouve"}
TIME_BEFORE_U = re.compile(r"(\d{1,2}([.:h]\d{2})?|\d+)\s*$")
META_BEFORE = {"woord", "woordje", "letter", "aanspreekvorm", "vorm", "voornaamwoord", "pronomen"}


def _is_address(tok: Token, i: int, toks: list[Token], text: str) -> bool:
    word = tok.key
    if word == "u" and TIME_BEFORE_U.search(text[max(0, tok.start - 8):tok.start]):
        return False  # "om 20 u": uur
    if word == "je" and i + 1 < len(toks) and toks[i + 1].key in FRENCH_AFTER_JE:
        return False
    if i > 0 and toks[i - 1].key in META_BEFORE:
        return False
    end = tok.end
    if end < len(text) and text[end] in "-0123456789":
        return False
    return True


def markers(text: str) -> tuple[list[Token], list[Token]]:
    """(formal, informal) address markers outside quotations."""
    quoted = Covered(quoted_spans(text))
    toks = tokens(text)
    formal, informal = [], []
    for i, tok in enumerate(toks):
        if quoted.inside(tok.start):
            continue
        word = tok.key
        if word in FORMAL and _is_address(tok, i, toks, text):
            formal.append(tok)
        elif word in INFORMAL and _is_address(tok, i, toks, text):
            informal.append(tok)
    return formal, informal


def classify(text: str) -> str:
    """none, formal, informal or mixed."""
    formal, informal = markers(text)
    if formal and informal:
        return "mixed"
    return "formal" if formal else ("informal" if informal else "none")
