"""Judge clients: how a request body reaches a model and comes back as a Completion.

Clients live behind a registry and are imported only when a call is due, so
commands that send nothing never import litellm or aiohttp:

- ``litellm``: any provider litellm supports (:mod:`.litellm_client`, the only
  module that imports litellm);
- ``openai-http``: a direct client for OpenAI-compatible endpoints over one
  pooled aiohttp session (:mod:`.http_client`), with far less overhead per
  call;
- ``replay``: answers from a cassette recorded by ``geval-spec export``
  (:mod:`.replay`), so CI can run specs without keys or network.

Plugins add clients through the ``geval_spec.plugins`` entry-point group.
Every client raises :class:`TransportError` for a failed attempt; the
executor decides whether to retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Protocol


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Choice:
    text: str | None
    logprobs: tuple[TokenLogprob, ...] | None
    finish_reason: str | None = None


@dataclass(frozen=True)
class Completion:
    choices: tuple[Choice, ...]
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    latency_ms: float
    raw: dict[str, Any]


class TransportError(Exception):
    """One failed attempt.

    ``kind``: rate_limit, server, timeout, connection, malformed (retryable);
    client, auth (not retryable); replay_miss (a cassette has no answer).
    """

    def __init__(self, kind: str, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.kind in ("rate_limit", "server", "timeout", "connection", "malformed")


class Client(Protocol):
    name: str

    async def complete(self, body: dict[str, Any], timeout: float, key: str | None = None) -> Completion: ...

    async def close(self) -> None: ...


def retry_after_seconds(headers: Any) -> float | None:
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
        from email.utils import parsedate_to_datetime
        from datetime import datetime, timezone

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def completion_from_openai(data: dict[str, Any], model: str, latency_ms: float) -> Completion:
    """Parse an OpenAI chat.completion JSON body; raise TransportError(malformed) if it is not one."""
    from .. import costs

    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise TransportError("malformed", "response has no choices")
    choices = []
    for ch in data["choices"]:
        if not isinstance(ch, dict):
            raise TransportError("malformed", "a choice is not an object")
        message = ch.get("message") or {}
        text = message.get("content") if isinstance(message, dict) else None
        lp = ch.get("logprobs")
        tokens = None
        if isinstance(lp, dict) and isinstance(lp.get("content"), list):
            tokens = tuple(
                TokenLogprob(token=str(t.get("token", "")), logprob=float(t.get("logprob", float("-inf"))),
                             top=tuple((str(x.get("token", "")), float(x.get("logprob", float("-inf"))))
                                       for x in (t.get("top_logprobs") or [])))
                for t in lp["content"] if isinstance(t, dict))
        choices.append(Choice(text=text, logprobs=tokens, finish_reason=ch.get("finish_reason")))
    usage = data.get("usage") or {}
    pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return Completion(choices=tuple(choices), prompt_tokens=pt, completion_tokens=ct,
                      cost=costs.cost(model, pt, ct), latency_ms=latency_ms, raw=data)


_REGISTRY: dict[str, str] = {
    "litellm": "geval_spec.clients.litellm_client:LitellmClient",
    "openai-http": "geval_spec.clients.http_client:HttpClient",
    "replay": "geval_spec.clients.replay:ReplayClient",
}


def register(name: str, target: str) -> None:
    """Register a client class by dotted path ``module:Class`` (used by plugins)."""
    _REGISTRY[name] = target


def client_class(name: str):
    from ..plugins import load_plugins

    load_plugins()
    target = _REGISTRY.get(name)
    if target is None:
        raise KeyError(name)
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)
