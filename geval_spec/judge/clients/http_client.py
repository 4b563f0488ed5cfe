"""A direct client for OpenAI-compatible chat endpoints: one pooled aiohttp session.

Chosen per judge with ``client: openai-http``, and by ``client: auto`` for
``openai/`` models. It sends the request body geval-spec planned (the model
name without litellm's ``openai/`` prefix; ``max_completion_tokens`` for
reasoning models), with ``Authorization: Bearer $OPENAI_API_KEY`` when that
variable is set. The key is read from the environment at call time and never
stored; an answer or error that echoes it is redacted (:mod:`.base`).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from functools import lru_cache
from typing import Any

from geval_spec.errors import InputError, Problem
from geval_spec.judge.clients.base import TransportError, completion_from_openai, rate_info, retry_after_seconds
from geval_spec.judge.models import facts
from geval_spec.judge.types import Completion, JsonObject
from geval_spec.redact import url_credentials
from geval_spec.spec.fingerprint import canonical

DEFAULT_BASE = "https://api.openai.com/v1"
LITELLM_ONLY = frozenset({"cache_control_injection_points"})
MAX_ANSWER_BYTES = 64 << 20  # an answer larger than this (decompressed) is refused, not read into memory


def wire_model(model: str) -> str:
    return model.split("/", 1)[1] if model.startswith("openai/") else model


def wire_body(body: JsonObject) -> JsonObject:
    """The planned body as OpenAI's API takes it: the model without ``openai/``, ``max_completion_tokens`` for
    reasoning models (which refuse ``max_tokens``), and no litellm-only keys."""
    payload = {k: v for k, v in body.items() if k not in LITELLM_ONLY}
    payload["model"] = wire_model(body["model"])
    if "max_tokens" in payload and facts(body["model"]).reasoning:
        payload["max_completion_tokens"] = payload.pop("max_tokens")
    return payload


def wire_text(body: JsonObject, text: str) -> str | None:
    """:func:`wire_body` as JSON, made from the planned body's canonical JSON ``text`` (encoded once, when the
    request was planned) by putting the wire model's name in place of the model's; None when the wire body
    differs by more than that, or ``text`` is not the body's canonical JSON.

    Keys are sorted in canonical JSON: the top-level ``"model"`` is followed only by the keys that sort after
    it, which are small (``n``, ``seed``, ``temperature``, ...), so only they are encoded to find it: once per
    judge's settings when they are scalars."""
    model = body.get("model")
    if not isinstance(model, str) or LITELLM_ONLY.intersection(body) or (
            "max_tokens" in body and _reasoning(model)):
        return None
    wire = wire_model(model)
    if wire == model:
        return text
    after = {k: v for k, v in body.items() if k > "model"}
    if all(type(v) in _SCALARS for v in after.values()):  # the judge's settings: the same for every request of a run
        old, new = _model_ends(model, wire, tuple((k, type(v), repr(v), v) for k, v in after.items()))
    else:
        old, new = _model_end(model, wire, after)
    if not text.endswith(old):
        return None
    return text[:-len(old)] + new


_SCALARS = frozenset({str, int, float, bool, type(None)})


@lru_cache(maxsize=64)
def _reasoning(model: str) -> bool:
    return facts(model).reasoning


@lru_cache(maxsize=64)
def _model_ends(model: str, wire: str, after: tuple[tuple[str, type, str, Any], ...]) -> tuple[str, str]:
    """:func:`_model_end` for a body whose keys after ``"model"`` hold scalars, kept by their types and reprs too
    (``0``, ``0.0``, ``-0.0`` and ``False`` are equal but encode differently)."""
    return _model_end(model, wire, {k: v for k, _, _, v in after})


def _model_end(model: str, wire: str, after: dict[str, Any]) -> tuple[str, str]:
    """How canonical JSON ends from the top-level ``"model"`` on, with the model's name and with the wire name."""
    rest = canonical(after)[1:-1]
    end = "}" if not rest else "," + rest + "}"
    return '"model":' + canonical(model) + end, '"model":' + canonical(wire) + end


class aiohttp_failures:
    """aiohttp's timeouts and connection failures as the TransportErrors the runner retries (a context manager).

    ``waiting_for`` names what did not answer in the timeout's message. A TransportError raised inside (an
    HTTP error) passes through; messages are redacted by TransportError itself. (A class rather than a
    generator: it is entered once per request.)
    """

    def __init__(self, api_base: str | None, timeout: float, waiting_for: str = "") -> None:
        self.api_base, self.timeout, self.waiting_for = api_base, timeout, waiting_for

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return
        import aiohttp

        if isinstance(exc, asyncio.TimeoutError):
            what = f" from {self.waiting_for}" if self.waiting_for else ""
            raise TransportError("timeout", f"no answer{what} within {self.timeout:g} s") from None
        if isinstance(exc, aiohttp.ClientConnectorError):
            raise TransportError("connection", f"cannot connect to {self.api_base}: {exc.os_error or exc}") from None
        if isinstance(exc, (aiohttp.ClientError, OSError)):
            raise TransportError("connection", f"{type(exc).__name__}: {exc}") from None


class HttpClient:
    name = "openai-http"

    def __init__(self, api_base: str | None, concurrency: int) -> None:
        if api_base is None:  # the spec's api_base is checked at load; these are checked here, as aiohttp refused
            for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):  # one with user information (exit 70)
                reason = url_credentials(os.environ.get(name) or "")
                if reason is not None:
                    raise InputError(problems=[Problem(f"{name} carries credentials: {reason}",
                                                       hint="give the key in OPENAI_API_KEY, not in the URL")])
        self.api_base = (api_base or os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL")
                         or DEFAULT_BASE).rstrip("/")
        self.concurrency = concurrency
        self._session: Any = None

    @staticmethod
    def warm_up() -> None:
        """Import aiohttp (a tenth of a second) ahead of the first request; an error surfaces there instead."""
        try:
            import aiohttp  # noqa: F401
        except Exception:
            pass

    async def _get_session(self) -> Any:
        if self._session is None:
            import aiohttp

            connector = aiohttp.TCPConnector(limit=max(1, self.concurrency), ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def complete(self, body: JsonObject, timeout: float, key: str | None = None, *,
                       text: str | None = None) -> Completion:
        """Send ``body`` (``text``: its canonical JSON, sent as it is when only the model's name changes)."""
        import aiohttp

        session = await self._get_session()
        sent = wire_text(body, text) if text is not None else None
        payload = sent.encode("utf-8") if sent is not None else json.dumps(wire_body(body)).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get("OPENAI_API_KEY")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        start = time.perf_counter()
        with aiohttp_failures(self.api_base, timeout):
            async with session.post(f"{self.api_base}/chat/completions", data=payload, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                answer = await _read_text(resp)
                status = resp.status
                retry_after = retry_after_seconds(resp.headers)
                limits = rate_info(resp.headers)
        latency = (time.perf_counter() - start) * 1000.0
        if status != 200:
            detail = _error_message(answer)
            if status == 429:
                raise TransportError("rate_limit", f"HTTP 429: {detail}", status=status, retry_after=retry_after,
                                     limits=limits)
            if status >= 500 or status == 408:
                raise TransportError("server", f"HTTP {status}: {detail}", status=status, retry_after=retry_after,
                                     limits=limits)
            if status in (401, 403):
                raise TransportError("auth", f"HTTP {status}: {detail}", status=status)
            raise TransportError("client", f"HTTP {status}: {detail}", status=status)
        try:
            data = json.loads(answer)
        except (ValueError, RecursionError):  # (RecursionError: JSON nested deeper than Python's stack)
            raise TransportError("malformed", f"response body is not JSON: {answer[:80]!r}") from None
        return completion_from_openai(data, body["model"], latency, limits=limits, text=answer)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _read_text(resp: Any) -> str:
    """The answer's body as text: read up to MAX_ANSWER_BYTES after decompression (a small gzip body can unpack to
    gigabytes), decoded as UTF-8 (JSON's encoding; bytes that are not UTF-8 become U+FFFD instead of ending the
    run with an internal error)."""
    if resp.content_length is not None and resp.content_length > MAX_ANSWER_BYTES \
            and not resp.headers.get("Content-Encoding"):
        raise TransportError("malformed", f"the answer is larger than {MAX_ANSWER_BYTES >> 20} MB")
    chunks, size = [], 0
    while True:
        chunk = await resp.content.readany()
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise TransportError("malformed", f"the answer is larger than {MAX_ANSWER_BYTES >> 20} MB")
        chunks.append(chunk)
    return (chunks[0] if len(chunks) == 1 else b"".join(chunks)).decode("utf-8", errors="replace")


def _error_message(text: str) -> str:
    try:
        data = json.loads(text)
        msg = data.get("error", {}).get("message") if isinstance(data, dict) else None
        if msg:
            return str(msg)[:300]
    except (ValueError, RecursionError):
        pass
    return text[:300]
