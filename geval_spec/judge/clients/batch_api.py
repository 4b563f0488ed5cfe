"""Providers' batch APIs: upload a JSONL file of requests, create a batch, poll it, download its results.

Two ways in, chosen by the judge's client:

- ``openai-http``: OpenAI's Files and Batch endpoints directly, over aiohttp
  (``POST /v1/files``, ``POST /v1/batches``, ``GET /v1/batches/{id}``,
  ``GET /v1/files/{id}/content``), for OpenAI and every server that
  implements them (vLLM, a proxy); :class:`OpenAIBatchAPI`;
- ``litellm``: litellm's batch functions for any provider it supports
  (:class:`geval_spec.judge.clients.litellm_client.LitellmBatchAPI`).

Both speak in the values below: a :class:`BatchState` for a batch, a
:class:`BatchLine` per line of its output and error files. Failures raise
:class:`~geval_spec.judge.clients.base.TransportError` with the provider's
message (never a header or the key), as the chat clients do.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Protocol

from geval_spec.judge.clients.base import TransportError, retry_after_seconds
from geval_spec.judge.clients.http_client import DEFAULT_BASE, aiohttp_failures, wire_model
from geval_spec.judge.types import JsonObject, request_key
from geval_spec.redact import redact
from geval_spec.values import frozen

BATCH_CLIENTS = ("litellm", "openai-http")  # the clients whose batch API we can use
ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
FINAL = frozenset({"completed", "failed", "expired", "cancelled"})
DETAIL = 300  # characters of a provider's message kept


@frozen
class BatchState:
    """A batch as the provider describes it."""

    id: str
    status: str  # validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    errors: tuple[str, ...] = ()  # the provider's reasons for a failed batch (its input file's problems)

    @property
    def final(self) -> bool:
        return self.status in FINAL


@frozen
class BatchLine:
    """One line of a batch's output or error file: an answer (``body`` with status 200) or why there is none."""

    custom_id: str
    status: int | None  # the HTTP status of the answer; None when the line has only an error
    body: JsonObject | None  # the response body (a chat.completion when the status is 200)
    kind: str | None = None  # a failure's kind, as TransportError names them (server, rate_limit, client, ...)
    error: str | None = None  # a failure's message

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.body is not None and self.error is None


class BatchAPI(Protocol):
    """A provider's batch API (see the module docstring)."""

    name: str
    api_base: str | None

    def wire_body(self, body: JsonObject) -> JsonObject: ...

    async def upload(self, data: bytes, filename: str, timeout: float) -> str: ...

    async def create(self, input_file_id: str, metadata: Mapping[str, str], timeout: float) -> BatchState: ...

    async def retrieve(self, batch_id: str, timeout: float) -> BatchState: ...

    async def content(self, file_id: str, timeout: float) -> bytes: ...

    async def close(self) -> None: ...


def batch_api(client: str, api_base: str | None, model: str) -> BatchAPI:
    """The batch API of a judge ``client`` (one of :data:`BATCH_CLIENTS`) at ``api_base`` for ``model``."""
    if client == "openai-http":
        return OpenAIBatchAPI(api_base)
    if client == "litellm":
        from geval_spec.judge.clients.litellm_client import LitellmBatchAPI

        return LitellmBatchAPI(api_base, model)
    raise ValueError(f"client {client!r} has no batch API here (only {', '.join(BATCH_CLIENTS)})")


def input_line(custom_id: str, body: JsonObject) -> bytes:
    """One line of a batch's input file (the body as the provider takes it), newline included."""
    line = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def scrub(text: str) -> str:
    """A provider's message, secrets masked (:func:`geval_spec.redact.redact`), cut to :data:`DETAIL` characters."""
    return redact(text)[:DETAIL]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def state_of(data: Any) -> BatchState:
    """A batch object (OpenAI's JSON, or litellm's as a dict) as a :class:`BatchState`."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("status"), str):
        raise TransportError("malformed", "the batch API answered with something that is not a batch")
    counts: dict[str, Any] = data["request_counts"] if isinstance(data.get("request_counts"), dict) else {}
    errors = data.get("errors")
    items = errors.get("data") if isinstance(errors, dict) else None
    reasons = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            where = f"line {item['line']}: " if isinstance(item.get("line"), int) else ""
            reasons.append(scrub(f"{where}{item.get('code') or 'error'}: {item.get('message') or ''}".strip()))
    return BatchState(id=data["id"], status=data["status"], input_file_id=_text(data.get("input_file_id")),
                      output_file_id=_text(data.get("output_file_id")), error_file_id=_text(data.get("error_file_id")),
                      total=_count(counts.get("total")), completed=_count(counts.get("completed")),
                      failed=_count(counts.get("failed")), errors=tuple(reasons))


def _kind(status: int | None) -> str:
    if status == 429:
        return "rate_limit"
    if status is None or status >= 500 or status == 408:
        return "server"
    if status in (401, 403):
        return "auth"
    return "client"


def _line(item: Any) -> BatchLine | None:
    if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
        return None
    custom_id = request_key(item["custom_id"])  # (a batch submitted before schema 3 names the whole SHA-256)
    response = item.get("response")
    error = item.get("error")
    if isinstance(response, dict):
        status = response.get("status_code")
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        body = response.get("body") if isinstance(response.get("body"), dict) else None
        if status == 200 and body is not None and not error:
            return BatchLine(custom_id, 200, body)
        detail = body.get("error") if isinstance(body, dict) else None
        message = detail.get("message") if isinstance(detail, dict) else None
        return BatchLine(custom_id, status, body, _kind(status),
                         scrub(f"HTTP {status}: {message or json.dumps(body)[:DETAIL]}"))
    if isinstance(error, dict):
        code = error.get("code") or "error"
        return BatchLine(custom_id, None, None, "server", scrub(f"{code}: {error.get('message') or ''}"))
    return BatchLine(custom_id, None, None, "malformed", "the batch line has neither a response nor an error")


def read_lines(data: bytes) -> list[BatchLine]:
    """The lines of an output or error file (lines that are not JSON objects with a custom_id are skipped)."""
    out = []
    for raw in data.decode("utf-8", errors="replace").split("\n"):  # not splitlines: a JSON string may hold
        # U+2028, U+0085 and other characters it breaks at (the line would be skipped and its paid answer lost)
        if not raw.strip():
            continue
        try:
            line = _line(json.loads(raw))
        except (ValueError, RecursionError):
            continue
        if line is not None:
            out.append(line)
    return out


def _detail(text: str) -> str:
    try:
        data = json.loads(text)
        message = data.get("error", {}).get("message") if isinstance(data, dict) else None
        if message:
            return scrub(str(message))
    except (ValueError, AttributeError):
        pass
    return scrub(text)


def http_error(status: int, text: str, headers: Mapping[str, str] | None = None) -> TransportError:
    """A failed call to the files or batches endpoints as a TransportError, like the chat client's."""
    detail = f"HTTP {status}: {_detail(text)}"
    kind = _kind(status)
    retry_after = retry_after_seconds(headers) if kind in ("rate_limit", "server") else None
    return TransportError(kind, detail, status=status, retry_after=retry_after)


class OpenAIBatchAPI:
    """OpenAI's Files and Batch endpoints over one aiohttp session (``Authorization`` from OPENAI_API_KEY)."""

    name = "openai-http"

    def __init__(self, api_base: str | None) -> None:
        self.api_base: str | None = (api_base or os.environ.get("OPENAI_API_BASE") or DEFAULT_BASE).rstrip("/")
        self._session: Any = None

    def wire_body(self, body: JsonObject) -> JsonObject:
        return {**body, "model": wire_model(str(body["model"]))}

    async def _call(self, method: str, path: str, timeout: float, **kwargs: Any) -> bytes:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {}
        key = os.environ.get("OPENAI_API_KEY")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        with aiohttp_failures(self.api_base, timeout, waiting_for=path.split("/")[1]):
            async with self._session.request(method, f"{self.api_base}{path}", headers=headers,
                                             timeout=aiohttp.ClientTimeout(total=timeout), **kwargs) as resp:
                data: bytes = await resp.read()
                if resp.status != 200:
                    raise http_error(resp.status, data.decode("utf-8", errors="replace"), resp.headers)
                return data

    async def _json(self, method: str, path: str, timeout: float, **kwargs: Any) -> Any:
        data = await self._call(method, path, timeout, **kwargs)
        try:
            return json.loads(data)
        except ValueError:
            raise TransportError("malformed", f"the answer of {path} is not JSON: {data[:80]!r}") from None

    async def upload(self, data: bytes, filename: str, timeout: float) -> str:
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", data, filename=filename, content_type="application/jsonl")
        answer = await self._json("POST", "/files", timeout, data=form)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
            raise TransportError("malformed", "the file upload answered without a file id")
        return str(answer["id"])

    async def create(self, input_file_id: str, metadata: Mapping[str, str], timeout: float) -> BatchState:
        body = {"input_file_id": input_file_id, "endpoint": ENDPOINT, "completion_window": WINDOW,
                "metadata": dict(metadata)}
        return state_of(await self._json("POST", "/batches", timeout, json=body))

    async def retrieve(self, batch_id: str, timeout: float) -> BatchState:
        return state_of(await self._json("GET", f"/batches/{batch_id}", timeout))

    async def content(self, file_id: str, timeout: float) -> bytes:
        return await self._call("GET", f"/files/{file_id}/content", timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
