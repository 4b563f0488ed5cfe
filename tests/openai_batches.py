"""The OpenAI Files and Batch APIs, as served by the local test server (``tests/openai_server.py``).

Files live in memory. Batches live in the server object, so a client process can be killed between
submitting a batch and its completion and a new client can fetch the same batch later. A batch moves
validating -> in_progress -> finalizing -> completed (or failed, when its input file is invalid, or
cancelling -> cancelled) on a clock that is either the seconds since it was created or the number of times
it was retrieved (``BatchConfig.clock``). Each of its requests is answered by the server's online answer
function, so a batch gives the same chat.completion as the online endpoint for the same body.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from aiohttp import web

Answer = Callable[[dict[str, Any], Mapping[str, str]], tuple[int, dict[str, Any]]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Guard = Callable[[Handler], Handler]

ENDPOINTS = frozenset({"/v1/chat/completions"})
ACTIVE = frozenset({"validating", "in_progress", "finalizing"})
FINAL = frozenset({"completed", "failed", "cancelled", "expired"})
SECRET_HEADERS = ("Authorization", "api-key")


def api_error(status: int, message: str, *, type_: str = "invalid_request_error", param: str | None = None,
              code: str | None = None, headers: Mapping[str, str] | None = None) -> web.Response:
    """An error response with OpenAI's body shape ``{"error": {message, type, param, code}}``."""
    return web.json_response({"error": {"message": message, "type": type_, "param": param, "code": code}},
                             status=status, headers=headers)


def new_id(prefix: str) -> str:
    """A fresh object id like OpenAI's ("file-…", "batch_…")."""
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass
class BatchConfig:
    """How batches progress and which of their requests fail.

    The stage lengths are in the unit of `clock`: seconds since the batch was created, or ``GET
    /v1/batches/{id}`` calls ("polls"). With all of them 0, the first retrieval finds the batch completed.
    While in progress, the share of its requests answered grows linearly with the clock.
    """

    validating: float = 0.0
    in_progress: float = 0.0
    finalizing: float = 0.0
    cancelling: float = 0.0
    clock: Literal["seconds", "polls"] = "seconds"
    fail_ids: frozenset[str] = frozenset()  # custom_ids that fail
    fail_fraction: float = 0.0  # also fail this share of requests, chosen by a hash of their custom_id
    fail_status: int = 500
    # error file lines: "response" = {id, custom_id, response: {status_code, request_id, body}, error: null};
    # "error" = {id, custom_id, response: null, error: {code, message}}
    error_shape: Literal["response", "error"] = "response"
    # custom_ids whose output file holds a failed line first, then their answer (a provider's retry inside a batch)
    fail_then_answer_ids: frozenset[str] = frozenset()
    duplicate_ids: frozenset[str] = frozenset()  # custom_ids whose answer line the output file holds twice


@dataclass
class StoredFile:
    """An uploaded file, or a batch's output or error file."""

    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def describe(self) -> dict[str, Any]:
        """The file object the API returns."""
        return {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed", "expires_at": None,
                "status_details": None}


@dataclass
class Batch:
    """One batch: its valid requests, the problems of its input file, and how far it got."""

    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None
    secrets: dict[str, str]  # the API-key headers of the create request (answers may echo them)
    requests: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    created_at: int
    started: float  # time.monotonic() at creation
    status: str = "validating"
    polls: int = 0
    cancelled_on: float | None = None  # the clock value when cancel was asked
    outputs: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    times: dict[str, int] = field(default_factory=dict)  # "in_progress_at", "completed_at", ... (Unix seconds)
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def processed(self) -> int:
        return len(self.outputs) + len(self.failures)

    def mark(self, status: str) -> None:
        """Enter `status` and stamp its ``<status>_at`` time (once)."""
        self.status = status
        self.times.setdefault(f"{status}_at", int(time.time()))

    def describe(self) -> dict[str, Any]:
        """The batch object the API returns."""
        stamps = {f"{s}_at": self.times.get(f"{s}_at")
                  for s in ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")}
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint,
                "errors": {"object": "list", "data": self.errors} if self.status == "failed" else None,
                "input_file_id": self.input_file_id, "completion_window": self.completion_window,
                "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": self.created_at, "expires_at": self.created_at + 24 * 3600, **stamps,
                "request_counts": {"total": len(self.requests), "completed": len(self.outputs),
                                   "failed": len(self.failures)},
                "metadata": self.metadata}


def line_problem(item: Any, endpoint: str, seen: set[str]) -> tuple[str, str, str | None] | None:
    """What is wrong with one input line (code, message, param), or None."""
    if not isinstance(item, dict):
        return "invalid_json_line", "This line is not a JSON object.", None
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return "missing_required_parameter", "Missing required parameter: 'custom_id'.", "custom_id"
    if custom_id in seen:
        return "duplicate_custom_id", f"The custom_id '{custom_id}' is used more than once.", "custom_id"
    if item.get("method") != "POST":
        return "invalid_value", "The method must be 'POST'.", "method"
    if item.get("url") != endpoint:
        return "mismatched_endpoint", f"The url must be the batch's endpoint '{endpoint}'.", "url"
    body = item.get("body")
    if not isinstance(body, dict) or not body.get("model") or not isinstance(body.get("messages"), list):
        return "missing_required_parameter", "The body needs 'model' and 'messages'.", "body"
    return None


def parse_input(data: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The valid requests of a JSONL input file and a batch error ({code, message, param, line}) per bad line."""
    requests: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            errors.append({"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.",
                           "param": None, "line": number})
            continue
        problem = line_problem(item, endpoint, seen)
        if problem is not None:
            code, message, param = problem
            errors.append({"code": code, "message": message, "param": param, "line": number})
            continue
        seen.add(item["custom_id"])
        requests.append(item)
    if not requests and not errors:
        errors.append({"code": "empty_file", "message": "The input file has no requests.", "param": None,
                       "line": None})
    return requests, errors


class BatchService:
    """The files and batches of one server, with the aiohttp handlers that serve them."""

    def __init__(self, config: BatchConfig, answer: Answer) -> None:
        self.config = config
        self.answer = answer
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, Batch] = {}

    def routes(self, guard: Guard) -> list[web.RouteDef]:
        """The ``/v1/files`` and ``/v1/batches`` routes, each behind `guard`."""
        return [web.post("/v1/files", guard(self.upload_file)),
                web.get("/v1/files/{file_id}", guard(self.get_file)),
                web.get("/v1/files/{file_id}/content", guard(self.get_file_content)),
                web.delete("/v1/files/{file_id}", guard(self.delete_file)),
                web.post("/v1/batches", guard(self.create_batch)),
                web.get("/v1/batches", guard(self.list_batches)),
                web.get("/v1/batches/{batch_id}", guard(self.get_batch)),
                web.post("/v1/batches/{batch_id}/cancel", guard(self.cancel_batch))]

    def add_file(self, filename: str, purpose: str, data: bytes) -> StoredFile:
        stored = StoredFile(new_id("file-"), filename, purpose, data, int(time.time()))
        self.files[stored.id] = stored
        return stored

    def _clock(self, batch: Batch) -> float:
        return batch.polls if self.config.clock == "polls" else time.monotonic() - batch.started

    def _fails(self, custom_id: str) -> bool:
        """Whether the config makes this request fail (its id is listed, or its hash falls in fail_fraction)."""
        share = int(hashlib.sha256(custom_id.encode()).hexdigest()[:8], 16) / 2**32
        return custom_id in self.config.fail_ids or share < self.config.fail_fraction

    def _run(self, batch: Batch, request: dict[str, Any]) -> None:
        """Answer one request of `batch` into its output or error lines."""
        custom_id = request["custom_id"]
        if self._fails(custom_id):
            status = self.config.fail_status
            kind = "server_error" if status >= 500 else "invalid_request_error"
            body: dict[str, Any] = {"error": {"message": f"The request '{custom_id}' failed (HTTP {status}).",
                                              "type": kind, "param": None, "code": None}}
        else:
            status, body = self.answer(request["body"], batch.secrets)
        line: dict[str, Any] = {"id": new_id("batch_req_"), "custom_id": custom_id,
                                "response": {"status_code": status, "request_id": new_id("req_"), "body": body},
                                "error": None}
        if status == 200 and custom_id in self.config.fail_then_answer_ids:
            batch.outputs.append({"id": new_id("batch_req_"), "custom_id": custom_id, "error": None,
                                  "response": {"status_code": 500, "request_id": new_id("req_"),
                                               "body": {"error": {"message": "retried", "type": "server_error"}}}})
        if status == 200:
            batch.outputs.append(line)
            if custom_id in self.config.duplicate_ids:
                batch.outputs.append(dict(line, id=new_id("batch_req_")))
        elif self.config.error_shape == "response":
            batch.failures.append(line)
        else:
            error = body.get("error") or {}
            code = error.get("code") or error.get("type") or ("server_error" if status >= 500 else "invalid_request")
            batch.failures.append({"id": line["id"], "custom_id": custom_id, "response": None,
                                   "error": {"code": code, "message": error.get("message", "")}})

    def _run_until(self, batch: Batch, count: int) -> None:
        for request in batch.requests[batch.processed:count]:
            self._run(batch, request)

    def _finish(self, batch: Batch, status: str) -> None:
        """Write the output and error files (each only if it has lines) and enter the final `status`."""
        for lines, attr, kind in ((batch.outputs, "output_file_id", "output"),
                                  (batch.failures, "error_file_id", "error")):
            if lines:
                data = "".join(json.dumps(line) + "\n" for line in lines).encode()
                setattr(batch, attr, self.add_file(f"{batch.id}_{kind}.jsonl", "batch_output", data).id)
        batch.mark(status)

    def advance(self, batch: Batch) -> None:
        """Bring `batch` to the state its clock says, answering the requests due by now."""
        if batch.status in FINAL:
            return
        cfg = self.config
        now = self._clock(batch)
        if batch.cancelled_on is not None:
            if now >= batch.cancelled_on + cfg.cancelling:
                self._finish(batch, "cancelled")
            return
        if now < cfg.validating:
            return
        if batch.errors:
            batch.mark("failed")
            return
        batch.mark("in_progress")
        if now < cfg.validating + cfg.in_progress:
            self._run_until(batch, int(len(batch.requests) * (now - cfg.validating) / cfg.in_progress))
            return
        self._run_until(batch, len(batch.requests))
        batch.mark("finalizing")
        if now < cfg.validating + cfg.in_progress + cfg.finalizing:
            return
        self._finish(batch, "completed")

    def _file_or_404(self, request: web.Request) -> StoredFile | web.Response:
        file_id = request.match_info["file_id"]
        stored = self.files.get(file_id)
        return stored if stored is not None else api_error(404, f"No such File object: {file_id}", param="id")

    def _batch_or_404(self, request: web.Request) -> Batch | web.Response:
        batch_id = request.match_info["batch_id"]
        batch = self.batches.get(batch_id)
        return batch if batch is not None else api_error(404, f"No batch found with id '{batch_id}'.", param="id")

    async def upload_file(self, request: web.Request) -> web.Response:
        """``POST /v1/files`` (multipart: ``purpose`` and ``file``)."""
        form = await request.post()
        upload = form.get("file")
        purpose = form.get("purpose")
        if not isinstance(upload, web.FileField):
            return api_error(400, "Missing required parameter: 'file'.", param="file")
        if not isinstance(purpose, str) or not purpose:
            return api_error(400, "Missing required parameter: 'purpose'.", param="purpose")
        return web.json_response(self.add_file(upload.filename, purpose, upload.file.read()).describe())

    async def get_file(self, request: web.Request) -> web.Response:
        """``GET /v1/files/{id}``."""
        stored = self._file_or_404(request)
        return stored if isinstance(stored, web.Response) else web.json_response(stored.describe())

    async def get_file_content(self, request: web.Request) -> web.Response:
        """``GET /v1/files/{id}/content``: the file's bytes."""
        stored = self._file_or_404(request)
        if isinstance(stored, web.Response):
            return stored
        return web.Response(body=stored.data, content_type="application/octet-stream")

    async def delete_file(self, request: web.Request) -> web.Response:
        """``DELETE /v1/files/{id}``."""
        stored = self._file_or_404(request)
        if isinstance(stored, web.Response):
            return stored
        del self.files[stored.id]
        return web.json_response({"id": stored.id, "object": "file", "deleted": True})

    async def create_batch(self, request: web.Request) -> web.Response:
        """``POST /v1/batches`` with {input_file_id, endpoint, completion_window, metadata?}."""
        try:
            params = await request.json()
        except json.JSONDecodeError:
            return api_error(400, "The body is not valid JSON.")
        if not isinstance(params, dict):
            return api_error(400, "The body must be a JSON object.")
        file_id = params.get("input_file_id")
        stored = self.files.get(file_id) if isinstance(file_id, str) else None
        if stored is None:
            return api_error(404, f"No such File object: {file_id}", param="input_file_id")
        if stored.purpose != "batch":
            return api_error(400, f"The input file {file_id} does not have purpose 'batch'.", param="input_file_id")
        endpoint = params.get("endpoint")
        if endpoint not in ENDPOINTS:
            return api_error(400, f"Invalid value for 'endpoint': {endpoint!r}.", param="endpoint",
                             code="invalid_value")
        if params.get("completion_window") != "24h":
            return api_error(400, "Invalid value for 'completion_window': only '24h' is supported.",
                             param="completion_window", code="invalid_value")
        metadata = params.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            return api_error(400, "'metadata' must be an object.", param="metadata")
        requests, errors = parse_input(stored.data, endpoint)
        secrets = {name: request.headers[name] for name in SECRET_HEADERS if name in request.headers}
        batch = Batch(new_id("batch_"), stored.id, endpoint, "24h", metadata, secrets, requests, errors,
                      int(time.time()), time.monotonic())
        self.batches[batch.id] = batch
        return web.json_response(batch.describe())

    async def get_batch(self, request: web.Request) -> web.Response:
        """``GET /v1/batches/{id}``: one poll; the batch advances first."""
        batch = self._batch_or_404(request)
        if isinstance(batch, web.Response):
            return batch
        batch.polls += 1
        self.advance(batch)
        return web.json_response(batch.describe())

    async def list_batches(self, request: web.Request) -> web.Response:
        """``GET /v1/batches?limit=&after=``: newest first (listing is not a poll)."""
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            return api_error(400, "'limit' must be an integer.", param="limit")
        if not 1 <= limit <= 100:
            return api_error(400, "'limit' must be between 1 and 100.", param="limit")
        ordered = list(reversed(self.batches.values()))
        after = request.query.get("after")
        if after is not None:
            ids = [b.id for b in ordered]
            if after not in ids:
                return api_error(404, f"No batch found with id '{after}'.", param="after")
            ordered = ordered[ids.index(after) + 1:]
        page = ordered[:limit]
        for batch in page:
            self.advance(batch)
        return web.json_response({"object": "list", "data": [b.describe() for b in page],
                                  "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None,
                                  "has_more": len(ordered) > limit})

    async def cancel_batch(self, request: web.Request) -> web.Response:
        """``POST /v1/batches/{id}/cancel``: stops answering; the requests answered so far stay in the files."""
        batch = self._batch_or_404(request)
        if isinstance(batch, web.Response):
            return batch
        self.advance(batch)
        if batch.status not in ACTIVE:
            return api_error(409, f"Cannot cancel a batch with status '{batch.status}'.")
        batch.cancelled_on = self._clock(batch)
        batch.mark("cancelling")
        return web.json_response(batch.describe())
