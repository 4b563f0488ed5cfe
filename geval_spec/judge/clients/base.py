"""What every judge client shares: the :class:`Client` protocol, :class:`TransportError`, response parsing.

A client sends one request body and returns a
:class:`~geval_spec.judge.types.Completion`, or raises :class:`TransportError`
for a failed attempt; the runner decides whether to retry.

Secrets stop here: a :class:`TransportError`'s message and a completion's raw
body and texts are redacted (:mod:`geval_spec.redact`) before a client returns
them, so a judge that echoes the API key (in a 401, a 500 body or its own
answer) puts it in no store, journal, cassette, report or terminal.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Protocol

from geval_spec.judge.types import Choice, Completion, JsonObject, Logprobs, RateInfo, Recorded, token_count
from geval_spec.redact import (MASK, kept_dict, kept_list, lone_surrogate, redact, redact_json, scrub_surrogates,
                                secret_spans, secret_values)


class TransportError(Exception):
    """One failed attempt.

    ``kind``: rate_limit, server, timeout, connection, malformed (retryable);
    client, auth (not retryable); replay_miss (a cassette has no answer).
    """

    def __init__(self, kind: str, message: str, *, status: int | None = None,
                 retry_after: float | None = None, limits: RateInfo | None = None) -> None:
        super().__init__(redact(message))
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.limits = limits

    @property
    def retryable(self) -> bool:
        return self.kind in ("rate_limit", "server", "timeout", "connection", "malformed")


class Client(Protocol):
    """A way to reach a judge. ``key`` is the request's hash (a cassette answers by it)."""

    name: str

    async def complete(self, body: JsonObject, timeout: float, key: str | None = None) -> Completion: ...

    async def close(self) -> None: ...


class TextClient(Client, Protocol):
    """A client whose ``complete`` also takes ``text``: the body's canonical JSON, as encoded when the request was
    planned (the direct client sends it rather than encode the body again)."""

    async def complete(self, body: JsonObject, timeout: float, key: str | None = None, *,
                       text: str | None = None) -> Completion: ...


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Retry-After (seconds or HTTP date) and OpenAI's retry-after-ms, as seconds."""
    if not headers:
        return None
    get = headers.get
    ms = get("retry-after-ms") or get("Retry-After-Ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = get("retry-after") or get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from datetime import datetime, timezone
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def duration_seconds(text: str) -> float | None:
    """OpenAI's reset durations ("0s", "120ms", "1.5s", "6m0s", "1h2m3s") and bare seconds, as seconds."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def rate_info(headers: Mapping[str, str] | None) -> RateInfo | None:
    """The ``x-ratelimit-*`` headers (also as litellm passes them on, prefixed ``llm_provider-``); None if absent."""
    if not headers:
        return None
    found: dict[str, str] = {}
    for key, value in headers.items():
        k = str(key).lower().removeprefix("llm_provider-")
        if k.startswith("x-ratelimit-"):
            found[k[len("x-ratelimit-"):]] = str(value)
    if not found:
        return None

    def number(name: str) -> int | None:
        try:
            return int(float(found[name])) if name in found else None
        except (ValueError, OverflowError):  # ("1e400", "inf": no count of requests or tokens)
            return None

    def seconds(name: str) -> float | None:
        return duration_seconds(found[name]) if name in found else None

    return RateInfo(limit_requests=number("limit-requests"), limit_tokens=number("limit-tokens"),
                    remaining_requests=number("remaining-requests"), remaining_tokens=number("remaining-tokens"),
                    reset_requests=seconds("reset-requests"), reset_tokens=seconds("reset-tokens"))


def usage_of(data: JsonObject) -> tuple[int | None, int | None, int | None, int | None]:
    """(prompt, completion, cached prompt, reasoning) tokens of a response body, None where it does not say.

    Cached tokens are read from OpenAI's ``prompt_tokens_details.cached_tokens`` and Anthropic's
    ``cache_read_input_tokens``; reasoning tokens from ``completion_tokens_details.reasoning_tokens``.
    """
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None, None, None, None
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = token_count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else None
    if cached is None:
        cached = token_count(usage.get("cache_read_input_tokens"))
    reasoning = (token_count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict)
                 else None)
    return token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens")), cached, reasoning


def completion_from_openai(data: JsonObject, model: str, latency_ms: float,
                           limits: RateInfo | None = None, text: str | None = None) -> Completion:
    """Parse an OpenAI chat.completion JSON body (redacted first); raise TransportError(malformed) if it is not one.

    Token logprobs are kept as the body has them and read only where they are needed (:class:`Logprobs`).
    ``text`` is the body as received: it is kept, to be stored as is, when redaction masked nothing in it
    (otherwise the masked body is encoded again, and the received text is dropped).
    """
    from geval_spec.judge import costs

    received = data
    if lone_surrogate(text, data):  # half of a character is no text to store: kept as U+FFFD (a new body)
        data = scrub_surrogates(data)
    data = redact_body(data)
    raw_text = text if text is not None and data is received else None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise TransportError("malformed", "response has no choices")
    choices = []
    for ch in data["choices"]:
        if not isinstance(ch, dict):
            raise TransportError("malformed", "a choice is not an object")
        message = ch.get("message") or {}
        text = message.get("content") if isinstance(message, dict) else None
        lp = ch.get("logprobs")
        tokens = Logprobs(lp["content"]) if isinstance(lp, dict) and isinstance(lp.get("content"), list) else None
        choices.append(Choice(text=text if isinstance(text, str) else None, logprobs=tokens,
                              finish_reason=ch.get("finish_reason")))
    pt, ct, cached, reasoning = usage_of(data)
    return Completion(choices=tuple(choices), prompt_tokens=pt, completion_tokens=ct,
                      cost=costs.cost(model, pt, ct, cached), latency_ms=latency_ms, raw=data,
                      cached_tokens=cached, reasoning_tokens=reasoning, limits=limits, raw_text=raw_text)


def redact_body(data: Any) -> Any:
    """A chat completion body with its secrets masked (see :mod:`geval_spec.redact`).

    Every text of the body is redacted. The logprobs are handled apart (they
    are most of a body's size): where the chosen tokens spell a secret, those
    tokens become ``[redacted]`` (so the tokens still spell the redacted text,
    and scores are read at the right place) and their alternatives and bytes
    are masked too; an alternative that holds a secret by itself (a server
    can answer anything there) is redacted, and its bytes dropped. A body in
    which nothing is masked comes back as the same object; otherwise the input
    is not changed.
    """
    if not isinstance(data, dict):
        return redact_json(data)
    values = secret_values()
    texts: list[str] = []
    _body_texts(data, texts)
    joined = "\x00".join(texts)  # no pattern matches across a NUL that did not match inside one of the texts
    if not secret_spans(joined, values) and not lone_surrogate(None, joined):
        return data  # one search over every text the walk below would redact one by one (a fifth of the time)
    return _masked_body(data, values)


def _masked_body(data: dict[str, Any], values: tuple[str, ...]) -> dict[str, Any]:
    return _kept(data, [(key, kept_list(value, [_redact_choice(ch, values) for ch in value])
                         if key == "choices" and isinstance(value, list) else redact_json(value, values))
                        for key, value in data.items()], values)


def _body_texts(data: dict[str, Any], out: list[str]) -> None:
    """Every text of a body that :func:`_masked_body` redacts, into ``out``: keys and strings, and each choice's
    chosen tokens joined (their alternatives are masked only with them)."""
    for key, value in data.items():
        if isinstance(key, str):
            out.append(key)
        if key != "choices" or not isinstance(value, list):
            _texts(value, out)
            continue
        for choice in value:
            if not isinstance(choice, dict):
                _texts(choice, out)
                continue
            for k, v in choice.items():
                if isinstance(k, str):
                    out.append(k)
                if k != "logprobs" or not isinstance(v, dict) or not isinstance(v.get("content"), list):
                    _texts(v, out)
                    continue
                for n, x in v.items():
                    if isinstance(n, str):
                        out.append(n)
                    if n == "content":
                        out.append(_chosen_text(x))
                        out.extend(_alternatives(x))
                    else:
                        _texts(x, out)


def _chosen_text(tokens: list[Any]) -> str:
    """The chosen tokens' texts joined; an item that is not a token with a text adds nothing.

    A well-formed answer is read without a check per token (the join refuses any text that is not a string, and
    the lookups anything that is not a token): the checked reading only when that fails."""
    try:
        return "".join([t["token"] for t in tokens])
    except (TypeError, KeyError):
        return "".join([t["token"] if isinstance(t, dict) and isinstance(t.get("token"), str) else "" for t in tokens])


def _alternatives(tokens: list[Any]) -> list[str]:
    """The texts of the tokens' alternatives (``top_logprobs``), each apart; an item that is not an alternative
    with a text, or a ``top_logprobs`` that is not a list, adds nothing.

    As :func:`_chosen_text`: unchecked first (a ``top_logprobs`` that is a text or an object yields texts, which
    the lookup refuses), checked when that fails; half the time of the checked reading with 5 alternatives."""
    try:
        found = [a["token"] for t in tokens for a in t["top_logprobs"]]
        "".join(found)  # (each is a string)
        return found
    except (TypeError, KeyError):
        return [a["token"] for t in tokens if isinstance(t, dict) and isinstance(alts := t.get("top_logprobs"), list)
                for a in alts if isinstance(a, dict) and isinstance(a.get("token"), str)]


def _texts(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                out.append(k)
            _texts(v, out)
    elif isinstance(value, list):
        for v in value:
            _texts(v, out)


def _kept(original: dict[str, Any], redacted: list[tuple[str, Any]], values: tuple[str, ...]) -> dict[str, Any]:
    """``original`` itself when redaction changed none of its keys and values (so no copy is kept and no comparison
    is needed to know the body is as received), else the redacted copy (keys redacted too: a server may echo a
    secret as a key)."""
    return kept_dict(original, [(redact(k, values) if isinstance(k, str) else k, v) for k, v in redacted])


def _redact_choice(choice: Any, values: tuple[str, ...]) -> Any:
    if not isinstance(choice, dict):
        return redact_json(choice, values)
    out: list[tuple[str, Any]] = []
    for k, v in choice.items():
        if k != "logprobs":
            out.append((k, redact_json(v, values)))
        elif isinstance(v, dict) and isinstance(v.get("content"), list):
            out.append((k, _kept(v, [(n, _redact_tokens(x, values) if n == "content"
                                      else redact_json(x, values)) for n, x in v.items()], values)))
        else:
            out.append((k, redact_json(v, values)))
    return _kept(choice, out, values)


def _redact_tokens(tokens: list[Any], values: tuple[str, ...]) -> list[Any]:
    """Logprob tokens with those that spell part of a secret masked (their alternatives and bytes too), and any
    alternative that holds a secret by itself redacted."""
    texts: list[str] = [t["token"] if isinstance(t, dict) and isinstance(t.get("token"), str) else "" for t in tokens]
    spans = secret_spans("".join(texts), values)
    if not spans and not secret_spans("\x00".join(_alternatives(tokens)), values):
        return tokens
    out = []
    pos = 0
    for token, text in zip(tokens, texts):
        start, end = pos, pos + len(text)
        pos = end
        inside = [(max(a, start) - start, min(b, end) - start, a >= start) for a, b in spans if a < end and start < b]
        if not isinstance(token, dict):  # (an item that is no token spells nothing)
            out.append(token)
            continue
        if not inside:
            out.append(_alternatives_redacted(token, values))
            continue
        kept, at = [], 0
        for a, b, opens in inside:
            kept.append(text[at:a] + (MASK if opens else ""))
            at = b
        kept.append(text[at:])
        masked = dict(token, token="".join(kept), bytes=None)
        if isinstance(token.get("top_logprobs"), list):
            masked["top_logprobs"] = [dict(x, token=MASK, bytes=None) if isinstance(x, dict) else x
                                      for x in token["top_logprobs"]]
        out.append(masked)
    return out


def _alternatives_redacted(token: dict[str, Any], values: tuple[str, ...]) -> dict[str, Any]:
    """``token`` with each alternative that holds a secret redacted (and its bytes dropped); itself if none does."""
    alts = token.get("top_logprobs")
    if not isinstance(alts, list):
        return token
    redacted = [dict(a, token=redact(a["token"], values), bytes=None)
                if isinstance(a, dict) and isinstance(a.get("token"), str) and secret_spans(a["token"], values) else a
                for a in alts]
    return token if redacted == alts else dict(token, top_logprobs=redacted)


def completion_of(recorded: Recorded, model: str) -> Completion:
    """A recorded response back as the Completion it was, with its recorded usage and cost."""
    c = completion_from_openai(recorded.response, model, recorded.latency_ms or 0.0)
    return Completion(choices=c.choices, prompt_tokens=recorded.prompt_tokens,
                      completion_tokens=recorded.completion_tokens, cost=recorded.cost,
                      latency_ms=recorded.latency_ms or 0.0, raw=c.raw,
                      cached_tokens=recorded.cached_tokens, reasoning_tokens=recorded.reasoning_tokens)
