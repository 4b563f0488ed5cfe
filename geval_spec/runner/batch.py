"""Batch runs (``run --batch``): a run's requests go through the provider's batch API instead of one at a time.

:class:`BatchSender` stands where the engine's :class:`~geval_spec.runner.execute.Executor` stands, with its
interface (``stream``, ``stop_sending``, ``abandon``, ``stopping``, ``progress``), so the engine plans, scores
and stores a batch run exactly as an online one. In :meth:`BatchSender.stream`:

1. requests already answered in the store are answered from it;
2. the run's open batches (stopped or killed while it waited) are polled and collected first, never resubmitted;
3. the rest is submitted per judge client, API base and model, cut at :data:`MAX_REQUESTS` and
   :data:`MAX_BYTES`; each batch is stored the moment the provider has created it, before anything waits;
4. polls every :data:`POLL_START` s growing to :data:`POLL_MAX` s (``GEVAL_BATCH_POLL``: fixed seconds);
5. answers are journalled and stored like online ones (hash = ``custom_id``; marked ``batch``; batch price);
   failed lines are retried online (``errors="online"``) or become failed requests (``errors="invalid"``);
6. a batch that ended failed, expired or cancelled raises a JudgeError naming it, after the rest is collected.

Ctrl-C stops waiting; the batches keep running and stay stored. docs/batch.md is the user's side.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Awaitable, Callable, Literal, Sequence

from geval_spec.errors import InputError, JudgeError, JudgeUnreachable, Problem
from geval_spec.judge import costs
from geval_spec.judge.clients.base import TransportError, completion_from_openai, completion_of
from geval_spec.judge.clients.batch_api import BATCH_CLIENTS, BatchAPI, BatchLine, BatchState, batch_api, input_line
from geval_spec.judge.clients.batch_api import read_lines
from geval_spec.judge.types import Completion, Request
from geval_spec.runner.execute import Executor, Outcome, Route, Routes
from geval_spec.store.batches import BatchRecord
from geval_spec.store.gate import StoreGate
from geval_spec.store.records import ResponseRecord

MAX_REQUESTS = 50_000  # requests per batch (OpenAI's limit)
MAX_BYTES = 200 * 1024 * 1024  # bytes of input file per batch (OpenAI's limit: 200 MB)
POLL_START = 5.0  # seconds before the second look at a batch
POLL_GROWTH = 1.5
POLL_MAX = 60.0
POLL_ENV = "GEVAL_BATCH_POLL"  # seconds: poll at this fixed interval instead
SAY_EVERY = 60.0  # seconds between status lines of a batch whose status has not changed
CALL_TIMEOUT = 120.0  # seconds per call to the batch API
TRANSFER_TIMEOUT = 900.0  # seconds to upload an input file or download a results file
API_RETRIES = 4  # retries of a failed upload, create or download (create: only when the provider said no)
FAILED_POLLS = 10  # polls of one batch that may fail in a row before the run gives up (the batch stays stored)

BatchErrors = Literal["online", "invalid"]
Say = Callable[[str], None]
OnOutcome = Callable[[Outcome], None]


def poll_interval() -> tuple[float, float]:
    """(first, longest) seconds between polls: growing from POLL_START to POLL_MAX, or fixed by GEVAL_BATCH_POLL."""
    text = os.environ.get(POLL_ENV)
    if not text:
        return POLL_START, POLL_MAX
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(problems=[Problem(f"{POLL_ENV}={text!r}: expected a number of seconds above 0")])
    return seconds, seconds


class BatchRoutes(Routes):
    """The run's routes, marked for the batch API: a run whose engine gets these sends through batches.

    The clients are the online routes' (a request that failed in its batch is retried through them); every
    other attribute is theirs too.
    """

    batch = True

    def __init__(self, online: Routes, errors: BatchErrors = "online") -> None:  # no Routes.__init__: no new clients
        self.online = online
        self.errors: BatchErrors = errors
        self.by_label = online.by_label
        self.clients = online.clients
        for label, route in online.by_label.items():
            name = getattr(route.client, "name", "?")
            if name not in BATCH_CLIENTS:
                raise InputError(problems=[Problem(
                    f"--batch: judge {label!r} uses client {name!r}, which has no batch API here",
                    hint=f"batch runs go through judge.client {' or '.join(BATCH_CLIENTS)} (and not with --replay)")])

    def __call__(self, request: Request) -> Route:
        return self.online(request)

    async def close(self) -> None:
        await self.online.close()

    def __getattr__(self, name: str) -> Any:
        if name == "online":
            raise AttributeError(name)
        return getattr(self.online, name)


def for_batch(executor: Executor, gate: StoreGate, say: Say, spec_name: str) -> Executor:
    """What the engine sends through: ``executor``, or a :class:`BatchSender` around it for a batch run."""
    if isinstance(executor.route, BatchRoutes):
        return BatchSender(executor, executor.route, gate, say, spec_name)
    return executor


@dataclass
class _Waiting:
    """A batch being waited for: its stored record, its API, what we last said about it."""

    record: BatchRecord
    api: BatchAPI
    failed_polls: int = 0
    said: str = ""
    said_at: float = 0.0


def _age(created_at: str) -> str:
    try:
        then = datetime.strptime(created_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return "?"
    seconds = int(max(0.0, (datetime.now(timezone.utc) - then).total_seconds()))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def chunks(requests: Sequence[Request], lines: Sequence[bytes]) -> list[tuple[list[Request], bytes]]:
    """The requests cut into batches of at most MAX_REQUESTS requests and MAX_BYTES bytes (their input files)."""
    out: list[tuple[list[Request], bytes]] = []
    part: list[Request] = []
    data: list[bytes] = []
    size = 0
    for request, line in zip(requests, lines):
        if part and (len(part) >= MAX_REQUESTS or size + len(line) > MAX_BYTES):
            out.append((part, b"".join(data)))
            part, data, size = [], [], 0
        part.append(request)
        data.append(line)
        size += len(line)
    if part:
        out.append((part, b"".join(data)))
    return out


class BatchSender(Executor):
    """Sends a run's requests through batch APIs (see the module docstring); the engine's executor for ``--batch``.

    An :class:`Executor` for the engine's purposes, wrapped around the run's online one: it overrides what the
    engine calls (``stream``, ``stop_sending``, ``abandon``) and takes every other attribute from the online
    executor, which sends the requests that failed in their batch.
    """

    def __init__(self, online: Executor, routes: BatchRoutes, gate: StoreGate, say: Say,  # no Executor.__init__
                 spec_name: str) -> None:
        self.online = online  # sends what failed in a batch, when errors are retried online
        self.routes = routes
        self.gate = gate
        self.say = say
        self.spec_name = spec_name
        self.run_id = online.run_id
        self.journal = online.journal
        self.sink = online.sink
        self.progress = online.progress
        self.on_progress = online.on_progress
        self.check = online.check
        self.errors: BatchErrors = routes.errors
        self.stopping = False
        self.stop: BaseException | None = None  # a check's error (no logprobs): raised once the batches are in
        self.poll_start, self.poll_max = poll_interval()
        self._wake = asyncio.Event()
        self._apis: dict[tuple[str, str | None, str], BatchAPI] = {}
        self._waiting: list[_Waiting] = []
        self._ended: list[BatchState] = []
        self._answers: set[str] = set()  # the requests an output line answered (a repeated line is not counted)

    def __getattr__(self, name: str) -> Any:
        """Anything else the engine asks of its executor is the online executor's (it sends the retries)."""
        if name == "online":
            raise AttributeError(name)
        return getattr(self.online, name)

    # -- the engine's interface ------------------------------------------------------------------
    def stop_sending(self) -> int:
        """Stop waiting (the batches keep running and stay stored); returns the online requests in flight."""
        self.stopping = True
        self._wake.set()
        return self.online.stop_sending()

    def abandon(self) -> None:
        """As :meth:`stop_sending`, and cancel online retries in flight. A batch being created is still stored."""
        self.stopping = True
        self._wake.set()
        self.online.abandon()

    async def stream(self, feed: AsyncIterator[Request], on_outcome: OnOutcome) -> None:
        """Answer every request ``feed`` yields through batches; hand each outcome to ``on_outcome``."""
        requests = []
        async for request in feed:
            if self.stopping:
                break
            requests.append(request)
        pending = self._answered(requests, on_outcome)
        retry: list[Request] = []
        self._ended = []
        try:
            resumed = self.gate.call(lambda store: store.batches(self.run_id))
            if resumed:
                self.say(f"{len(resumed)} batch(es) of this run were submitted earlier: waiting for them, "
                         "nothing is submitted again")
                await self._wait([self._track(r) for r in resumed], pending, retry, on_outcome)
            if pending and not self.stopping and not self._ended:
                created = await self._submit(pending)
                await self._wait(created, pending, retry, on_outcome)
                if not self.stopping and not self._ended:
                    retry += self._unanswered(pending, on_outcome)
            if self.stopping:
                self._stopped()
                return
            if retry and self.stop is None:
                await self._retry_online(retry, on_outcome)
        finally:
            for api in self._apis.values():
                await api.close()
            self._apis = {}
        if self.stop is not None:
            raise self.stop
        if self._ended:
            raise JudgeError(self._ended_message())

    # -- answered already --------------------------------------------------------------------------
    def _answered(self, requests: Sequence[Request], on_outcome: OnOutcome) -> dict[str, Request]:
        """Answer the requests the store has answers for; the others, by hash."""
        fresh = {r.hash: r for r in requests}
        if not fresh:
            return fresh
        stored = self.gate.call(lambda store: store.ok_responses(list(fresh)))
        for h, recorded in stored.items():
            request = fresh.pop(h)
            self.progress.cached += 1
            on_outcome(Outcome(request, completion=completion_of(recorded, request.model)))
        return fresh

    # -- submitting ----------------------------------------------------------------------------------
    def _api(self, client: str, api_base: str | None, model: str) -> BatchAPI:
        key = (client, api_base, model)
        if key not in self._apis:
            try:
                self._apis[key] = batch_api(client, api_base, model)
            except TransportError as exc:
                raise JudgeError(f"cannot use the batch API of {client} for {model}: {exc}") from None
            except ValueError as exc:
                raise InputError(problems=[Problem(f"--batch: {exc}")]) from None
        return self._apis[key]

    def _track(self, record: BatchRecord) -> _Waiting:
        return _Waiting(record, self._api(record.client, record.api_base, record.model))

    async def _call(self, what: str, call: Callable[[], Awaitable[Any]], answered_only: bool = False) -> Any:
        """``call()``, retried after a retryable failure; a JudgeError naming ``what`` when it cannot be done.

        ``answered_only``: retry only when the provider answered with an error (a call that timed out or lost its
        connection may have been done: a batch must not be created twice).
        """
        attempt = 0
        while True:
            try:
                return await call()
            except TransportError as exc:
                if exc.kind == "auth":
                    raise JudgeUnreachable(f"the batch API refused the credentials ({what}): {exc}") from None
                retry = exc.kind in ("rate_limit", "server") if answered_only else exc.retryable
                if not retry or attempt >= API_RETRIES or self.stopping:
                    maybe = " (it may have been created: see the provider's list of batches)" \
                        if answered_only and exc.kind in ("timeout", "connection") else ""
                    raise JudgeError(f"cannot {what}: {exc}{maybe}") from None
                delay = min(30.0, 0.5 * 2 ** attempt)
                await asyncio.sleep(max(delay, exc.retry_after or 0.0))
                attempt += 1

    async def _submit(self, pending: dict[str, Request]) -> list[_Waiting]:
        """Submit ``pending`` in batches per client, API base and model; store each batch once it exists."""
        groups: dict[tuple[str, str | None, str], list[Request]] = {}
        for request in pending.values():
            route = self.routes(request).client
            groups.setdefault((route.name, getattr(route, "api_base", None), request.model), []).append(request)
        created: list[_Waiting] = []
        for (client, api_base, model), requests in groups.items():
            api = self._api(client, api_base, model)
            lines = [input_line(r.hash, api.wire_body(r.body)) for r in requests]
            for part, data in chunks(requests, lines):
                if self.stopping:
                    return created
                created.append(await self._submit_one(api, client, model, part, data))
        return created

    async def _submit_one(self, api: BatchAPI, client: str, model: str, requests: list[Request],
                          data: bytes) -> _Waiting:
        name = f"geval-{self.spec_name}-{self.run_id}.jsonl"
        file_id = await self._call("upload the batch's input file", lambda: api.upload(data, name, TRANSFER_TIMEOUT))
        metadata = {"geval_spec": self.spec_name[:500], "geval_run": self.run_id}
        state: BatchState = await self._call("create the batch", lambda: api.create(file_id, metadata, CALL_TIMEOUT),
                                             answered_only=True)
        record = BatchRecord(batch_id=state.id, run_id=self.run_id, spec_name=self.spec_name, client=client,
                             api_base=api.api_base, model=model, input_file_id=file_id, requests=len(requests),
                             status=state.status)
        self.gate.call(lambda store: store.add_batch(record))  # stored before anything waits for it
        self.say(f"batch {state.id}: {len(requests)} requests to {model} submitted ({len(data):,} bytes); "
                 "if this process stops, run the same command again to collect it")
        return _Waiting(record, api)

    # -- waiting --------------------------------------------------------------------------------------
    async def _wait(self, batches: list[_Waiting], pending: dict[str, Request], retry: list[Request],
                    on_outcome: OnOutcome) -> None:
        """Poll ``batches`` until each has ended (collecting each as it ends) or until stopped."""
        self._waiting = list(batches)
        interval = self.poll_start
        while self._waiting and not self.stopping:
            for waiting in list(self._waiting):
                state = await self._poll(waiting)
                if state is None or not state.final:
                    continue
                self._waiting.remove(waiting)
                await self._collect(waiting, state, pending, retry, on_outcome)
                if self.stopping:
                    break
            self.on_progress(self.progress)
            if self._waiting and not self.stopping:
                try:
                    await asyncio.wait_for(self._wake.wait(), interval)
                except asyncio.TimeoutError:
                    pass
                interval = min(self.poll_max, interval * POLL_GROWTH)

    async def _poll(self, waiting: _Waiting) -> BatchState | None:
        """The batch's state now (stored and said when it changed); None after a failed poll that may pass."""
        record = waiting.record
        try:
            state: BatchState = await waiting.api.retrieve(record.batch_id, CALL_TIMEOUT)
        except TransportError as exc:
            if exc.kind == "auth":
                raise JudgeUnreachable(f"the batch API refused the credentials: {exc}") from None
            if not exc.retryable:  # the provider does not know it (any more): it ended for us
                return BatchState(record.batch_id, "failed", errors=(f"unknown to the provider: {exc}",))
            waiting.failed_polls += 1
            if waiting.failed_polls >= FAILED_POLLS:
                raise JudgeError(f"cannot poll batch {record.batch_id}: {exc} ({FAILED_POLLS} times in a row). It "
                                 "stays stored: run the same command again to go on waiting for it") from None
            self.say(f"batch {record.batch_id}: polling failed ({exc}); trying again")
            return None
        waiting.failed_polls = 0
        if state.status != record.status:
            waiting.record = replace(record, status=state.status)
            self.gate.call(lambda store: store.update_batch(record.batch_id, state.status))
        done = state.completed + state.failed
        line = f"batch {record.batch_id}: {state.status}, {done} of {state.total or record.requests} requests done"
        line += f" ({state.failed} failed)" if state.failed else ""
        now = time.monotonic()
        if state.status != waiting.said or now - waiting.said_at >= SAY_EVERY:
            self.say(f"{line}; submitted {_age(record.created_at)} ago")
            waiting.said, waiting.said_at = state.status, now
        return state

    def _stopped(self) -> None:
        ids = [w.record.batch_id for w in self._waiting]
        if ids:
            self.say(f"stopped waiting; batch(es) {', '.join(ids)} keep running at the provider and stay stored "
                     "(geval-spec batches lists them): run the same command again to collect them, nothing is "
                     "submitted again")

    def _ended_message(self) -> str:
        parts = []
        for state in self._ended:
            why = f": {'; '.join(state.errors[:5])}" if state.errors else ""
            parts.append(f"batch {state.id} ended {state.status}{why}")
        return (f"{'; '.join(parts)}. The answers it gave are stored; run the same command again to submit what is "
                "still unanswered")

    # -- results ----------------------------------------------------------------------------------------
    async def _collect(self, waiting: _Waiting, state: BatchState, pending: dict[str, Request],
                       retry: list[Request], on_outcome: OnOutcome) -> None:
        """Store a final batch's answers and failures, hand their outcomes on, and close the batch."""
        batch_id = waiting.record.batch_id
        for file_id in (state.output_file_id, state.error_file_id):
            if file_id is None or self.stopping:
                continue
            data: bytes = await self._call(f"download file {file_id} of batch {batch_id}",
                                           lambda: waiting.api.content(file_id, TRANSFER_TIMEOUT))
            for line in read_lines(data):
                self._line(waiting.record, line, pending, retry, on_outcome)
        if self.stopping and (state.output_file_id or state.error_file_id):
            self._waiting.append(waiting)  # not collected yet: it stays open
            return
        if state.status != "completed":
            self._ended.append(state)
        self.gate.call(lambda store: store.update_batch(batch_id, state.status[:200], state.output_file_id,
                                                        state.error_file_id, finished=True))

    def _line(self, record: BatchRecord, line: BatchLine, pending: dict[str, Request], retry: list[Request],
              on_outcome: OnOutcome) -> None:
        if line.ok and line.custom_id in self._answers:  # the same answer twice in an output file (or in two
            return                                        # batches): kept once, counted once
        request = pending.pop(line.custom_id, None)
        if request is None and line.ok:  # an answer after a failed line of the same request (a provider's retry
            queued = next((r for r in retry if r.hash == line.custom_id), None)  # in the batch): not sent again
            if queued is not None:
                retry.remove(queued)
                request = queued
        model = request.model if request is not None else record.model
        if line.ok and line.body is not None:
            try:
                completion = completion_from_openai(line.body, model, 0.0)
            except TransportError as exc:
                line = BatchLine(line.custom_id, line.status, None, exc.kind, str(exc))
            else:
                self._answer(line.custom_id, request, model, completion, on_outcome)
                return
        error = TransportError(line.kind or "server", f"batch {record.batch_id}: {line.error}", status=line.status)
        self.sink(ResponseRecord(request_hash=line.custom_id, run_id=self.run_id, attempt=0, ok=False,
                                 status=line.status, kind=error.kind, error=str(error), body=None, prompt_tokens=None,
                                 completion_tokens=None, cost=None, latency_ms=None, batch=True))
        if request is None:
            return
        if self.errors == "online":
            retry.append(request)
            return
        self.progress.failed += 1
        on_outcome(Outcome(request, error=str(error), attempts=1, transport_failure=True))

    def _answer(self, request_hash: str, request: Request | None, model: str, completion: Completion,
                  on_outcome: OnOutcome) -> None:
        """One answer: costed at the batch price, journalled, stored, counted, handed on."""
        cost = costs.cost(model, completion.prompt_tokens, completion.completion_tokens, completion.cached_tokens,
                          batch=True)
        completion = replace(completion, cost=cost)
        record = ResponseRecord(request_hash=request_hash, run_id=self.run_id, attempt=0, ok=True, status=200,
                                kind=None, error=None, body=completion.body_text(),
                                prompt_tokens=completion.prompt_tokens,
                                completion_tokens=completion.completion_tokens, cost=cost, latency_ms=None,
                                cached_tokens=completion.cached_tokens, reasoning_tokens=completion.reasoning_tokens,
                                batch=True)
        self.journal.write(record)  # first: survives a kill
        self.sink(record)
        self._answers.add(request_hash)
        self.progress.answered(completion)
        if request is None:
            return
        problem = self.check(request, completion) if self.check is not None else None
        if problem is not None:
            self.stop = self.stop or problem
            return
        on_outcome(Outcome(request, completion=completion, attempts=1))

    def _unanswered(self, pending: dict[str, Request], on_outcome: OnOutcome) -> list[Request]:
        """Requests whose completed batch gave no line for them: retried online, or failed, like errored lines."""
        left = list(pending.values())
        pending.clear()
        if not left:
            return []
        if self.errors == "online":
            return left
        for request in left:
            self.progress.failed += 1
            on_outcome(Outcome(request, error="its batch completed without a result for it", attempts=1,
                               transport_failure=True))
        return []

    async def _retry_online(self, retry: list[Request], on_outcome: OnOutcome) -> None:
        self.say(f"{len(retry)} request(s) failed in their batch: sending them online (--batch-errors online)")

        async def feed() -> AsyncIterator[Request]:
            for request in retry:
                yield request

        await self.online.stream(feed(), on_outcome)
