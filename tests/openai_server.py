"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat completions API.

Used by the end-to-end tests and by the benchmarks. It answers like a judge
model: JSON output with a score (or TCVA statements), token logprobs with
top alternatives at every position, ``n`` completions, usage counts; with
configurable latency and injected faults (429 with Retry-After, 500, a
timeout, a malformed body). It counts every request by the hash of its body.

Like a real provider it can also enforce requests- and tokens-per-minute
limits as token buckets (429 with ``retry-after-ms`` and ``x-ratelimit-*``
headers), echo the caller's API key back in errors or in the judge's
reasoning (for secret-redaction tests), report cached and reasoning tokens,
refuse logprobs or temperatures for some models, and serve the Files and
Batch APIs (``tests/openai_batches.py``) with the same answers as online.

Run standalone (for benchmarks): ``python tests/openai_server.py --latency 0.2``
prints ``PORT <n>`` and serves until killed; ``--rpm``/``--tpm`` add rate
limits, and ``GET /_stats`` returns the counts as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from aiohttp import web

from openai_batches import BatchConfig, BatchService, Handler, api_error

JudgeFn = Callable[[dict[str, Any], int], dict[str, Any]]


def candidate_of(body: dict[str, Any]) -> str:
    """The candidate text of a built-in-template prompt (what follows 'Candidate:')."""
    text = body["messages"][-1]["content"]
    m = re.search(r"(?:Candidate|Response to evaluate):\n(.*?)(?:\n\nAutomatic pre-checks|\Z)", text, re.S)
    return m.group(1).strip() if m else text


def hashed_score(text: str, lo: int = 1, hi: int = 5) -> int:
    """A deterministic pseudo-random integer in lo..hi derived from `text`."""
    h = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return lo + h % (hi - lo + 1)


def default_judge(body: dict[str, Any], index: int) -> dict[str, Any]:
    """Score from a marker '[[score=N]]' in the candidate, else a hash of it."""
    if body["messages"][0]["content"].startswith("You design evaluation procedures"):
        n = int(re.search(r"exactly (\d+) evaluation steps", body["messages"][-1]["content"]).group(1))
        return {"content": json.dumps({"steps": [f"Generated step {i + 1}." for i in range(n)]})}
    cand = candidate_of(body)
    m = re.search(r"\[\[score=(\d+)\]\]", cand)
    score = int(m.group(1)) if m else hashed_score(cand)
    if "statements" in body["messages"][0]["content"]:
        verdicts = ["fully", "mostly", "partially", "minor", "none"]
        statements = [{"statement": s.strip(), "verdict": verdicts[hashed_score(s, 0, 4)], "reason": "r",
                       "support": ""} for s in re.split(r"(?<=[.!?])\s+", cand) if s.strip()][:6]
        return {"content": json.dumps({"statements": statements})}
    if index > 0:  # later samples wobble by one, deterministically
        score = max(1, min(5, score + (hashed_score(f"{cand}{index}", 0, 2) - 1)))
    return {"content": json.dumps({"reasoning": "Checked each statement.", "errors": [], "score": score}),
            "score": score, "distribution": {score: 0.7, max(1, score - 1): 0.2, min(5, score + 1): 0.1}}


_TOKEN = re.compile(r"\s*[A-Za-z_]+|\s*\d|\s*[^\sA-Za-z_\d]|\s+")


def tokens_of(text: str) -> list[str]:
    """Split `text` into the tokens the fake model "generates" (their concatenation is the text)."""
    out = _TOKEN.findall(text)
    assert "".join(out) == text
    return out


def logprobs_for(content: str, score: int | None, distribution: dict[int, float] | None, top: int) -> dict:
    """The ``choice.logprobs`` of `content`: `distribution` as the alternatives at the score's token."""
    entries = []
    toks = tokens_of(content)
    score_index = None
    if score is not None:
        m = list(re.finditer(r'"score"\s*:\s*(\d+)', content))
        if m:
            start = m[-1].start(1)
            pos = 0
            for i, t in enumerate(toks):
                if pos <= start < pos + len(t):
                    score_index = i
                    break
                pos += len(t)
    for i, t in enumerate(toks):
        if i == score_index and distribution:
            prefix = t[: len(t) - len(t.lstrip())]
            alts = sorted(distribution.items(), key=lambda kv: -kv[1])
            tops = [{"token": f"{prefix}{s}", "logprob": math.log(p), "bytes": None} for s, p in alts if p > 0]
            tops += [{"token": f"{prefix}x", "logprob": math.log(1e-4), "bytes": None}]
            chosen = next(x["logprob"] for x in tops if x["token"] == t)
            entries.append({"token": t, "logprob": chosen, "bytes": None, "top_logprobs": tops[:top]})
        else:
            entries.append({"token": t, "logprob": -0.01, "bytes": None,
                            "top_logprobs": [{"token": t, "logprob": -0.01, "bytes": None}][:top]})
    return {"content": entries}


EchoMode = Literal["401", "500", "reasoning"]

# body keys the server acts on; every other key is recorded in ServerState.extra_params
INTERPRETED_KEYS = frozenset({"model", "messages", "n", "logprobs", "top_logprobs", "temperature", "max_tokens",
                              "max_completion_tokens"})


@dataclass
class ServerConfig:
    """How the server behaves. The defaults give a fault-free server without rate limits."""

    latency: float = 0.0
    fault_rate: float = 0.0
    faults: tuple[str, ...] = ("429", "500", "timeout", "malformed")
    timeout_sleep: float = 5.0
    retry_after: str = "1"
    retry_after_ms: str | None = "30"
    seed: int = 0
    logprobs: bool = True  # False: ignore logprobs requests (like providers without them)
    support_n: bool = True
    judge: JudgeFn = default_judge
    fail_always: int | None = None  # answer every request with this status
    # Requests and tokens per minute (None: unlimited), enforced as token buckets holding `burst_seconds`
    # worth of the limit (limit / 60 * burst_seconds) and refilling continuously at limit / 60 per second.
    rpm: int | None = None
    tpm: int | None = None
    burst_seconds: float = 1.0
    ratelimit_headers: bool = True  # False: no x-ratelimit-* headers (429s keep Retry-After), as some providers
    # Echo the caller's secrets: "401" / "500" answer every request of every endpoint with an error whose body
    # holds the Authorization (and for "500" the api-key) header; "reasoning" writes them into the judge's
    # reasoning text of every answer (online and batch).
    echo_auth: EchoMode | None = None
    # usage.prompt_tokens_details.cached_tokens: a share of the prompt tokens, or "prefix" for OpenAI's rule
    # (the longest prefix of the messages seen before for the same model, in 128-token blocks, from 1024 up)
    cached_tokens: float | Literal["prefix"] | None = None
    # usage.completion_tokens_details.reasoning_tokens per request (also added to completion_tokens)
    reasoning_tokens: int | None = None
    no_logprobs_models: frozenset[str] = frozenset()  # these models never return logprobs
    fixed_temperature_models: dict[str, float] = field(default_factory=dict)  # model -> its only temperature
    batch: BatchConfig = field(default_factory=BatchConfig)


@dataclass
class ServerState:
    """What the chat completions endpoint received and answered (batch requests are not counted here)."""

    total: int = 0
    ok: int = 0  # answers sent to a client still connected (a late answer after a client timeout is not counted)
    by_hash: Counter = field(default_factory=Counter)
    ok_by_hash: Counter = field(default_factory=Counter)
    bodies: list = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)  # HTTP status -> responses sent
    rate_limited: int = 0  # 429s from the rpm/tpm limits (injected 429 faults are in `faults`)
    limited_at: list[float] = field(default_factory=list)  # time.monotonic() of each of those 429s
    accepted_at: list[float] = field(default_factory=list)  # time.monotonic() of each request past the limits
    extra_params: list[dict[str, Any]] = field(default_factory=list)  # per request: the keys not interpreted


def body_hash(body: dict[str, Any]) -> str:
    """The identity of a request body (its canonical JSON's SHA-256)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def request_tokens(body: dict[str, Any]) -> int:
    """Tokens a request counts against the tpm limit: ceil(characters / 4) of its messages + max_tokens x n."""
    chars = sum(len(message_text(m)) for m in body.get("messages", []))
    max_out = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return math.ceil(chars / 4) + int(max_out) * int(body.get("n") or 1)


def format_duration(seconds: float) -> str:
    """A duration the way OpenAI's ``x-ratelimit-reset-*`` headers write it: "0s", "120ms", "1.5s", "2m3s", "1h0m0s"."""
    ms = math.ceil(max(seconds, 0.0) * 1000)
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{secs}s"


class TokenBucket:
    """One per-minute limit enforced over short windows, as providers do.

    Holds ``limit / 60 * burst_seconds`` units when full (it starts full) and refills continuously at
    ``limit / 60`` per second. A cost above the capacity is admitted when the bucket is full, leaving it
    below zero, so such requests still get through at the per-minute rate.
    """

    def __init__(self, limit: int, burst_seconds: float, now: float) -> None:
        if limit <= 0 or burst_seconds <= 0:
            raise ValueError("a rate limit and its burst window must be positive")
        self.limit = limit
        self.rate = limit / 60
        self.capacity = self.rate * burst_seconds
        self.level = self.capacity
        self._stamp = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    def wait(self, cost: float) -> float:
        """Seconds until `cost` fits (0.0: it fits now)."""
        missing = min(cost, self.capacity) - self.level
        return missing / self.rate if missing > 1e-9 else 0.0

    def take(self, cost: float) -> None:
        self.level -= cost

    def headers(self, kind: str) -> dict[str, str]:
        """The ``x-ratelimit-{limit,remaining,reset}-<kind>`` headers; remaining is what fits right now."""
        return {f"x-ratelimit-limit-{kind}": str(self.limit),
                f"x-ratelimit-remaining-{kind}": str(max(0, math.floor(self.level + 1e-9))),
                f"x-ratelimit-reset-{kind}": format_duration((self.capacity - self.level) / self.rate)}


@dataclass
class Admission:
    """The rate limiter's verdict on one request."""

    ok: bool
    headers: dict[str, str]
    kind: str | None = None  # the limit that refused it: "requests" or "tokens"
    wait: float | None = None  # seconds until it would fit; None: never (more tokens than the per-minute limit)
    cost: int = 0


class RateLimiter:
    """The rpm and tpm limits of a server; a request is admitted only when it fits both."""

    def __init__(self, rpm: int | None, tpm: int | None, burst_seconds: float) -> None:
        now = time.monotonic()
        self.buckets = {kind: TokenBucket(limit, burst_seconds, now)
                        for kind, limit in (("requests", rpm), ("tokens", tpm)) if limit is not None}

    def _headers(self) -> dict[str, str]:
        return {k: v for kind, bucket in self.buckets.items() for k, v in bucket.headers(kind).items()}

    def admit(self, tokens: int, now: float) -> Admission:
        """Take one request and `tokens` tokens if both fit at `now` (time.monotonic()), else say which limit
        refused and for how long."""
        costs = {"requests": 1, "tokens": tokens}
        for bucket in self.buckets.values():
            bucket.refill(now)
        token_bucket = self.buckets.get("tokens")
        if token_bucket is not None and tokens > token_bucket.limit:
            return Admission(False, self._headers(), "tokens", None, tokens)
        waits = {kind: bucket.wait(costs[kind]) for kind, bucket in self.buckets.items()}
        kind, wait = max(waits.items(), key=lambda kv: kv[1])
        if wait > 0:
            return Admission(False, self._headers(), kind, wait, costs[kind])
        for kind, bucket in self.buckets.items():
            bucket.take(costs[kind])
        return Admission(True, self._headers())


class PrefixCache:
    """Prompts seen before, to report cached prompt tokens the way OpenAI does.

    A token is estimated as 4 characters. Each prompt is remembered as the hashes of its prefixes at every
    128-token boundary; a new prompt's cached tokens are its longest remembered prefix (whole blocks),
    counted only when that is at least 1024 tokens.
    """

    BLOCK_TOKENS = 128
    MIN_TOKENS = 1024

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def lookup_and_add(self, model: str, messages: list[dict[str, Any]]) -> int:
        """Cached tokens for this prompt; afterwards the prompt counts as seen."""
        text = "".join(f"<{m.get('role')}>{message_text(m)}" for m in messages)
        block = 4 * self.BLOCK_TOKENS
        running = hashlib.sha256(f"{model}\0".encode())
        hits = 0
        for k in range(len(text) // block):
            running.update(text[k * block:(k + 1) * block].encode())
            key = running.digest()
            if key in self._seen:
                hits = k + 1
            self._seen.add(key)
        cached = hits * self.BLOCK_TOKENS
        return cached if cached >= self.MIN_TOKENS else 0


def secret_headers(headers: Mapping[str, str]) -> dict[str, str | None]:
    """The headers that carry an API key (OpenAI's Authorization and Azure's api-key), as received."""
    return {"Authorization": headers.get("Authorization"), "api-key": headers.get("api-key")}


def with_secrets_in_reasoning(content: str, secrets: Mapping[str, str | None]) -> str:
    """`content` with the received secret headers written into its "reasoning" (or appended if not JSON)."""
    seen = "; ".join(f"{name}: {value}" for name, value in secrets.items() if value) or "no API key"
    note = f"The request carried {seen}."
    try:
        answer = json.loads(content)
    except json.JSONDecodeError:
        return f"{content}\n{note}"
    if not isinstance(answer, dict):
        return f"{content}\n{note}"
    answer["reasoning"] = f"{note} {answer.get('reasoning', '')}".strip()
    return json.dumps(answer)


class FakeOpenAI:
    """The server: start it in a thread of the test process (``start()`` or ``with``), or run this file."""

    def __init__(self, config: ServerConfig | None = None):
        self.config = config or ServerConfig()
        self.state = ServerState()
        self._lock = threading.Lock()
        self._rng = random.Random(self.config.seed)
        self._limiter = (RateLimiter(self.config.rpm, self.config.tpm, self.config.burst_seconds)
                         if self.config.rpm is not None or self.config.tpm is not None else None)
        self._prefixes = PrefixCache()
        self.batch_api = BatchService(self.config.batch, self.answer)
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        """Forget the counts in `state` (rate limits, the prompt cache, files and batches are kept)."""
        with self._lock:
            self.state = ServerState()

    def stats(self) -> dict[str, Any]:
        """A JSON-able snapshot of the counts; served at ``GET /_stats`` for a server in another process."""
        with self._lock:
            return {"total": self.state.total, "ok": self.state.ok, "rate_limited": self.state.rate_limited,
                    "statuses": {str(k): v for k, v in sorted(self.state.statuses.items())},
                    "faults": dict(self.state.faults), "accepted_at": list(self.state.accepted_at)}

    def _choose_fault(self) -> str | None:
        with self._lock:
            if self.config.fault_rate and self._rng.random() < self.config.fault_rate:
                return self._rng.choice(self.config.faults)
        return None

    def refuse_with_secrets(self, request: web.Request) -> web.Response | None:
        """The "401"/"500" echo fault for this request (None when that mode is off)."""
        secrets = secret_headers(request.headers)
        if self.config.echo_auth == "401":
            return api_error(401, f"Incorrect API key provided: {secrets['Authorization']}. You can find your "
                                  "API key at https://platform.openai.com/account/api-keys.", code="invalid_api_key")
        if self.config.echo_auth == "500":
            return api_error(500, "The server had an error processing a request with Authorization="
                                  f"{secrets['Authorization']!r} and api-key={secrets['api-key']!r}.",
                             type_="server_error")
        return None

    def guarded(self, handler: Handler) -> Handler:
        """`handler` behind the "401"/"500" echo faults."""
        async def run(request: web.Request) -> web.StreamResponse:
            return self.refuse_with_secrets(request) or await handler(request)

        return run

    def answer(self, body: dict[str, Any], headers: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """Status and JSON body the chat completions endpoint gives for `body` once past limits and faults.

        Shared by the online endpoint and the batches, so both answer the same body with the same content.
        """
        model = body.get("model")
        fixed = self.config.fixed_temperature_models.get(model)
        temperature = body.get("temperature")
        if fixed is not None and temperature is not None and temperature != fixed:
            return 400, {"error": {"message": f"Unsupported value: 'temperature' does not support {temperature} "
                                              f"with this model. Only the default ({fixed:g}) value is supported.",
                                   "type": "invalid_request_error", "param": "temperature",
                                   "code": "unsupported_value"}}
        n = int(body.get("n") or 1)
        if n > 1 and not self.config.support_n:
            return 400, {"error": {"message": "n is not supported"}}
        want_lp = (bool(body.get("logprobs")) and self.config.logprobs
                   and model not in self.config.no_logprobs_models)
        top = int(body.get("top_logprobs") or 0)
        choices = []
        completion_tokens = 0
        for i in range(n):
            answer = self.config.judge(body, i)
            content = answer["content"]
            if self.config.echo_auth == "reasoning":
                content = with_secrets_in_reasoning(content, secret_headers(headers))
            completion_tokens += len(tokens_of(content))
            choice = {"index": i, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
                      "logprobs": None}
            if want_lp:
                choice["logprobs"] = logprobs_for(content, answer.get("score"), answer.get("distribution"), top)
            choices.append(choice)
        prompt_tokens = sum(len(message_text(m)) for m in body["messages"]) // 4
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}
        if self.config.cached_tokens == "prefix":
            with self._lock:
                cached = self._prefixes.lookup_and_add(str(model), body["messages"])
            usage["prompt_tokens_details"] = {"cached_tokens": min(cached, prompt_tokens)}
        elif self.config.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": math.floor(prompt_tokens * self.config.cached_tokens)}
        if self.config.reasoning_tokens is not None:
            usage["completion_tokens"] += self.config.reasoning_tokens
            usage["total_tokens"] += self.config.reasoning_tokens
            usage["completion_tokens_details"] = {"reasoning_tokens": self.config.reasoning_tokens}
        return 200, {"id": f"chatcmpl-{body_hash(body)[:12]}", "object": "chat.completion", "created": 1700000000,
                     "model": model, "choices": choices, "usage": usage}

    def _rate_limited(self, body: dict[str, Any], admission: Admission) -> web.Response:
        """The 429 a provider sends for a request that does not fit its rate limits."""
        with self._lock:
            self.state.rate_limited += 1
            self.state.limited_at.append(time.monotonic())
        limit = self._limiter.buckets[admission.kind].limit
        window = "requests per min (RPM)" if admission.kind == "requests" else "tokens per min (TPM)"
        org = f"for {body.get('model')} in organization org-fake on {window}: Limit {limit}, "
        if admission.wait is None:
            message = (f"Request too large {org}Requested {admission.cost}. The input or output tokens must be "
                       "reduced in order to run successfully.")
            return api_error(429, message, type_=admission.kind, code="rate_limit_exceeded",
                             headers=admission.headers)
        message = (f"Rate limit reached {org}Requested {admission.cost}. Please try again in "
                   f"{format_duration(admission.wait)}.")
        shown = admission.headers if self.config.ratelimit_headers else {}
        headers = {**shown, "retry-after-ms": str(math.ceil(admission.wait * 1000)),
                   "Retry-After": str(math.ceil(admission.wait))}
        return api_error(429, message, type_=admission.kind, code="rate_limit_exceeded", headers=headers)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``: count the request, answer it, count the status."""
        raw = await request.read()
        body = json.loads(raw)
        h = body_hash(body)
        with self._lock:
            self.state.total += 1
            self.state.by_hash[h] += 1
            self.state.bodies.append(body)
            self.state.extra_params.append({k: v for k, v in body.items() if k not in INTERPRETED_KEYS})
        response = await self._respond(request, body, h)
        with self._lock:
            self.state.statuses[response.status] += 1
        return response

    async def _respond(self, request: web.Request, body: dict[str, Any], h: str) -> web.StreamResponse:
        refused = self.refuse_with_secrets(request)
        if refused is not None:
            return refused
        if self.config.fail_always:
            return web.json_response({"error": {"message": "forced failure"}}, status=self.config.fail_always)
        admission = None
        with self._lock:
            now = time.monotonic()
            if self._limiter is not None:
                admission = self._limiter.admit(request_tokens(body), now)
            if admission is None or admission.ok:
                self.state.accepted_at.append(now)
        if admission is not None and not admission.ok:
            return self._rate_limited(body, admission)
        limits = admission.headers if admission is not None and self.config.ratelimit_headers else {}
        fault = self._choose_fault()
        if self.config.latency:
            await asyncio.sleep(self.config.latency)
        if fault:
            with self._lock:
                self.state.faults[fault] += 1
        if fault == "429":
            headers = {**limits, "Retry-After": self.config.retry_after}
            if self.config.retry_after_ms:
                headers["retry-after-ms"] = self.config.retry_after_ms
            return web.json_response({"error": {"message": "rate limited", "type": "rate_limit"}}, status=429,
                                     headers=headers)
        if fault == "500":
            return web.json_response({"error": {"message": "internal error"}}, status=500, headers=limits)
        if fault == "timeout":
            await asyncio.sleep(self.config.timeout_sleep)
        if fault == "malformed":
            return web.Response(text='{"id": "x", "choices": [', content_type="application/json", headers=limits)
        status, payload = self.answer(body, request.headers)
        if status == 200 and request.transport is not None and not request.transport.is_closing():
            with self._lock:
                self.state.ok += 1
                self.state.ok_by_hash[h] += 1
        return web.json_response(payload, status=status, headers=limits)

    async def handle_stats(self, request: web.Request) -> web.Response:
        """``GET /_stats``: the counts, for a benchmark that runs the server in another process."""
        return web.json_response(self.stats())

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/chat/completions", self.handle)
        app.router.add_get("/_stats", self.handle_stats)
        app.router.add_routes(self.batch_api.routes(self.guarded))
        return app

    async def _start(self, port: int) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def start(self, port: int = 0) -> "FakeOpenAI":
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._start(port))
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        loop, self._loop = self._loop, None
        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread:
            self._thread.join(10)

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description="Serve the fake OpenAI API on 127.0.0.1 (prints 'PORT <n>').")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--fault-rate", type=float, default=0.0)
    ap.add_argument("--rpm", type=int, default=None, help="requests per minute (default: unlimited)")
    ap.add_argument("--tpm", type=int, default=None, help="tokens per minute (default: unlimited)")
    ap.add_argument("--burst-seconds", type=float, default=1.0,
                    help="how many seconds of the rpm/tpm limits a full bucket holds")
    ap.add_argument("--no-ratelimit-headers", action="store_true", help="send no x-ratelimit-* headers")
    args = ap.parse_args()
    server = FakeOpenAI(ServerConfig(latency=args.latency, fault_rate=args.fault_rate, rpm=args.rpm, tpm=args.tpm,
                                     burst_seconds=args.burst_seconds,
                                     ratelimit_headers=not args.no_ratelimit_headers))

    async def serve() -> None:
        await server._start(args.port)
        print(f"PORT {server.port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
