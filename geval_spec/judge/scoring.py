"""Completions -> a :class:`~geval_spec.judge.types.Judgment`: a score, or invalid with its reason.

Scoring methods, recorded on every judgment:

- ``logprobs``: G-Eval's expected score, the sum of p(s) * s over the scale's
  scores, with p read from the top logprobs at the position where the score
  is written *inside the JSON object that was parsed*, at that object's own
  ``"score"`` key (a ``"score": N`` after the object, or in an object nested
  in it, is never read), normalised over the scale's scores. Token strings
  are mapped to scores explicitly: whitespace and any characters the chosen
  token has before its digits (" 4", "4", ":4") are stripped, and the sign
  and digits that follow are the score characters the token stands for (a
  token with more characters after them, "4," or "0}", ends the number). A
  score written as more than one token ("10" as "1" + "0", "-1" as "-" +
  "1", "-10" as "-" + "1" + "0") is followed along the chain rule: p(10) =
  p("1") * p("0" | "1"), p(-1) = p("-") * p("1" | "-"), and wherever the
  characters read so far already form a score, the number may end there:
  p(1) = p("1") * (1 - p(any digit | "1")), using the next position's
  alternatives. That conditional is only known along the path the model
  took; the mass of an alternative that could start a longer score (or is
  only a sign) on another path is reported as ``ambiguous_mass``: a
  one-digit score keeps it, a lone sign loses it. ``valid_mass`` is the
  probability that fell on the scale's scores before normalisation. When the
  token at the score's position does not decode to the score the judge
  wrote, or the written score has probability 0, the judgment is invalid
  with that reason.
- ``samples``: n sampled outputs, each parsed; the score is the mean of the
  valid ones, with their standard deviation as the spread.
- ``direct``: one parsed score.
- ``verdicts``: TCVA statement verdicts, aggregated by :mod:`geval_spec.judge.tcva`.
- pairwise specs: a preference for the first candidate (1 A, 0 B, 0.5 tie),
  from one order or, with a position swap, the mean of both orders.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import replace
from functools import lru_cache
from itertools import accumulate
from typing import Any, Iterable, Mapping, Sequence

from geval_spec.judge.outputs import PREFERENCE, as_int_score, parse_preference, parse_score_output, parse_verdicts
from geval_spec.judge.tcva import tcva_score
from geval_spec.judge.types import (
    Choice,
    Completion,
    Details,
    Judgment,
    Logprobs,
    Method,
    Request,
    TokenLogprob,
    Verdict,
)
from geval_spec.spec.sections import Aggregation, Spec
from geval_spec.values import frozen

PAIRWISE_RULE = "the mean of both orders: orders that disagree give a tie (0.5)"


# -- G-Eval expected score -------------------------------------------------------------
def expected_score(logprobs: Mapping[Any, float], scores: Iterable[int] = range(1, 6)) -> float:
    """G-Eval's probability-weighted score: sum of p(s) * s, p normalised over ``scores``.

    ``logprobs`` maps scores (ints, or token strings of ints such as ``" 4"``)
    to log probabilities; keys that stand for the same score add their
    probabilities, a score without an entry has probability 0, and a key that
    is no score of ``scores`` is a ``ValueError`` naming it.
    """
    allowed = list(scores)
    probs = {s: 0.0 for s in allowed}
    for key, lp in logprobs.items():
        s = as_int_score(key)
        if s is None or s not in probs:
            raise ValueError(f"key {key!r} is not a score of the scale {min(allowed)}..{max(allowed)}")
        probs[s] += math.exp(float(lp))
    total = sum(probs.values())
    if total <= 0:
        raise ValueError("no probability on any allowed score")
    return sum(s * p / total for s, p in probs.items())


@frozen
class Distribution:
    """A score distribution read from logprobs: probabilities over the scale and the masses read."""

    probs: dict[int, float]  # normalised over the scale
    valid_mass: float
    ambiguous_mass: float

    @property
    def expected(self) -> float:
        return sum(s * p for s, p in self.probs.items())


_SCORE_AT = re.compile(r'(?<!\\)"score"\s*:\s*"?(-?\d+)')
_VALUE = re.compile(r'"?(-?\d+)')
_SIGNED = re.compile(r"-?\d*")
_DIGITS = re.compile(r"\d*")


# a JSON string (its text in group 1, and group 2 the colon when a key) or a bracket; ``[^"\\]*`` runs of plain
# characters make a long reasoning one step of the regex instead of a Python loop over its characters
_JSON_TOKEN = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"[ \t\r\n]*(:?)[ \t\r\n]*|[{\[]|[}\]]', re.S)


def _top_level_value(text: str, lo: int, hi: int, key: str) -> int | None:
    """Where the value of ``key`` starts among the keys of the JSON object ``text[lo:hi]`` (the last, if repeated).

    Keys of nested objects and text inside strings are skipped, so only the
    object's own key counts (as ``json.loads`` reads it: the last one wins).
    """
    depth, found = 0, None
    for m in _JSON_TOKEN.finditer(text, lo, hi):
        ch = text[m.start()]
        if ch == '"':
            if depth == 1 and m.group(2) and m.group(1) == key:
                found = m.end()
        elif ch in "{[":
            depth += 1
        else:
            depth -= 1
    return found


def _score_digits(text: str, span: tuple[int, int] | None) -> tuple[int, int] | None:
    """Where the digits of the score stand in ``text``: inside the object ``span`` (its own key), else the last."""
    if span is None:
        matches = list(_SCORE_AT.finditer(text))
        return (matches[-1].start(1), matches[-1].end(1)) if matches else None
    at = _top_level_value(text, span[0], span[1], "score")
    m = _VALUE.match(text, at, span[1]) if at is not None else None
    return (m.start(1), m.end(1)) if m else None


@lru_cache(maxsize=64)
def _scale(scores: tuple[int, ...]) -> tuple[dict[str, int], frozenset[str]]:
    """A scale's scores by their text, and every text a longer score of the scale begins with ('' and '-' too)."""
    strings = {str(s): s for s in scores}
    return strings, frozenset(text[:i] for text in strings for i in range(len(text)))


_PIECES: dict[tuple[str, str | None], tuple[str, bool] | None] = {}  # (token, prefix at the first position) ->
_PIECES_KEPT = 4096                                                   # what _Reader._piece read in it


class _Reader:
    """Walks the chosen tokens of a score along the chain rule, spreading probability over the scale's scores.

    ``path`` holds, for every token the written score spans, its index and
    the score characters it holds. At each position an alternative token
    stands for some score characters (a *piece*: a sign and digits at the
    first position, digits after it) and is *closed* when more characters
    follow them in the token (the number ends there). The chosen piece
    continues along the path with its probability as weight; any other piece
    completes a score (or could start a longer one: ``ambiguous``). Where the
    characters read so far already form a score, the mass of the next
    position that is not a digit is the probability that the number ended.
    """

    def __init__(self, tokens: Logprobs, path: list[tuple[int, str]], prefix: str, closed: bool,
                 scores: Sequence[int]) -> None:
        self.tokens = tokens
        self.path = path
        self.prefix = prefix.strip()  # what the first token holds before the score (' ', ':', ...)
        self.closed = closed  # the last token of the score holds more characters after it
        self.strings, self.starts = _scale(tuple(scores))
        self.probs: dict[int, float] = {s: 0.0 for s in scores}
        self.ambiguous = 0.0

    def _extends(self, piece: str) -> bool:
        """Whether some score of the scale begins with ``piece`` and is longer."""
        return piece in self.starts

    def _add(self, full: str, p: float) -> None:
        if full in self.strings:
            self.probs[self.strings[full]] += p

    def _piece(self, token: str, first: bool) -> tuple[str, bool] | None:
        """(score characters, closed) an alternative stands for; None when it stands for none (kept per token:
        the same few tokens stand at the score's position of every answer)."""
        key = (token, self.prefix if first else None)
        try:
            return _PIECES[key]
        except KeyError:
            pass
        if len(_PIECES) >= _PIECES_KEPT:  # a server's tokens are not a bounded set
            _PIECES.clear()
        found = _PIECES[key] = self._read_piece(token, first)
        return found

    def _read_piece(self, token: str, first: bool) -> tuple[str, bool] | None:
        t = token
        if first:
            t = t.lstrip()
            if self.prefix and t.startswith(self.prefix):
                t = t[len(self.prefix):].lstrip()
        m = (_SIGNED if first else _DIGITS).match(t)
        piece = m.group() if m else ""
        closed = len(piece) < len(t)
        if piece == "" or (piece == "-" and closed):
            return None
        return piece, closed

    def visit(self, step: int, consumed: str, weight: float) -> None:
        index, chosen = self.path[step]
        last = step == len(self.path) - 1
        chosen_closed = last and self.closed
        read = [(self._piece(t, step == 0), _probability(lp)) for t, lp in self.tokens.alternatives(index)]
        if step > 0 and consumed in self.strings:  # the number could have ended before this token
            digits = sum(q for r, q in read if r is not None)
            self.probs[self.strings[consumed]] += weight * max(1.0 - digits, 0.0)
        for r, q in read:
            if r is None:
                continue
            piece, closed = r
            p = weight * q
            full = consumed + piece
            if piece == chosen and closed == chosen_closed:
                if not last:
                    self.visit(step + 1, full, p)
                elif closed:
                    self._add(full, p)
                else:
                    self._end(full, p, index + 1)
            else:
                self._add(full, p)
                if not closed and self._extends(full):
                    self.ambiguous += p

    def _end(self, full: str, p: float, after: int) -> None:
        """The chosen score is complete: split p between it and longer scores the next token could make."""
        rest = p
        if self._extends(full) and after < len(self.tokens):
            for token, lp in self.tokens.alternatives(after):
                more = _DIGITS.match(token)
                if more is not None and more.group():
                    q = p * _probability(lp)
                    longer = full + more.group()
                    self._add(longer, q)
                    if more.group() == token and self._extends(longer):
                        self.ambiguous += q
                    rest -= q
        self._add(full, max(rest, 0.0))


MOST_MASS = 1.01  # the scale's scores hold at most all the probability (and a provider's rounding)


def _probability(logprob: float) -> float:
    """exp(logprob), kept finite for a logprob far above 0 (math.exp overflows past 709: exit 70), which the
    mass check then refuses (NaN stays NaN)."""
    return math.exp(min(logprob, 50.0))


def score_path(texts: Sequence[str], start: int, end: int) -> tuple[list[tuple[int, str]], str, bool]:
    """The tokens that hold the score's characters ``text[start:end]`` of ``text = "".join(texts)``: for each, its
    index and the score characters it holds; what the first holds before the score; whether the last holds more
    after it (the number is closed there). A token of no characters inside the score is in the path too."""
    path: list[tuple[int, str]] = []
    prefix = ""
    closed = False
    ends = list(accumulate(map(len, texts)))  # where each token ends
    # from the first token that ends after start (bisect, not a walk from the first), while they begin before end
    for i in range(bisect_right(ends, start), len(texts)):
        token, t1 = texts[i], ends[i]
        t0 = t1 - len(token)
        if t0 >= end:
            break
        a, b = max(start, t0), min(end, t1)
        if not path:
            prefix = token[: a - t0]
        path.append((i, token[a - t0:b - t0]))
        if b == end:
            closed = t1 > end
    return path, prefix, closed


def distribution_from_logprobs(tokens: Logprobs | Sequence[TokenLogprob], scores: Sequence[int],
                               span: tuple[int, int] | None = None,
                               written: int | None = None) -> Distribution | str:
    """Read the score distribution at the score's position inside ``span``, or return why not.

    ``span`` is where the parsed JSON object stands in the tokens' text (only
    its own ``"score"`` key is read); ``written`` is the score the judge
    wrote there, which the token at that position must spell. Only the chosen
    tokens' text and the alternatives at the score's positions are read.
    """
    stream = tokens if isinstance(tokens, Logprobs) else Logprobs.of(tokens)
    texts = stream.texts()
    text = "".join(texts)
    where = _score_digits(text, span)
    if where is None:
        return "no score in the output to read logprobs at"
    start, end = where
    if written is not None and int(text[start:end]) != written:
        return (f"the logprobs at the score's position stand for {text[start:end]}, "
                f"but the judge wrote {written}")
    path, prefix, closed = score_path(texts, start, end)
    if not path:
        return "the score is not in the token stream"
    reader = _Reader(stream, path, prefix, closed, scores)
    reader.visit(0, "", 1.0)
    valid_mass = sum(reader.probs.values())
    if not math.isfinite(valid_mass + reader.ambiguous) or valid_mass > MOST_MASS:  # NaN, +Infinity, logprobs > 0
        return "the logprobs at the score position are not log-probabilities (NaN, infinite, or above 0)"
    if valid_mass <= 1e-12:
        return "no probability on the scale's scores at the score position"
    if written is not None and reader.probs.get(written, 0.0) <= 0.0:
        return f"the written score {written} has probability 0 in the logprobs"
    normalised = {s: p / valid_mass for s, p in reader.probs.items()}
    return Distribution(probs=normalised, valid_mass=valid_mass, ambiguous_mass=reader.ambiguous)


# -- one judgment per case and judge ---------------------------------------------------------
def judge_scores(scores: Sequence[int], method: Method, case_id: str, judge: str,
                 choices: Sequence[Choice]) -> Judgment:
    """Score a case from the choices of its response(s) under a score method."""
    if method == "logprobs":
        choice = choices[0]
        out = parse_score_output(choice.text, scores)
        if out.score is None:
            return Judgment.invalid(case_id, judge, method, out.reason or "invalid")
        if choice.logprobs is None:
            return Judgment.invalid(case_id, judge, method, "the response has no logprobs")
        dist = distribution_from_logprobs(choice.logprobs, scores, span=out.span, written=out.score)
        if isinstance(dist, str):
            return Judgment.invalid(case_id, judge, method, dist)
        details = Details(written_score=out.score, errors=out.errors, ambiguous_mass=dist.ambiguous_mass or None)
        return Judgment(case_id=case_id, judge=judge, method=method, score=dist.expected, valid=True,
                        distribution=dist.probs, valid_mass=dist.valid_mass, details=details)
    if method == "samples":
        values: list[float | None] = []
        reasons = []
        for choice in choices:
            parsed = parse_score_output(choice.text, scores)
            values.append(None if parsed.score is None else float(parsed.score))
            if parsed.reason:
                reasons.append(parsed.reason)
        good = [v for v in values if v is not None]
        if not good:
            return Judgment(case_id=case_id, judge=judge, method=method, score=None, valid=False,
                            reason=f"no valid sample ({reasons[0]})" if reasons else "no samples",
                            samples=tuple(values))
        mean, spread = mean_and_spread(good)
        return Judgment(case_id=case_id, judge=judge, method=method, score=mean, valid=True,
                        samples=tuple(values), spread=spread,
                        details=Details(invalid_samples=len(values) - len(good),
                                        invalid_reasons=tuple(reasons) or None))
    if method == "direct":
        out = parse_score_output(choices[0].text, scores)
        if out.score is None:
            return Judgment.invalid(case_id, judge, method, out.reason or "invalid")
        return Judgment(case_id=case_id, judge=judge, method=method, score=float(out.score), valid=True,
                        details=Details(errors=out.errors))
    raise ValueError(f"not a score method: {method}")


def mean_and_spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return mean, spread


def _order_value(choices: Sequence[Choice], swapped: bool) -> tuple[float | None, str | None]:
    """Preference for the first candidate from one order's choices (mean over samples)."""
    values, reasons = [], []
    for choice in choices:
        pref, reason = parse_preference(choice.text)
        if pref is None:
            reasons.append(reason)
            continue
        v = PREFERENCE[pref]
        values.append(1.0 - v if swapped else v)
    if not values:
        return None, reasons[0] if reasons else "no output"
    return sum(values) / len(values), None


def judge_pairwise(case_id: str, judge: str, method: Method, shown: Sequence[Choice],
                   swapped: Sequence[Choice] | None) -> Judgment:
    """Preference for the first candidate (1 A, 0 B, 0.5 tie); with a swap, both orders.

    Disagreements between the orders are resolved by the mean of both orders,
    so an A in one order and a B in the other become a tie.
    """
    v_ab, r_ab = _order_value(shown, swapped=False)
    if swapped is None:
        details = Details(pairwise=True, order_ab=v_ab)
        if v_ab is None:
            return Judgment.invalid(case_id, judge, method, r_ab or "invalid", details)
        return Judgment(case_id=case_id, judge=judge, method=method, score=v_ab, valid=True, details=details)
    v_ba, r_ba = _order_value(swapped, swapped=True)
    valid = [v for v in (v_ab, v_ba) if v is not None]
    if v_ab is not None and v_ba is not None:
        def side(v: float) -> int:
            return (v > 0.5) - (v < 0.5)

        consistent: bool | None = side(v_ab) == side(v_ba)
        one_invalid = None
    else:
        consistent, one_invalid = None, r_ab or r_ba
    details = Details(pairwise=True, order_ab=v_ab, order_ba=v_ba, swapped=True, rule=PAIRWISE_RULE,
                      consistent=consistent, one_order_invalid=one_invalid if valid else None)
    if not valid:
        return Judgment.invalid(case_id, judge, method, f"both orders invalid: {r_ab}", details)
    return Judgment(case_id=case_id, judge=judge, method=method, score=sum(valid) / len(valid), valid=True,
                    details=details)


def judge_verdicts(case_id: str, judge: str, verdicts: tuple[Verdict, ...] | None, reason: str | None,
                   aggregation: Aggregation, details: Details = Details()) -> Judgment:
    """A TCVA judgment from parsed verdicts, under the spec's aggregation settings."""
    if verdicts is None:
        return Judgment.invalid(case_id, judge, "verdicts", reason or "no verdicts", details)
    score = aggregate(verdicts, aggregation)
    if score is None:
        return Judgment(case_id=case_id, judge=judge, method="verdicts", score=None, valid=False,
                        reason="no statements (aggregation.on_empty: invalid)", verdicts=verdicts, details=details)
    return Judgment(case_id=case_id, judge=judge, method="verdicts", score=score, valid=True, verdicts=verdicts,
                    details=details)


def aggregate(verdicts: Sequence[Verdict], aggregation: Aggregation, temperature: float | None = None) -> float | None:
    """TCVA score under a spec's aggregation (None: invalid by ``on_empty``)."""
    if not verdicts:
        return {"invalid": None, "zero": 0.0, "one": 1.0}[aggregation.on_empty]
    weights = aggregation.weights.model_dump()
    t = aggregation.temperature if temperature is None else temperature
    return tcva_score([v.verdict for v in verdicts], t, weights, aggregation.none_penalty)


# -- from a case's completions to its judgment -------------------------------------------------
def score_case(spec: Spec, method: Method, judge: str, case_id: str, requests: Sequence[Request],
               completions: Sequence[Completion | None], errors: Sequence[str | None]) -> Judgment:
    """The judgment of one case by one judge, from the completions of its requests (None: failed)."""
    if spec.pairwise is not None:
        shown = [ch for r, c in zip(requests, completions) if c is not None and r.purpose != "swap"
                 for ch in c.choices]
        swapped = [ch for r, c in zip(requests, completions) if c is not None and r.purpose == "swap"
                   for ch in c.choices]
        failed = [e for c, e in zip(completions, errors) if c is None]
        if not shown and not swapped:
            return Judgment.invalid(case_id, judge, method, f"request failed: {failed[0] if failed else '?'}")
        has_swap = any(r.purpose == "swap" for r in requests)
        return judge_pairwise(case_id, judge, method, shown, swapped if has_swap else None)
    received: list[Completion] = []
    for c, err in zip(completions, errors):
        if c is None:
            return Judgment.invalid(case_id, judge, method, f"request failed: {err or 'no response'}")
        received.append(c)
    choices = [ch for c in received for ch in c.choices]
    if method == "verdicts":
        verdicts, reason = parse_verdicts(choices[0].text)
        return judge_verdicts(case_id, judge, verdicts, reason, spec.aggregation)
    if spec.rubric is None:  # the spec checks make a rubric required for score methods
        raise ValueError(f"spec {spec.name} has no rubric to score {method} on")
    scores = list(range(spec.rubric.scale.min, spec.rubric.scale.max + 1))
    return judge_scores(scores, method, case_id, judge, choices)


def as_fallback(judgment: Judgment, original: Method) -> Judgment:
    """A judgment made by the fallback method, marked with the method it replaced."""
    return replace(judgment, details=replace(judgment.details, fallback_from=original))


def missing_logprobs(request: Request, completion: Completion) -> bool:
    """The request asked for logprobs and a choice came back without them."""
    return bool(request.body.get("logprobs")) and request.purpose != "steps" and any(
        ch.logprobs is None for ch in completion.choices)
