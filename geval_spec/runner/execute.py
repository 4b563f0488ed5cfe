"""Send requests, at most ``concurrency`` at a time, and keep every answer.

Each attempt that fails with a retryable error (429, 5xx, timeout, a broken
connection, a body that is not a chat completion) is retried after an
exponential backoff with full jitter, ``uniform(0, backoff * 2**attempt)``
capped at 30 s, or after the server's Retry-After (``retry-after-ms`` or
``Retry-After``) when it says so, whichever is longer. Each request gets
``judge.max_retries`` retries; the whole run gets a retry budget. When the
budget is spent the run stops (exit 3); a request that runs out of its own
retries ends as a failure with its reason (an invalid judgment), and the run
goes on. Authentication errors, and connection errors before any request has
succeeded, stop the run at once: the judge cannot be reached.

Every answer is appended to the run's journal the moment it arrives, then
committed to the store by a writer thread.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from geval_spec.errors import GevalError, InputError, JudgeUnreachable, Problem, RetryBudgetSpent
from geval_spec.judge.clients import client_class
from geval_spec.judge.clients.base import Client, TransportError
from geval_spec.judge.types import Completion, Request
from geval_spec.spec.sections import Judge
from geval_spec.store.db import ResponseWriter
from geval_spec.store.journal import Journal
from geval_spec.store.records import ResponseRecord

MAX_DELAY = 30.0
UNREACHABLE_AFTER = 3  # connection failures with no success yet


@dataclass
class Progress:
    total: int = 0
    cached: int = 0
    done: int = 0  # answered in this run
    failed: int = 0  # gave up after retries
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0


@dataclass
class Outcome:
    request: Request
    completion: Completion | None = None
    error: str | None = None
    attempts: int = 0


@dataclass
class RetryBudget:
    remaining: int
    spent: int = 0

    def take(self) -> bool:
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        self.spent += 1
        return True


@dataclass
class Settings:
    concurrency: int = 8
    retry_budget: int = 100
    seed: int | None = None  # jitter seed (tests)


@dataclass(frozen=True)
class Route:
    """Where one request goes and how patiently: the judge's client and settings."""

    client: Client
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 0.5


class Routes:
    """One client per judge (or one replay client for all), created when the run starts sending."""

    def __init__(self, judges: Sequence[Judge], concurrency: int, replay: Path | None = None,
                 backoff: float | None = None) -> None:
        self.by_label: dict[str, Route] = {}
        self.clients: list[Client] = []
        shared: Client | None = None
        if replay is not None:
            shared = client_class("replay")(replay)
            self.clients.append(shared)
        for judge in judges:
            client = shared
            if client is None:
                try:
                    cls = client_class(judge.client)
                except KeyError:
                    raise InputError(problems=[Problem(f"unknown judge client {judge.client!r}")]) from None
                client = cls(judge.api_base, concurrency)
                self.clients.append(client)
            self.by_label[judge.label] = Route(client=client, timeout=judge.timeout, max_retries=judge.max_retries,
                                               backoff=backoff if backoff is not None else 0.5)

    def __call__(self, request: Request) -> Route:
        return self.by_label[request.judge]


@dataclass
class _Shared:
    successes: int = 0
    connection_failures: int = 0
    stop: BaseException | None = None
    rng: random.Random = field(default_factory=random.Random)


Check = Callable[[Request, Completion], GevalError | None]  # stops the run when it returns an error


class Executor:
    def __init__(self, route: Callable[[Request], Route], run_id: str, journal: Journal, writer: ResponseWriter,
                 settings: Settings, progress: Progress, on_progress: Callable[[Progress], None] | None = None,
                 check: Check | None = None) -> None:
        self.route = route
        self.run_id = run_id
        self.journal = journal
        self.writer = writer
        self.settings = settings
        self.progress = progress
        self.on_progress = on_progress or (lambda p: None)
        self.check = check
        self.budget = RetryBudget(settings.retry_budget)
        self._shared = _Shared(rng=random.Random(settings.seed))

    def _record(self, request: Request, attempt: int, completion: Completion | None,
                error: TransportError | None) -> ResponseRecord:
        if completion is not None:
            return ResponseRecord(request_hash=request.hash, run_id=self.run_id, attempt=attempt, ok=True,
                                  status=200, kind=None, error=None, body=completion.raw,
                                  prompt_tokens=completion.prompt_tokens,
                                  completion_tokens=completion.completion_tokens, cost=completion.cost,
                                  latency_ms=round(completion.latency_ms, 3))
        return ResponseRecord(request_hash=request.hash, run_id=self.run_id, attempt=attempt, ok=False,
                              status=error.status if error else None, kind=error.kind if error else None,
                              error=str(error) if error else "unknown", body=None, prompt_tokens=None,
                              completion_tokens=None, cost=None, latency_ms=None)

    def _delay(self, attempt: int, error: TransportError, backoff: float) -> float:
        jitter = self._shared.rng.uniform(0, min(MAX_DELAY, backoff * (2 ** attempt)))
        if error.retry_after is not None:
            return min(max(error.retry_after, jitter), 300.0)
        return jitter

    async def _one(self, request: Request, sem: asyncio.Semaphore) -> Outcome:
        shared = self._shared
        route = self.route(request)
        attempt = 0
        async with sem:
            while True:
                if shared.stop is not None:
                    raise asyncio.CancelledError
                try:
                    completion = await route.client.complete(request.body, route.timeout, key=request.hash)
                except TransportError as exc:
                    if exc.kind == "replay_miss":
                        shared.stop = InputError(problems=[Problem(
                            f"no recorded response for case {request.case_id!r} (request {request.hash[:12]}) "
                            f"in {exc}", hint="record it with a real run, then geval-spec export RUN --cassette")])
                        raise shared.stop
                    self.writer.put(self._record(request, attempt, None, exc))
                    if exc.kind == "auth":
                        shared.stop = JudgeUnreachable(f"the judge refused the credentials: {exc}")
                        raise shared.stop
                    if exc.kind == "connection":
                        shared.connection_failures += 1
                        if shared.successes == 0 and shared.connection_failures >= UNREACHABLE_AFTER:
                            shared.stop = JudgeUnreachable(f"cannot reach the judge: {exc}")
                            raise shared.stop
                    if not exc.retryable or attempt >= route.max_retries:
                        self.progress.failed += 1
                        self.on_progress(self.progress)
                        return Outcome(request, error=f"{exc} (after {attempt + 1} attempt"
                                                      f"{'s' if attempt else ''})", attempts=attempt + 1)
                    if not self.budget.take():
                        shared.stop = RetryBudgetSpent(
                            f"the retry budget ({self.settings.retry_budget} retries) is spent; last error: {exc}")
                        raise shared.stop
                    self.progress.retries += 1
                    await asyncio.sleep(self._delay(attempt, exc, route.backoff))
                    attempt += 1
                    continue
                record = self._record(request, attempt, completion, None)
                self.journal.write(record)  # first: survives a kill
                self.writer.put(record)
                shared.successes += 1
                p = self.progress
                p.done += 1
                p.prompt_tokens += completion.prompt_tokens or 0
                p.completion_tokens += completion.completion_tokens or 0
                if completion.cost is None:
                    p.unpriced += 1
                else:
                    p.cost += completion.cost
                self.on_progress(p)
                if self.check is not None:
                    problem = self.check(request, completion)
                    if problem is not None:
                        shared.stop = problem
                        raise problem
                return Outcome(request, completion=completion, attempts=attempt + 1)

    async def run(self, requests: Sequence[Request]) -> dict[str, Outcome]:
        sem = asyncio.Semaphore(max(1, self.settings.concurrency))
        tasks = [asyncio.ensure_future(self._one(r, sem)) for r in requests]
        outcomes: dict[str, Outcome] = {}
        try:
            for fut in asyncio.as_completed(tasks):
                try:
                    outcome = await fut
                except asyncio.CancelledError:
                    continue
                outcomes[outcome.request.hash] = outcome
                if self._shared.stop is not None:
                    break
        except GevalError as exc:
            if self._shared.stop is None:
                self._shared.stop = exc
        finally:
            if self._shared.stop is not None:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        if self._shared.stop is not None:
            raise self._shared.stop
        return outcomes


def run_requests(routes: Routes, requests: Sequence[Request], *, run_id: str, journal: Journal,
                 writer: ResponseWriter, settings: Settings, progress: Progress,
                 on_progress: Callable[[Progress], None] | None = None, check: Check | None = None
                 ) -> dict[str, Outcome]:
    """Send ``requests`` and close the routes' clients afterwards, whatever happens."""
    executor = Executor(routes, run_id, journal, writer, settings, progress, on_progress, check)

    async def main() -> dict[str, Outcome]:
        try:
            return await executor.run(requests)
        finally:
            for client in routes.clients:
                try:
                    await client.close()
                except Exception:
                    pass

    return asyncio.run(main())
