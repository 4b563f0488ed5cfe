"""Stage: judge output -> a :class:`Judgment` (a score, or invalid with its reason).

The judge answers with one JSON object. For score methods the contract is
``{"reasoning": text, "errors": [text, ...], "score": integer on the scale}``;
for verdicts it is ``{"statements": [{"statement", "verdict", "reason",
"support"}, ...]}``. Output that breaks the contract is an invalid judgment
with its reason. It is stored and counted, never dropped.

Scoring methods, recorded on every judgment:

- ``logprobs``: G-Eval's expected score, the sum of p(s) * s over the scale's
  scores, with p read from the top logprobs at the position where the score
  is written and normalised over the scale's scores. Token strings are mapped
  to scores explicitly: whitespace and any characters the chosen token has
  before its digits (" 4", "4", ":4") are stripped, and what remains must be
  a number on the scale. A score written as more than one token ("10" as "1"
  + "0") is followed along the chain rule: p(10) = p("1") * p("0" | "1") and
  p(1) = p("1") * (1 - p(any digit | "1")), using the next position's
  alternatives. That conditional is only known along the path the model
  took; when the model wrote another score, the mass of a digit that could
  start a longer score stays with the one-digit score and is reported as
  ``ambiguous_mass``. ``valid_mass`` is the probability that fell on the
  scale's scores before normalisation.
- ``samples``: n sampled outputs, each parsed; the score is the mean of the
  valid ones, with their standard deviation as the spread.
- ``direct``: one parsed score.
- ``verdicts``: TCVA statement verdicts, aggregated by :mod:`geval_spec.tcva`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .clients import Choice, TokenLogprob
from .tcva import LEVELS, normalise_verdict, tcva_score

METHODS = ("logprobs", "samples", "direct", "verdicts")


@dataclass(frozen=True)
class Verdict:
    statement: str
    verdict: str  # one of tcva.LEVELS
    reason: str = ""
    support: str = ""


@dataclass(frozen=True)
class Judgment:
    case_id: str
    judge: str
    method: str
    score: float | None
    valid: bool
    reason: str | None = None  # why it is invalid
    distribution: Mapping[int, float] | None = None
    valid_mass: float | None = None
    samples: tuple[float | None, ...] | None = None
    spread: float | None = None
    verdicts: tuple[Verdict, ...] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def invalid(case_id: str, judge: str, method: str, reason: str, **details: Any) -> "Judgment":
        return Judgment(case_id=case_id, judge=judge, method=method, score=None, valid=False, reason=reason,
                        details=details)


# -- JSON contract -----------------------------------------------------------------
_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?```\s*$", re.S)


def extract_json(text: str | None, must_have: str) -> tuple[dict | None, str | None]:
    """The judge's JSON object (the last one holding ``must_have``), or a reason."""
    if text is None or not text.strip():
        return None, "empty output"
    m = _FENCE.match(text)
    body = m.group(1) if m else text
    try:
        value = json.loads(body)
        if isinstance(value, dict):
            return value, None
        return None, f"output is JSON but not an object ({type(value).__name__})"
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    found = None
    for i in [i for i, ch in enumerate(body) if ch == "{"]:
        try:
            value, _ = decoder.raw_decode(body, i)
        except ValueError:
            continue
        if isinstance(value, dict) and must_have in value:
            found = value
    if found is not None:
        return found, None
    return None, "no JSON object in the output" if "{" not in body else "invalid JSON in the output"


def as_int_score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def parse_score_output(text: str | None, scores: Sequence[int]) -> tuple[int | None, str | None, dict]:
    """(score, reason if invalid, extras) for one output under the score contract."""
    obj, reason = extract_json(text, "score")
    if obj is None:
        return None, reason, {}
    extras: dict[str, Any] = {}
    for key in ("reasoning", "errors", "score"):
        if key not in obj:
            return None, f"missing key '{key}'", extras
    if not isinstance(obj["reasoning"], str):
        return None, "'reasoning' is not text", extras
    if not isinstance(obj["errors"], list) or not all(isinstance(e, str) for e in obj["errors"]):
        return None, "'errors' is not a list of text", extras
    extras["errors"] = list(obj["errors"])
    score = as_int_score(obj["score"])
    if score is None:
        return None, f"score {obj['score']!r} is not an integer", extras
    if score not in scores:
        return None, f"score {score} is outside {min(scores)}..{max(scores)}", extras
    return score, None, extras


def parse_verdicts(text: str | None) -> tuple[tuple[Verdict, ...] | None, str | None]:
    obj, reason = extract_json(text, "statements")
    if obj is None:
        return None, reason
    items = obj.get("statements")
    if not isinstance(items, list):
        return None, "missing key 'statements' (a list)"
    return verdicts_from_items(items)


def verdicts_from_items(items: Iterable[Any]) -> tuple[tuple[Verdict, ...] | None, str | None]:
    out = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            return None, f"statement {n} is not an object"
        level = normalise_verdict(item.get("verdict", "")) if isinstance(item.get("verdict"), str) else None
        if level is None:
            return None, f"statement {n}: unknown verdict {item.get('verdict')!r} (expected {', '.join(LEVELS)})"
        text_fields = {}
        for key in ("statement", "reason", "support"):
            value = item.get(key, "")
            if value is None:
                value = ""
            if not isinstance(value, str):
                return None, f"statement {n}: '{key}' is not text"
            text_fields[key] = value
        out.append(Verdict(statement=text_fields["statement"], verdict=level, reason=text_fields["reason"],
                           support=text_fields["support"]))
    return tuple(out), None


# -- G-Eval expected score -------------------------------------------------------------
def expected_score(logprobs: Mapping[Any, float], scores: Iterable[int] = range(1, 6)) -> float:
    """G-Eval's probability-weighted score: sum of p(s) * s, p normalised over ``scores``.

    ``logprobs`` maps scores (ints, or strings of ints) to log probabilities;
    a score without an entry has probability 0.
    """
    table: dict[int, float] = {}
    for key, lp in logprobs.items():
        s = as_int_score(key)
        if s is not None:
            table[s] = float(lp)
    probs = {s: math.exp(table[s]) if s in table else 0.0 for s in scores}
    total = sum(probs.values())
    if total <= 0:
        raise ValueError("no probability on any allowed score")
    return sum(s * p / total for s, p in probs.items())


@dataclass(frozen=True)
class Distribution:
    probs: dict[int, float]  # normalised over the scale
    valid_mass: float
    ambiguous_mass: float

    @property
    def expected(self) -> float:
        return sum(s * p for s, p in self.probs.items())


_SCORE_AT = re.compile(r'"score"\s*:\s*"?(-?\d+)')


def _value_of(token: str, prefix: str, suffix: str) -> str | None:
    """The digits an alternative token stands for, given the chosen token's shape."""
    t = token.strip()
    p = prefix.strip()
    if p and t.startswith(p):
        t = t[len(p):].strip()
    s = suffix.strip()
    if s and t.endswith(s):
        t = t[: -len(s)].strip()
    return t if re.fullmatch(r"-?\d+", t) else None


def _tops(tok: TokenLogprob) -> list[tuple[str, float]]:
    tops = list(tok.top)
    if all(t != tok.token for t, _ in tops):
        tops.append((tok.token, tok.logprob))
    return tops


def distribution_from_logprobs(tokens: Sequence[TokenLogprob], scores: Sequence[int]) -> Distribution | str:
    """Read the score distribution at the score's position, or return why not."""
    text = "".join(t.token for t in tokens)
    matches = list(_SCORE_AT.finditer(text))
    if not matches:
        return "no score in the output to read logprobs at"
    start, end = matches[-1].start(1), matches[-1].end(1)
    pos = 0
    first = None
    spans = []
    for i, tok in enumerate(tokens):
        spans.append((pos, pos + len(tok.token)))
        if first is None and pos <= start < pos + len(tok.token):
            first = i
        pos += len(tok.token)
    if first is None:
        return "the score is not in the token stream"
    tok = tokens[first]
    t0, t1 = spans[first]
    prefix = tok.token[: start - t0]
    chosen_digits = text[start:min(end, t1)]
    suffix = tok.token[min(end, t1) - t0:] if end <= t1 else ""
    allowed = set(scores)
    nxt = tokens[first + 1] if first + 1 < len(tokens) else None

    def continuation() -> dict[str, float]:
        """p(next digits | the chosen digits), from the next position's alternatives."""
        if nxt is None:
            return {}
        out: dict[str, float] = {}
        for alt, lp in _tops(nxt):
            if re.fullmatch(r"\d+", alt):
                out[alt] = out.get(alt, 0.0) + math.exp(lp)
        return out

    probs: dict[int, float] = {s: 0.0 for s in scores}
    ambiguous = 0.0
    for alt, lp in _tops(tok):
        digits = _value_of(alt, prefix, suffix)
        if digits is None:
            continue
        p = math.exp(lp)
        extends = [s for s in allowed if len(str(s)) > len(digits) and str(s).startswith(digits)]
        if not extends:
            value = int(digits)
            if value in allowed:
                probs[value] += p
            continue
        if digits == chosen_digits:
            cont = continuation()
            rest = p
            for more, q in cont.items():
                value = int(digits + more)
                if value in allowed:
                    probs[value] += p * q
                rest -= p * q
            if int(digits) in allowed:
                probs[int(digits)] += max(rest, 0.0)
        else:
            if int(digits) in allowed:
                probs[int(digits)] += p
            ambiguous += p
    valid_mass = sum(probs.values())
    if valid_mass <= 1e-12:
        return "no probability on the scale's scores at the score position"
    normalised = {s: p / valid_mass for s, p in probs.items()}
    return Distribution(probs=normalised, valid_mass=valid_mass, ambiguous_mass=ambiguous)


# -- one judgment per case and judge ---------------------------------------------------------
def judge_scores(scores: Sequence[int], method: str, case_id: str, judge: str,
                 choices: Sequence[Choice]) -> Judgment:
    """Score a case from the choices of its response(s) under a score method."""
    if method == "logprobs":
        choice = choices[0]
        score, reason, extras = parse_score_output(choice.text, scores)
        if reason:
            return Judgment.invalid(case_id, judge, method, reason)
        if choice.logprobs is None:
            return Judgment.invalid(case_id, judge, method, "the response has no logprobs")
        dist = distribution_from_logprobs(choice.logprobs, scores)
        if isinstance(dist, str):
            return Judgment.invalid(case_id, judge, method, dist)
        details = {"written_score": score, **extras}
        if dist.ambiguous_mass:
            details["ambiguous_mass"] = dist.ambiguous_mass
        return Judgment(case_id=case_id, judge=judge, method=method, score=dist.expected, valid=True,
                        distribution=dist.probs, valid_mass=dist.valid_mass, details=details)
    if method == "samples":
        values: list[float | None] = []
        reasons = []
        for choice in choices:
            score, reason, _ = parse_score_output(choice.text, scores)
            values.append(None if score is None else float(score))
            if reason:
                reasons.append(reason)
        good = [v for v in values if v is not None]
        if not good:
            return Judgment(case_id=case_id, judge=judge, method=method, score=None, valid=False,
                            reason=f"no valid sample ({reasons[0]})" if reasons else "no samples",
                            samples=tuple(values))
        mean = sum(good) / len(good)
        spread = (math.sqrt(sum((v - mean) ** 2 for v in good) / (len(good) - 1)) if len(good) > 1 else 0.0)
        details = {"invalid_samples": len(values) - len(good)}
        if reasons:
            details["invalid_reasons"] = reasons
        return Judgment(case_id=case_id, judge=judge, method=method, score=mean, valid=True,
                        samples=tuple(values), spread=spread, details=details)
    if method == "direct":
        score, reason, extras = parse_score_output(choices[0].text, scores)
        if reason:
            return Judgment.invalid(case_id, judge, method, reason)
        return Judgment(case_id=case_id, judge=judge, method=method, score=float(score), valid=True,
                        details=extras)
    raise ValueError(f"not a score method: {method}")


PREFERENCE = {"a": 1.0, "b": 0.0, "tie": 0.5}
PAIRWISE_RULE = "the mean of both orders: orders that disagree give a tie (0.5)"


def parse_preference(text: str | None) -> tuple[str | None, str | None]:
    """'a', 'b' or 'tie' under the pairwise contract, or the reason it is invalid."""
    obj, reason = extract_json(text, "preferred")
    if obj is None:
        return None, reason
    for key in ("reasoning", "errors", "preferred"):
        if key not in obj:
            return None, f"missing key '{key}'"
    if not isinstance(obj["reasoning"], str):
        return None, "'reasoning' is not text"
    if not isinstance(obj["errors"], list) or not all(isinstance(e, str) for e in obj["errors"]):
        return None, "'errors' is not a list of text"
    pref = str(obj["preferred"]).strip().lower().removeprefix("candidate ").strip()
    if pref not in PREFERENCE:
        return None, f"preferred {obj['preferred']!r} is not A, B or tie"
    return pref, None


def _order_value(choices: Sequence[Choice], swapped: bool) -> tuple[float | None, str | None, int]:
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
        return None, reasons[0] if reasons else "no output", len(choices)
    return sum(values) / len(values), None, len(choices) - len(values)


def judge_pairwise(case_id: str, judge: str, method: str, shown: Sequence[Choice],
                   swapped: Sequence[Choice] | None) -> Judgment:
    """Preference for the first candidate (1 A, 0 B, 0.5 tie); with a swap, both orders.

    Disagreements between the orders are resolved by the mean of both orders,
    so an A in one order and a B in the other become a tie.
    """
    v_ab, r_ab, bad_ab = _order_value(shown, swapped=False)
    details: dict[str, Any] = {"order_ab": v_ab}
    if swapped is None:
        if v_ab is None:
            return Judgment.invalid(case_id, judge, method, r_ab or "invalid", **details)
        return Judgment(case_id=case_id, judge=judge, method=method, score=v_ab, valid=True, details=details)
    v_ba, r_ba, bad_ba = _order_value(swapped, swapped=True)
    details.update({"order_ba": v_ba, "rule": PAIRWISE_RULE})
    valid = [v for v in (v_ab, v_ba) if v is not None]
    if not valid:
        return Judgment.invalid(case_id, judge, method, f"both orders invalid: {r_ab}", **details)
    if v_ab is not None and v_ba is not None:
        side = lambda v: (v > 0.5) - (v < 0.5)  # noqa: E731
        details["consistent"] = side(v_ab) == side(v_ba)
    else:
        details["consistent"] = None
        details["one_order_invalid"] = r_ab or r_ba
    return Judgment(case_id=case_id, judge=judge, method=method, score=sum(valid) / len(valid), valid=True,
                    details=details)


def judge_verdicts(case_id: str, judge: str, verdicts: tuple[Verdict, ...] | None, reason: str | None,
                   aggregation) -> Judgment:
    """A TCVA judgment from parsed verdicts, under the spec's aggregation settings."""
    if verdicts is None:
        return Judgment.invalid(case_id, judge, "verdicts", reason or "no verdicts")
    score = aggregate(verdicts, aggregation)
    if score is None:
        return Judgment(case_id=case_id, judge=judge, method="verdicts", score=None, valid=False,
                        reason="no statements (aggregation.on_empty: invalid)", verdicts=verdicts)
    return Judgment(case_id=case_id, judge=judge, method="verdicts", score=score, valid=True, verdicts=verdicts)


def aggregate(verdicts: Sequence[Verdict], aggregation, temperature: float | None = None) -> float | None:
    """TCVA score under a spec's aggregation (None: invalid by ``on_empty``)."""
    if not verdicts:
        return {"invalid": None, "zero": 0.0, "one": 1.0}[aggregation.on_empty]
    weights = aggregation.weights.model_dump()
    t = aggregation.temperature if temperature is None else temperature
    return tcva_score([v.verdict for v in verdicts], t, weights, aggregation.none_penalty)
