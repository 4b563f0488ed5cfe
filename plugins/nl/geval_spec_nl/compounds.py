"""Wrongly split compounds ("Engelse ziekte"): "hoofd pijn" for "hoofdpijn".

For two adjacent words w1 w2 (lower case, or w1 capitalised at the start of a
sentence; no function words; nothing but spaces between them) we look up, in
wordfreq's Dutch frequencies:

- f(join): the frequency of w1+w2, w1+"s"+w2 or w1+"e"+w2 (the most frequent);
- f(w1) x f(w2): how often the pair would occur by chance as two words
  (a word wordfreq does not know counts as 1e-8, Zipf 1).

The pair is flagged when the joined word is a known word (Zipf >= 2) and
f(join) >= ratio x f(w1) x f(w2), ``ratio`` being the spec's
``language.compound_ratio`` (default 20).
"""

from __future__ import annotations

from functools import lru_cache

from .text import Token, separated, tokens

FLOOR = 1e-8
MIN_ZIPF = 2.0
FUNCTION_WORDS = set("""
de het een en of maar want dus als dan dat die dit deze wat wie waar wanneer hoe waarom omdat
ik jij je u hij zij ze wij we jullie hun hen haar hem mij me mijn jouw uw ons onze zijn zich
er hier daar niet geen wel ook nog al zo te om op in aan van voor door met bij naar uit tot over onder
tegen na sinds zonder binnen buiten langs per dan toe mee af weg heen terug samen
is was zijn waren ben bent heeft hebben had hadden wordt worden werd werden kan kunnen moet moeten
zal zullen wil willen mag mogen gaat gaan komt komen doet doen
heel zeer meer minst meest veel weinig elke elk ieder alle alles iets niets iemand niemand
""".split())


@lru_cache(maxsize=65536)
def freq(word: str) -> float:
    from wordfreq import word_frequency

    return word_frequency(word, "nl")


@lru_cache(maxsize=65536)
def zipf(word: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "nl")


def _usable(tok: Token, first_of_sentence: bool) -> bool:
    w = tok.clean
    if len(w) < 2 or not w.isalpha():
        return False
    if w.lower() in FUNCTION_WORDS:
        return False
    if w[0].isupper() and not first_of_sentence:
        return False  # a name
    return w[1:].islower()


def candidates(text: str, ratio: float) -> list[tuple[Token, Token, str, float]]:
    """(first, second, joined word, ratio) for every flagged pair."""
    toks = tokens(text)
    out = []
    for i in range(len(toks) - 1):
        a, b = toks[i], toks[i + 1]
        starts = i == 0 or text[toks[i - 1].end:a.start].strip()[-1:] in (".", "!", "?", ":")
        if separated(text, a, b) or not _usable(a, starts) or not _usable(b, False):
            continue
        w1, w2 = a.lower, b.lower
        joined = max((w1 + w2, w1 + "s" + w2, w1 + "e" + w2), key=freq)
        if zipf(joined) < MIN_ZIPF:
            continue
        chance = max(freq(w1), FLOOR) * max(freq(w2), FLOOR)
        r = freq(joined) / chance
        if r >= ratio:
            out.append((a, b, joined, r))
    return out
