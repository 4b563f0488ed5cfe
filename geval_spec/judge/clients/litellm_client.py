"""The litellm client: any provider litellm supports. The only module that imports litellm.

litellm is imported when the first call is due, with its network cost-map
fetch, telemetry, callbacks and feedback messages off. We do our own retries,
so litellm's are off too (``num_retries=0``). Credentials come from the usual
environment variables, read by litellm at call time and never stored.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Mapping

from geval_spec.judge.clients.base import TransportError, completion_from_openai, rate_info, retry_after_seconds
from geval_spec.judge.clients.batch_api import ENDPOINT, WINDOW, BatchState, state_of
from geval_spec.judge.types import Completion, JsonObject

_litellm: Any = None
_MISSING_KEY = re.compile(r"missing credentials|api_key client option must be set|no api key|"
                          r"set the `?[A-Z_]*API_KEY`? environment variable", re.I)


def _import() -> Any:
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.callbacks = []
        litellm.success_callback = []
        litellm.failure_callback = []
        litellm.drop_params = False
        _litellm = litellm
    return _litellm


class LitellmClient:
    name = "litellm"

    def __init__(self, api_base: str | None, concurrency: int) -> None:
        self.api_base = api_base
        self.concurrency = concurrency

    @staticmethod
    def warm_up() -> None:
        """Import litellm (seconds of CPU) ahead of the first call; errors surface at that call instead."""
        try:
            _import()
        except Exception:
            pass

    async def complete(self, body: JsonObject, timeout: float, key: str | None = None) -> Completion:
        litellm = _import()
        kwargs = dict(body)
        if self.api_base:
            kwargs["api_base"] = self.api_base
            if body["model"].startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                kwargs["api_key"] = "no-key"  # local OpenAI-compatible servers need none
        start = time.perf_counter()
        try:
            response = await litellm.acompletion(num_retries=0, timeout=timeout, **kwargs)
        except Exception as exc:  # litellm maps every provider error onto its own classes
            raise _transport_error(exc) from None
        latency = (time.perf_counter() - start) * 1000.0
        data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
        hidden = getattr(response, "_hidden_params", None)
        headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
        return completion_from_openai(data, body["model"], latency,
                                      limits=rate_info(headers) if isinstance(headers, dict) else None)

    async def close(self) -> None:
        return None


def _transport_error(exc: Exception) -> TransportError:
    litellm = _import()
    status = getattr(exc, "status_code", None)
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    retry_after = retry_after_seconds(headers)
    limits = rate_info(headers) if isinstance(headers, Mapping) else None
    message = str(exc).replace("litellm.", "").strip()[:300]
    if isinstance(status, int):  # the status first, as the direct client says it
        message = f"HTTP {status}: {message}"
    ex = litellm.exceptions
    if _MISSING_KEY.search(message):  # litellm reports a missing key as a 500 of its own: no retry will help
        return TransportError("auth", message, status=status)
    if isinstance(exc, ex.RateLimitError):
        return TransportError("rate_limit", message, status=429, retry_after=retry_after, limits=limits)
    if isinstance(exc, ex.Timeout):
        return TransportError("timeout", message, status=status)
    if isinstance(exc, ex.APIConnectionError) or "Connection error" in message:
        return TransportError("connection", message, status=status)
    if isinstance(exc, (ex.AuthenticationError, ex.PermissionDeniedError)):
        return TransportError("auth", message, status=status)
    if isinstance(exc, (ex.InternalServerError, ex.ServiceUnavailableError)) or (status or 0) >= 500:
        return TransportError("server", message, status=status, retry_after=retry_after)
    if isinstance(exc, ex.BadRequestError) or (status is not None and 400 <= status < 500):
        return TransportError("client", message, status=status)
    if isinstance(exc, ValueError) and "JSON" in message:
        return TransportError("malformed", message, status=status)
    if isinstance(exc, ex.APIError):
        return TransportError("malformed" if status in (None, 200) else "server", message, status=status)
    return TransportError("connection", f"{type(exc).__name__}: {message}", status=status)


# -- batch API: litellm's files and batches functions, for ``run --batch`` (see .batch_api) ------------------------
class LitellmBatchAPI:
    """A provider's batch API through litellm (``acreate_file``, ``acreate_batch``, ``aretrieve_batch``,
    ``afile_content``), for the providers litellm's batch functions support (OpenAI, Azure, Vertex AI, Bedrock,
    hosted vLLM, ...). ``api_base`` points it at any OpenAI-compatible server, as for the chat client."""

    name = "litellm"

    def __init__(self, api_base: str | None, model: str) -> None:
        import warnings

        litellm = _import()
        # litellm's afile_content leaves a coroutine of its OpenAI handler unawaited (it awaits another one)
        warnings.filterwarnings("ignore", message="coroutine '.*afile_content' was never awaited",
                                category=RuntimeWarning)
        try:
            self.wire_model, provider, _, _ = litellm.get_llm_provider(model)
        except Exception as exc:
            raise _transport_error(exc) from None
        self.api_base = api_base
        self.kwargs: dict[str, Any] = {"custom_llm_provider": provider}
        if api_base:
            self.kwargs["api_base"] = api_base
            if provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
                self.kwargs["api_key"] = "no-key"  # local OpenAI-compatible servers need none

    def wire_body(self, body: JsonObject) -> JsonObject:
        return {**body, "model": self.wire_model}

    async def _call(self, function: str, **arguments: Any) -> Any:
        """litellm's ``function`` with the provider's arguments; its failures as TransportErrors."""
        litellm = _import()
        try:
            return await getattr(litellm, function)(**arguments, **self.kwargs)
        except Exception as exc:
            raise _transport_error(exc) from None

    async def upload(self, data: bytes, filename: str, timeout: float) -> str:
        created = await self._call("acreate_file", file=(filename, data), purpose="batch", timeout=timeout)
        return str(created.id)

    async def create(self, input_file_id: str, metadata: Mapping[str, str], timeout: float) -> BatchState:
        batch = await self._call("acreate_batch", completion_window=WINDOW, endpoint=ENDPOINT,
                                 input_file_id=input_file_id, metadata=dict(metadata), timeout=timeout)
        return state_of(_plain(batch))

    async def retrieve(self, batch_id: str, timeout: float) -> BatchState:
        return state_of(_plain(await self._call("aretrieve_batch", batch_id=batch_id, timeout=timeout)))

    async def content(self, file_id: str, timeout: float) -> bytes:
        answer = await self._call("afile_content", file_id=file_id, timeout=timeout)
        data = getattr(answer, "content", answer)
        return data if isinstance(data, bytes) else str(data).encode("utf-8")

    async def close(self) -> None:
        return None


def _plain(value: Any) -> Any:
    """A litellm (pydantic) object as plain JSON values."""
    return value.model_dump() if hasattr(value, "model_dump") else value
