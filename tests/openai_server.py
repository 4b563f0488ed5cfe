"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat completions API.

Used by the end-to-end tests and by the benchmarks. It answers like a judge
model: JSON output with a score (or TCVA statements), token logprobs with
top alternatives at every position, ``n`` completions, usage counts; with
configurable latency and injected faults (429 with Retry-After, 500, a
timeout, a malformed body). It counts every request by the hash of its body.

Run standalone (for benchmarks): ``python tests/openai_server.py --latency 0.2``
prints ``PORT <n>`` and serves until killed.
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
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web

JudgeFn = Callable[[dict[str, Any], int], dict[str, Any]]


def candidate_of(body: dict[str, Any]) -> str:
    """The candidate text of a built-in-template prompt (what follows 'Candidate:')."""
    text = body["messages"][-1]["content"]
    m = re.search(r"(?:Candidate|Response to evaluate):\n(.*?)(?:\n\nAutomatic pre-checks|\Z)", text, re.S)
    return m.group(1).strip() if m else text


def hashed_score(text: str, lo: int = 1, hi: int = 5) -> int:
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
    out = _TOKEN.findall(text)
    assert "".join(out) == text
    return out


def logprobs_for(content: str, score: int | None, distribution: dict[int, float] | None, top: int) -> dict:
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


@dataclass
class ServerConfig:
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


@dataclass
class ServerState:
    total: int = 0
    ok: int = 0
    by_hash: Counter = field(default_factory=Counter)
    ok_by_hash: Counter = field(default_factory=Counter)
    bodies: list = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)


def body_hash(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class FakeOpenAI:
    def __init__(self, config: ServerConfig | None = None):
        self.config = config or ServerConfig()
        self.state = ServerState()
        self._lock = threading.Lock()
        self._rng = random.Random(self.config.seed)
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        with self._lock:
            self.state = ServerState()

    def _choose_fault(self) -> str | None:
        with self._lock:
            if self.config.fault_rate and self._rng.random() < self.config.fault_rate:
                return self._rng.choice(self.config.faults)
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        h = body_hash(body)
        with self._lock:
            self.state.total += 1
            self.state.by_hash[h] += 1
            self.state.bodies.append(body)
        if self.config.fail_always:
            return web.json_response({"error": {"message": "forced failure"}}, status=self.config.fail_always)
        fault = self._choose_fault()
        if self.config.latency:
            await asyncio.sleep(self.config.latency)
        if fault:
            with self._lock:
                self.state.faults[fault] += 1
        if fault == "429":
            headers = {"Retry-After": self.config.retry_after}
            if self.config.retry_after_ms:
                headers["retry-after-ms"] = self.config.retry_after_ms
            return web.json_response({"error": {"message": "rate limited", "type": "rate_limit"}}, status=429,
                                     headers=headers)
        if fault == "500":
            return web.json_response({"error": {"message": "internal error"}}, status=500)
        if fault == "timeout":
            await asyncio.sleep(self.config.timeout_sleep)
        if fault == "malformed":
            return web.Response(text='{"id": "x", "choices": [', content_type="application/json")
        n = int(body.get("n") or 1)
        if n > 1 and not self.config.support_n:
            return web.json_response({"error": {"message": "n is not supported"}}, status=400)
        want_lp = bool(body.get("logprobs")) and self.config.logprobs
        top = int(body.get("top_logprobs") or 0)
        choices = []
        completion_tokens = 0
        for i in range(n):
            answer = self.config.judge(body, i)
            content = answer["content"]
            completion_tokens += len(tokens_of(content))
            choice = {"index": i, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
                      "logprobs": None}
            if want_lp:
                choice["logprobs"] = logprobs_for(content, answer.get("score"), answer.get("distribution"), top)
            choices.append(choice)
        prompt_tokens = sum(len(m["content"]) for m in body["messages"]) // 4
        with self._lock:
            self.state.ok += 1
            self.state.ok_by_hash[h] += 1
        return web.json_response({
            "id": f"chatcmpl-{h[:12]}", "object": "chat.completion", "created": 1700000000,
            "model": body["model"], "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/chat/completions", self.handle)
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
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--fault-rate", type=float, default=0.0)
    args = ap.parse_args()
    server = FakeOpenAI(ServerConfig(latency=args.latency, fault_rate=args.fault_rate))

    async def serve() -> None:
        await server._start(args.port)
        print(f"PORT {server.port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
