"""The judge's output contract: its JSON object parsed, or the reason it is invalid.

For score methods the judge answers with one JSON object
``{"reasoning": text, "errors": [text, ...], "score": integer on the scale}``;
for verdicts ``{"statements": [{"statement", "verdict", "reason", "support"},
...]}``; for pairwise specs ``{"reasoning", "errors", "preferred": "A" | "B" |
"tie"}``; for generated steps ``{"steps": [text, ...]}``. Output that breaks
the contract is not an error: it becomes an invalid judgment with its reason,
stored and counted, never dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Literal, Sequence

from geval_spec.judge.tcva import normalise_verdict
from geval_spec.judge.types import Verdict
from geval_spec.spec.sections import VERDICT_LEVELS
from geval_spec.redact import lone_surrogate, scrub_surrogates
from geval_spec.values import frozen

Preference = Literal["a", "b", "tie"]

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?```\s*$", re.S)


@frozen
class JsonFound:
    """The judge's JSON object and where it stands in the output text (``text[start:end]``)."""

    value: dict[str, Any]
    start: int
    end: int


def extract_json(text: str | None, must_have: str) -> tuple[JsonFound | None, str | None]:
    """The judge's JSON object (the last one holding ``must_have``), or the reason there is none. An escape
    from ``\\ud800`` to ``\\udfff`` in it that is half of a character comes out as U+FFFD (what it holds is
    stored and reported)."""
    found, reason = _extract_json(text, must_have)
    if found is not None and text is not None and lone_surrogate(text, found.value):
        found = JsonFound(scrub_surrogates(found.value), found.start, found.end)
    return found, reason


def _extract_json(text: str | None, must_have: str) -> tuple[JsonFound | None, str | None]:
    if text is None or not text.strip():
        return None, "empty output"
    m = _FENCE.match(text)
    offset = m.start(1) if m else 0
    body = m.group(1) if m else text
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        pass
    else:
        if isinstance(value, dict):
            lead = len(body) - len(body.lstrip())
            return JsonFound(value, offset + lead, offset + len(body.rstrip())), None
        return None, f"output is JSON but not an object ({type(value).__name__})"
    decoder = json.JSONDecoder()
    found = None
    for i in [i for i, ch in enumerate(body) if ch == "{"]:
        try:
            value, end = decoder.raw_decode(body, i)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and must_have in value:
            found = JsonFound(value, offset + i, offset + end)
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


def _text_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(e, str) for e in value)


@frozen
class ScoreOutput:
    """One output under the score contract: the score, or why it is invalid."""

    score: int | None
    reason: str | None = None
    errors: tuple[str, ...] | None = None  # the judge's listed errors
    span: tuple[int, int] | None = None  # where the JSON object stands in the output


def parse_score_output(text: str | None, scores: Sequence[int]) -> ScoreOutput:
    found, reason = extract_json(text, "score")
    if found is None:
        return ScoreOutput(None, reason)
    obj = found.value
    for key in ("reasoning", "errors", "score"):
        if key not in obj:
            return ScoreOutput(None, f"missing key '{key}'")
    if not isinstance(obj["reasoning"], str):
        return ScoreOutput(None, "'reasoning' is not text")
    if not _text_list(obj["errors"]):
        return ScoreOutput(None, "'errors' is not a list of text")
    errors = tuple(obj["errors"])
    score = as_int_score(obj["score"])
    if score is None:
        return ScoreOutput(None, f"score {obj['score']!r} is not an integer", errors)
    if score not in scores:
        return ScoreOutput(None, f"score {score} is outside {min(scores)}..{max(scores)}", errors)
    return ScoreOutput(score, None, errors, (found.start, found.end))


def parse_verdicts(text: str | None) -> tuple[tuple[Verdict, ...] | None, str | None]:
    found, reason = extract_json(text, "statements")
    if found is None:
        return None, reason
    items = found.value.get("statements")
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
            return None, (f"statement {n}: unknown verdict {item.get('verdict')!r} "
                          f"(expected {', '.join(VERDICT_LEVELS)})")
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


PREFERENCE: dict[Preference, float] = {"a": 1.0, "b": 0.0, "tie": 0.5}


def parse_preference(text: str | None) -> tuple[Preference | None, str | None]:
    """'a', 'b' or 'tie' under the pairwise contract, or the reason it is invalid."""
    found, reason = extract_json(text, "preferred")
    if found is None:
        return None, reason
    obj = found.value
    for key in ("reasoning", "errors", "preferred"):
        if key not in obj:
            return None, f"missing key '{key}'"
    if not isinstance(obj["reasoning"], str):
        return None, "'reasoning' is not text"
    if not _text_list(obj["errors"]):
        return None, "'errors' is not a list of text"
    said = str(obj["preferred"]).strip().lower().removeprefix("candidate ").strip()
    for pref in PREFERENCE:
        if said == pref:
            return pref, None
    return None, f"preferred {obj['preferred']!r} is not A, B or tie"


def parse_steps(text: str | None) -> list[str] | str:
    """Generated evaluation steps, or the reason they are unusable."""
    found, reason = extract_json(text, "steps")
    if found is None:
        return reason or "no steps"
    steps = found.value.get("steps")
    if not isinstance(steps, list) or len(steps) < 2 or not all(isinstance(s, str) and s.strip() for s in steps):
        return "'steps' must be a list of at least two sentences"
    return [" ".join(s.split()) for s in steps]
