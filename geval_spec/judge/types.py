"""The judge's value types, from a rendered prompt to a judgment.

    Rendered (messages, in :mod:`geval_spec.judge.messages`) -> Request (body + hash) -> Completion (choices, usage)
                                                 -> Judgment (score or invalid, with its Details)

All are frozen. A request body and a completion's raw body are JSON objects
as they go over the wire (``JsonObject``); everything read out of them is
typed here.
"""

from __future__ import annotations

import math

import json
import re
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Mapping, Sequence

from geval_spec.spec.sections import VerdictLevel
from geval_spec.values import frozen

JsonObject = dict[str, Any]  # a JSON object exactly as sent or received

HASH_CHARS = 32  # a request's hash: the first 128 bits of a SHA-256, in hex (the store's keys; see request_key)
_HEX = re.compile(r"[0-9a-f]+")


def request_key(text: str) -> str:
    """A request hash as the store keys it: a whole SHA-256 in hex (64 digits) is cut to its first HASH_CHARS; any
    other text is kept as it is (it then names no request this version makes). Stores before schema version 3
    keyed a request by the whole SHA-256, and so do the cassettes, journals and batch files written then: they are
    read back through this. (An index of 64-digit keys held 13-17 MB at 100,000 requests, and every session of a
    run that writes loads three: BENCHMARKS.md, scale.)"""
    if len(text) == 2 * HASH_CHARS and _HEX.fullmatch(text):
        return text[:HASH_CHARS]
    return text


Method = Literal["logprobs", "samples", "direct", "verdicts"]
METHODS: tuple[Method, ...] = ("logprobs", "samples", "direct", "verdicts")
Purpose = Literal["judge", "swap", "steps", "fallback"]


@frozen
class Request:
    """One request to a judge model: its hash, case, judge, purpose and body."""

    hash: str
    case_id: str
    judge: str  # judge label
    sample: int  # sample index (0 when one request gives every sample)
    n: int  # completions asked for in this request
    purpose: Purpose  # judge, swap (position-swapped pairwise), steps, fallback
    body: JsonObject  # what goes over the wire, minus credentials
    body_text: str = ""  # the body's canonical JSON (what the store keeps), when it was made here

    @property
    def model(self) -> str:
        return str(self.body["model"])

    @property
    def messages(self) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = self.body["messages"]
        return messages


@frozen
class TokenLogprob:
    """One chosen token with its log-probability and the alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


class Logprobs:
    """The token logprobs of one choice, read lazily from the response body.

    A response carries the top alternatives at every position; only the few
    positions where the score is written are ever needed, so they are read
    on demand (:meth:`alternatives`) and :meth:`texts` gives only the chosen
    tokens' text.
    """

    __slots__ = ("_content",)

    def __init__(self, content: Sequence[Any]) -> None:
        self._content = content  # the "content" list of an OpenAI logprobs object

    @classmethod
    def of(cls, tokens: Sequence[TokenLogprob]) -> "Logprobs":
        return cls([{"token": t.token, "logprob": t.logprob,
                     "top_logprobs": [{"token": a, "logprob": lp} for a, lp in t.top]} for t in tokens])

    def __len__(self) -> int:
        return len(self._content)

    def texts(self) -> list[str]:
        """The chosen tokens' texts (a token's text that is not a string as ``str`` gives it; an item that is not
        a token: ``""``). Read without a check per token first, as most answers are well formed."""
        try:
            found = [t["token"] for t in self._content]
            "".join(found)  # (each is a string)
            return found
        except (TypeError, KeyError):
            return [str(t.get("token", "")) if isinstance(t, dict) else "" for t in self._content]

    def alternatives(self, i: int) -> list[tuple[str, float]]:
        """The alternatives at position ``i`` as (text, logprob), the chosen token among them (last, when the
        provider left it out): what scoring reads at the score's positions."""
        t = self._content[i]
        if not isinstance(t, dict):
            return [("", float("-inf"))]
        token = str(t.get("token", ""))
        tops = [(str(x.get("token", "")), _logprob(x.get("logprob"))) for x in (t.get("top_logprobs") or [])
                if isinstance(x, dict)]
        if all(a != token for a, _ in tops):
            tops.append((token, _logprob(t.get("logprob"))))
        return tops


MAX_COUNT = 2**31 - 1  # the store's token columns are 32-bit integers


def token_count(value: Any) -> int | None:
    """A token count as a response, a cassette or a journal gives it: a whole number from 0 to MAX_COUNT, else None
    (unknown). A count the store cannot hold (10**30 from a hostile server) failed every write of the run and of
    its journal's replay: the store could not be opened again until the journal was deleted by hand."""
    return value if type(value) is int and 0 <= value <= MAX_COUNT else None


def is_amount(value: Any) -> bool:
    """Whether ``value`` is a cost or a latency a record may hold: a finite number of at least 0 (not a bool)."""
    return type(value) in (int, float) and math.isfinite(value) and value >= 0


def _logprob(value: Any) -> float:
    """A logprob as a float (anything that is no number: -inf). A whole number too large for a float (a server
    can send 10**400) is +-inf, which the scoring's mass check refuses, instead of an OverflowError (exit 70, and
    again at every rerun, which reads the same stored answer)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return float("-inf")
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


@frozen
class Choice:
    """One choice of a completion: its text, its token logprobs and why it stopped."""

    text: str | None
    logprobs: Logprobs | None
    finish_reason: str | None = None


@frozen
class Completion:
    """A judge model's answer to one request: its choices, token counts, cost and latency."""

    choices: tuple[Choice, ...]
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency_ms: float
    raw: JsonObject
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    limits: RateInfo | None = None  # the provider's x-ratelimit-* headers with this answer
    raw_text: str | None = None  # the body exactly as received, when redaction masked nothing in it (stored as is)

    def body_text(self) -> str:
        """The body to keep: as received when nothing was masked, else the masked body encoded once."""
        return self.raw_text if self.raw_text is not None else json.dumps(self.raw, ensure_ascii=False)


@frozen
class RateInfo:
    """What a provider's ``x-ratelimit-*`` headers said with one answer; None where a header was absent."""

    limit_requests: int | None = None  # per minute
    limit_tokens: int | None = None
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests: float | None = None  # seconds until the request budget is full again
    reset_tokens: float | None = None


@frozen
class Recorded:
    """A successful response as recorded (in the store or a cassette): it answers its request again."""

    request_hash: str
    response: JsonObject  # the chat.completion body received
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency_ms: float | None
    request: JsonObject | None = None  # the body that was sent, when known
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


@frozen
class Verdict:
    """A TCVA verdict on one statement, with the judge's reason and support."""

    statement: str
    verdict: VerdictLevel
    reason: str = ""
    support: str = ""


@frozen
class Details:
    """What a judgment records besides its score; every field is optional.

    Stored as a JSON object holding the fields that are set (so a stored
    judgment reads back as the same value).
    """

    written_score: int | None = None  # logprobs: the score the judge wrote
    errors: tuple[str, ...] | None = None  # the judge's listed errors (score contract)
    ambiguous_mass: float | None = None  # logprobs: mass of digits that could start a longer score
    invalid_samples: int | None = None  # samples: how many did not parse
    invalid_reasons: tuple[str, ...] | None = None
    order_ab: float | None = None  # pairwise: preference for A in the order shown
    order_ba: float | None = None  # pairwise with position swap: preference for A in the swapped order
    swapped: bool = False  # pairwise: both orders were judged
    rule: str | None = None  # pairwise: how the two orders were combined
    consistent: bool | None = None  # pairwise: both orders picked the same candidate
    one_order_invalid: str | None = None
    fallback_from: str | None = None  # the method this judgment replaced (no logprobs)
    imported: str | None = None  # import: the line's form
    statements: int | None = None  # verdicts: how many statements were parsed (0 is possible)
    pairwise: bool = False  # a pairwise judgment (order_ab is meaningful)

    def to_json(self) -> JsonObject | None:
        if not (self.pairwise or self.swapped):  # most judgments: the fields that are set, in the fields' order
            # (read from the instance's dict, which __init__ fills in that order: 0.55 instead of 1.5 us a judgment)
            return {name: list(value) if isinstance(value, tuple) else value for name, value in self.__dict__.items()
                    if value is not None and name not in _FLAGS} or None
        return self.json_by_field()

    def json_by_field(self) -> JsonObject | None:
        """:meth:`to_json` read field by field: a pairwise judgment's keys, which are kept when None."""
        out: JsonObject = {}
        for name in _field_names(type(self)):  # (a judgment is stored with every run: fields() per call was slow)
            value = getattr(self, name)
            if name in ("swapped", "pairwise"):
                continue
            if name == "order_ab" and self.pairwise:
                out["order_ab"] = value
            elif name in ("order_ba", "rule") and self.swapped:
                out[name] = value
            elif name == "consistent" and self.swapped:
                out["consistent"] = value
            elif value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        return out or None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "Details":
        if not data:
            return NO_DETAILS if cls is Details else cls()
        known = _DETAIL_FIELDS if cls is Details else {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in known}
        values["pairwise"] = "order_ab" in data
        values["swapped"] = "order_ba" in data
        return cls(**values)


NO_DETAILS = Details()
_FLAGS = ("swapped", "pairwise")  # Details fields never stored as keys (what the values stored say)
_DETAIL_FIELDS = frozenset(f.name for f in fields(Details))


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """The names of a dataclass's fields, in order (asked once per class)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


@dataclass(frozen=True, slots=True)  # slots: 128 bytes, not 352 (a gate holds every one)
class Judgment:
    """The score of one case by one judge under a score method, or why there is none."""

    case_id: str
    judge: str
    method: Method
    score: float | None
    valid: bool
    reason: str | None = None  # why it is invalid
    distribution: Mapping[int, float] | None = None
    valid_mass: float | None = None
    samples: tuple[float | None, ...] | None = None
    spread: float | None = None
    verdicts: tuple[Verdict, ...] | None = None
    details: Details = field(default=NO_DETAILS)

    @staticmethod
    def invalid(case_id: str, judge: str, method: Method, reason: str, details: Details = NO_DETAILS) -> "Judgment":
        return Judgment(case_id=case_id, judge=judge, method=method, score=None, valid=False, reason=reason,
                        details=details)
