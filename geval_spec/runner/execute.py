"""Send requests, at most ``concurrency`` at a time, and keep every answer.

Requests stream in from the planner (:meth:`Executor.stream`): a bounded
queue feeds ``concurrency`` workers, so memory stays flat however many
cases a run has. Each attempt that fails with a retryable error (429, 5xx,
timeout, a broken connection, a body that is not a chat completion) is
retried after an exponential backoff with full jitter, ``uniform(0, backoff *
2**attempt)`` capped at 30 s, or after the server's Retry-After
(``retry-after-ms`` or ``Retry-After``) when it says so, whichever is longer.
Each request gets ``judge.max_retries`` retries; the whole run gets a retry
budget. When the budget is spent the run stops (exit 3); a request that runs
out of its own retries ends as a failure with its reason, and the run goes
on. Authentication errors, and connection errors before any request has
succeeded, stop the run at once: the judge cannot be reached.

Every answer is appended to the run's journal the moment it arrives (as the
text it arrived as), then handed to the store's gate thread.

Stopping: :meth:`Executor.stop_sending` (the first Ctrl-C) sends nothing new
and lets what is in flight finish; :meth:`Executor.abandon` (the second, or
a grace period) cancels what is in flight.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Callable, Sequence, cast

from geval_spec.errors import GevalError, InputError, JudgeUnreachable, Problem, RetryBudgetSpent
from geval_spec.judge import costs
from geval_spec.judge.clients import client_class, client_name
from geval_spec.judge.clients.base import Client, TextClient, TransportError
from geval_spec.judge.types import Completion, Request
from geval_spec.runner.budget import Ceiling
from geval_spec.runner.pacing import Pacer, PaceState
from geval_spec.spec.sections import Judge
from geval_spec.store.journal import Journal
from geval_spec.store.records import ResponseRecord
from geval_spec.values import frozen

MAX_DELAY = 30.0
RECENT = 10  # seconds over which progress shows the current rate
UNREACHABLE_AFTER = 3  # connection failures with no success yet


@dataclass
class Progress:
    """A run's counts as it goes: requests, answers, failures, tokens and cost."""

    total: int = 0  # requests planned so far (cases not yet planned are not counted)
    cached: int = 0
    done: int = 0  # answered in this run
    failed: int = 0  # gave up after retries
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    in_flight: int = 0
    cases: int = 0  # cases of the run
    cases_done: int = 0  # cases judged (or reused)
    cache_saved: float = 0.0  # USD the provider's prompt cache saved
    started: float = field(default_factory=time.monotonic)
    paces: Callable[[], tuple[PaceState, ...]] | None = None  # the executor's (each judge model's pace)
    _seconds: dict[int, tuple[int, int]] = field(default_factory=dict)  # second -> (answers, rate tokens)

    @property
    def pace(self) -> tuple[PaceState, ...]:
        """Each judge model's pace now (read when progress is shown, not at every answer)."""
        return self.paces() if self.paces is not None else ()

    @property
    def rate(self) -> float:
        """Answers received per second so far."""
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def answered(self, completion: Completion) -> None:
        """Count one answer: its tokens, its cost (as the completion carries it) and the current rate."""
        self.done += 1
        self.prompt_tokens += completion.prompt_tokens or 0
        self.completion_tokens += completion.completion_tokens or 0
        self.cached_tokens += completion.cached_tokens or 0
        self.reasoning_tokens += completion.reasoning_tokens or 0
        self.mark((completion.prompt_tokens or 0) + (completion.completion_tokens or 0))
        if completion.cost is None:
            self.unpriced += 1
        else:
            self.cost += completion.cost

    def mark(self, tokens: int) -> None:
        """Count one answer (and its tokens) towards the current rate."""
        now = int(time.monotonic())
        answers, toks = self._seconds.get(now, (0, 0))
        self._seconds[now] = (answers + 1, toks + tokens)
        if len(self._seconds) > RECENT + 2:
            for second in [k for k in self._seconds if k < now - RECENT]:
                del self._seconds[second]

    def recent(self) -> tuple[float, float]:
        """Answers and tokens per minute over the last RECENT whole seconds (since the start, if sooner)."""
        now = int(time.monotonic())
        span = min(RECENT, now - int(self.started))
        if span < 1:
            return self.rate * 60.0, 0.0
        window = [v for sec, v in self._seconds.items() if now - span <= sec < now]
        return sum(a for a, _ in window) * 60.0 / span, sum(t for _, t in window) * 60.0 / span


@dataclass
class Outcome:
    """How one request ended: its completion or error, and the attempts it took."""

    request: Request
    completion: Completion | None = None
    error: str | None = None
    attempts: int = 0
    transport_failure: bool = False  # gave up because the judge could not be reached or kept failing


@dataclass
class RetryBudget:
    """The retries a run may still spend, and those it spent."""

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
    """How the executor sends: concurrency, retry budget, jitter seed and cost ceiling."""

    concurrency: int = 8
    retry_budget: int = 100
    seed: int | None = None  # jitter seed (tests)
    max_cost: float | None = None  # run --max-cost (USD)


@frozen
class Route:
    """Where one request goes and how patiently: the judge's client, its pace and settings."""

    client: Client
    pacer: Pacer
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 0.5
    takes_text: bool = False  # the client's complete() takes the body's canonical JSON too (see takes_text)


def takes_text(client: Client) -> bool:
    """Whether ``client.complete`` takes ``text=``, the body's canonical JSON as encoded when the request was
    planned (the direct client sends it rather than encode the body again); a plugin's client need not."""
    try:
        return "text" in inspect.signature(client.complete).parameters
    except (TypeError, ValueError):
        return False


@frozen
class LimitOverride:
    """``run --rpm/--tpm``: limits for every judge, over the spec's ``judge.limits``."""

    rpm: int | None = None
    tpm: int | None = None


class Routes:
    """One client per judge (or one replay client for all), created when the run starts sending.

    Judges with the same client, server and model share one pacer: a provider's limits are per model.
    """

    batch = False  # the batch API's routes (runner/batch.py) say True: the engine then sends through it

    def __init__(self, judges: Sequence[Judge], concurrency: int, replay: Path | None = None,
                 backoff: float | None = None, limits: LimitOverride | None = None) -> None:
        self.by_label: dict[str, Route] = {}
        self.clients: list[Client] = []
        self.pacers: dict[tuple[str, str, str], Pacer] = {}
        shared: Client | None = None
        if replay is not None:
            shared = client_class("replay")(replay)
            self.clients.append(shared)
        for judge in judges:
            client = shared
            name = "replay" if shared is not None else client_name(judge.client, judge.model)
            if client is None:
                try:
                    cls = client_class(name)
                except KeyError:
                    raise InputError(problems=[Problem(f"unknown judge client {judge.client!r}")]) from None
                client = cls(judge.api_base, concurrency)
                self.clients.append(client)
            key = (name, judge.api_base or "", judge.model)
            if key not in self.pacers:
                rpm = limits.rpm if limits and limits.rpm else (judge.limits.rpm if judge.limits else None)
                tpm = limits.tpm if limits and limits.tpm else (judge.limits.tpm if judge.limits else None)
                self.pacers[key] = Pacer(rpm, tpm, concurrency, adaptive=shared is None)
            self.by_label[judge.label] = Route(client=client, pacer=self.pacers[key], timeout=judge.timeout,
                                               max_retries=judge.max_retries,
                                               backoff=backoff if backoff is not None else 0.5,
                                               takes_text=takes_text(client))

    def pace(self) -> tuple[PaceState, ...]:
        return tuple(p.state() for p in self.pacers.values())

    def __call__(self, request: Request) -> Route:
        return self.by_label[request.judge]

    async def close(self) -> None:
        for client in self.clients:
            try:
                await client.close()
            except Exception:
                pass


Check = Callable[[Request, Completion], GevalError | None]  # stops the run when it returns an error
Sink = Callable[[ResponseRecord], None]  # where records go after the journal (the store's gate)


def cache_saving(model: str, cached_tokens: int) -> float:
    """What the provider's prompt cache saved on ``cached_tokens`` prompt tokens (0 when unpriced)."""
    price = costs.price(model)
    return cached_tokens * (price.input - price.cached_input) if price is not None else 0.0


def response_record(run_id: str, request: Request, attempt: int, completion: Completion | None,
                    error: TransportError | None) -> ResponseRecord:
    if completion is not None:
        body = completion.body_text()  # the body as received, or with its secrets masked
        return ResponseRecord(request_hash=request.hash, run_id=run_id, attempt=attempt, ok=True, status=200,
                              kind=None, error=None, body=body, prompt_tokens=completion.prompt_tokens,
                              completion_tokens=completion.completion_tokens, cost=completion.cost,
                              latency_ms=round(completion.latency_ms, 3), cached_tokens=completion.cached_tokens,
                              reasoning_tokens=completion.reasoning_tokens)
    return ResponseRecord(request_hash=request.hash, run_id=run_id, attempt=attempt, ok=False,
                          status=error.status if error else None, kind=error.kind if error else None,
                          error=str(error) if error else "unknown", body=None, prompt_tokens=None,
                          completion_tokens=None, cost=None, latency_ms=None)


class Executor:
    def __init__(self, route: Routes, run_id: str, journal: Journal, sink: Sink, settings: Settings,
                 progress: Progress, on_progress: Callable[[Progress], None] | None = None,
                 check: Check | None = None) -> None:
        self.route = route
        self.run_id = run_id
        self.journal = journal
        self.sink = sink
        self.settings = settings
        self.progress = progress
        progress.paces = route.pace
        self.on_progress = on_progress or (lambda p: None)
        self.check = check
        self.budget = RetryBudget(settings.retry_budget)
        self.ceiling = Ceiling(settings.max_cost) if settings.max_cost is not None else None
        self.cost_stopped = False  # the ceiling held requests back
        self.rng = random.Random(settings.seed)
        self.successes = 0
        self.connection_failures = 0
        self.stop: BaseException | None = None  # an error that ends the run
        self.stopping = False  # send nothing new (first Ctrl-C)
        self._tasks: set[asyncio.Task[None]] = set()

    def _delay(self, attempt: int, error: TransportError, backoff: float) -> float:
        jitter = self.rng.uniform(0, min(MAX_DELAY, backoff * (2 ** attempt)))
        if error.retry_after is not None:
            return min(max(error.retry_after, jitter), 300.0)
        return jitter

    def _fail(self, error: BaseException) -> BaseException:
        if self.stop is None:
            self.stop = error
        return self.stop

    def _failed_attempt(self, request: Request, attempt: int, exc: TransportError) -> None:
        """Record a failed attempt; raise when it means the run cannot go on."""
        if exc.kind == "replay_miss":
            raise self._fail(InputError(problems=[Problem(
                f"no recorded response for case {request.case_id!r} (request {request.hash[:12]}) in {exc}",
                hint="record it with a real run, then geval-spec export RUN --cassette")]))
        self.sink(response_record(self.run_id, request, attempt, None, exc))
        if exc.kind == "auth":
            raise self._fail(JudgeUnreachable(f"the judge refused the credentials: {exc}"))
        if exc.kind == "connection":
            self.connection_failures += 1
            if self.successes == 0 and self.connection_failures >= UNREACHABLE_AFTER:
                raise self._fail(JudgeUnreachable(f"cannot reach the judge: {exc}"))

    def _received(self, request: Request, attempt: int, completion: Completion) -> None:
        record = response_record(self.run_id, request, attempt, completion, None)
        self.journal.write(record)  # first: survives a kill
        self.sink(record)
        self.successes += 1
        p = self.progress
        p.answered(completion)
        if completion.cost is not None and completion.cached_tokens:
            p.cache_saved += cache_saving(request.model, completion.cached_tokens)
        if self.ceiling is not None:
            self.ceiling.settle(request, completion.cost)
        if self.check is not None:
            problem = self.check(request, completion)
            if problem is not None:
                raise self._fail(problem)

    async def _one(self, request: Request) -> Outcome:
        route = self.route(request)
        pacer = route.pacer
        attempt = 0
        while True:
            ticket = pacer.take(request.body) or await pacer.acquire(request.body)
            try:
                completion = await (
                    cast(TextClient, route.client).complete(request.body, route.timeout, key=request.hash,
                                                            text=request.body_text or None) if route.takes_text
                    else route.client.complete(request.body, route.timeout, key=request.hash))
            except TransportError as exc:
                pacer.release(ticket, rate_limited=exc.kind == "rate_limit", retry_after=exc.retry_after,
                              limits=exc.limits)
                self._failed_attempt(request, attempt, exc)
                if not exc.retryable or attempt >= route.max_retries:
                    self.progress.failed += 1
                    if self.ceiling is not None:
                        self.ceiling.settle(request, None)
                    return Outcome(request, error=f"{exc} (after {attempt + 1} attempt{'s' if attempt else ''})",
                                   attempts=attempt + 1, transport_failure=True)
                if not self.budget.take():
                    raise self._fail(RetryBudgetSpent(
                        f"the retry budget ({self.settings.retry_budget} retries) is spent; last error: {exc}"))
                self.progress.retries += 1
                await asyncio.sleep(self._delay(attempt, exc, route.backoff))
                attempt += 1
                continue
            except BaseException:
                pacer.release(ticket)
                if self.ceiling is not None:
                    self.ceiling.settle(request, None)
                raise
            pacer.release(ticket, limits=completion.limits)
            self._received(request, attempt, completion)
            return Outcome(request, completion=completion, attempts=attempt + 1)

    async def stream(self, feed: AsyncIterator[Request], on_outcome: Callable[[Outcome], None]) -> None:
        """Send what ``feed`` yields, ``concurrency`` at a time; hand each outcome to ``on_outcome``."""
        size = max(2, 2 * self.settings.concurrency)
        queue: asyncio.Queue[Request | None] = asyncio.Queue(maxsize=size)
        workers = max(1, self.settings.concurrency)
        # A full queue is refilled once half of it has gone out, not a request at a time: the producer (and the
        # feed's generator) then wakes once per size / 2 requests instead of once per request.
        room, refill_at = asyncio.Event(), size // 2

        async def produce() -> None:
            try:
                async for request in feed:
                    if self.stopping or self.stop is not None:
                        break
                    if queue.full():
                        room.clear()
                        await room.wait()
                    queue.put_nowait(request)
            except Exception as exc:  # the planner's error (a template, the data) ends the run
                self._fail(exc)
            # the workers end on these (or on the stop flags). Not in a `finally`: cancelled (once the workers
            # have ended), the producer must not wait for room in a queue nobody reads (a run stopped with Ctrl-C
            # while a chunk was being planned hung there)
            for _ in range(workers):
                await queue.put(None)

        async def work() -> None:
            while True:
                request = await queue.get()
                if queue.qsize() <= refill_at:
                    room.set()
                if request is None or self.stopping or self.stop is not None:
                    return
                if self.ceiling is not None and not self.ceiling.admit(request):
                    self.cost_stopped = True  # send nothing new; what is in flight finishes
                    self.stop_sending()
                    return
                self.progress.in_flight += 1
                try:
                    outcome = await self._one(request)
                finally:
                    self.progress.in_flight -= 1
                on_outcome(outcome)
                self.on_progress(self.progress)

        producer = asyncio.ensure_future(produce())
        self._tasks = {asyncio.ensure_future(work()) for _ in range(workers)}
        try:
            results = await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise self._fail(result)
        if self.stop is not None:
            raise self.stop

    def stop_sending(self) -> int:
        """Send nothing new; what is in flight finishes. Returns how many requests are in flight."""
        self.stopping = True
        return self.progress.in_flight

    def abandon(self) -> None:
        """Cancel what is in flight (its responses are not received, so nothing is lost)."""
        self.stopping = True
        for task in self._tasks:
            task.cancel()


def send_all(routes: Routes, requests: Sequence[Request], *, run_id: str, journal: Journal, sink: Sink,
             settings: Settings) -> dict[str, Outcome]:
    """Send a few requests (generated steps) and wait for all of them; close the routes' clients."""
    outcomes: dict[str, Outcome] = {}
    executor = Executor(routes, run_id, journal, sink, settings, Progress(total=len(requests)))

    async def feed() -> AsyncIterator[Request]:
        for request in requests:
            yield request

    async def main() -> None:
        try:
            await executor.stream(feed(), lambda o: outcomes.__setitem__(o.request.hash, o))
        finally:
            await routes.close()

    asyncio.run(main())
    return outcomes
