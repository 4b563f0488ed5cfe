"""The streaming part of a run: plan cases in chunks, send what is not answered yet, score each case as it completes.

Memory stays flat: the planner renders a chunk of cases at a time and drops
those cases once planned, the executor's queue holds a bounded window of
requests, and a case's prompts, completions and judgment leave memory once
its judgment is handed to the store's gate. Identical requests (the same hash) are sent once and answer
every case that needs them.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable, Iterable, Sequence, TypeVar

from geval_spec.dataset.cases import Case, with_texts
from geval_spec.errors import EXIT_INTERRUPTED, CostCeiling, GevalError, JudgeError
from geval_spec.judge.clients.base import completion_of
from geval_spec.judge.precheck import Findings, precheck
from geval_spec.judge.requests import method_requests, prepare_requests, unique
from geval_spec.judge.scoring import as_fallback, missing_logprobs, score_case
from geval_spec.judge.messages import Message, Rendered
from geval_spec.judge.types import Completion, Judgment, Request
from geval_spec.runner.execute import Check, Executor, Outcome, Progress, Routes, Settings
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import Judge
from geval_spec.store.db import Store
from geval_spec.store.gate import StoreGate
from geval_spec.store.journal import Journal
from geval_spec.store.records import Planned, ResponseRecord

T = TypeVar("T")

FIRST_CHUNK = 64  # cases planned before the first request goes out
CHUNK = 500  # cases planned at a time after that (rendering blocks the event loop meanwhile: keep it short)
JUDGMENT_BATCH = 200  # judgments handed to the gate at a time
GRACE = 3.0  # seconds in-flight requests get after the first Ctrl-C
OUTAGE_SHARE = 0.5  # more than this share of cases failing in transport is an outage, not a quality result


class Interrupted(GevalError):
    """The run was stopped with Ctrl-C; what was received is stored and the next run resumes."""

    exit_code = EXIT_INTERRUPTED


class _Hashes:
    """A set of request hashes, each kept as the integer its 32 hex digits spell (a hex string takes 81 bytes, 113
    when hashes had 64 digits: 15 MB at 100,000 requests)."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: set[int] = set()

    def __contains__(self, h: str) -> bool:
        return int(h[:32], 16) in self._keys

    def add(self, h: str) -> None:
        self._keys.add(int(h[:32], 16))

    def update(self, hashes: Iterable[str]) -> None:
        self._keys.update(int(h[:32], 16) for h in hashes)


@dataclass
class _Group:
    """One case's requests to one judge, waiting for their answers."""

    case_id: str
    judge: str
    requests: list[Request]
    fallback: bool = False  # the requests of scoring.fallback, for a case without logprobs
    completions: dict[str, Completion] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    transport_failed: bool = False

    @property
    def complete(self) -> bool:
        return all(r.hash in self.completions or r.hash in self.errors for r in self.requests)


@dataclass
class Tally:
    """What happened to the run's cases, for the outage rule and the summary."""

    judged: int = 0
    transport_failed: int = 0
    answered: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # why cases got no answer, by reason

    def add(self, transport_failed: bool, reason: str | None) -> None:
        self.judged += 1
        if transport_failed:
            self.transport_failed += 1
            key = (reason or "no response").removeprefix("request failed: ").split(" (after")[0][:120]
            self.failures[key] = self.failures.get(key, 0) + 1
        else:
            self.answered += 1


class Engine:
    """Sends one run's requests and turns completed cases into stored judgments."""

    def __init__(self, parsed: ParsedSpec, judges: Sequence[Judge], run_id: str, gate: StoreGate,
                 journal: Journal, routes: Routes, settings: Settings, reuse_answers: bool, check: Check | None,
                 on_progress: Callable[[Progress], None] | None, say: Callable[[str], None],
                 progress: Progress) -> None:
        self.parsed = parsed
        self.judges = judges
        self.run_id = run_id
        self.gate = gate
        self.journal = journal
        self.reuse_answers = reuse_answers
        self.say = say
        self.progress = progress
        self.executor = Executor(routes, run_id, journal, self._sink, settings, progress, on_progress, check)
        if routes.batch:  # run --batch: through the batch API (imported only then)
            from geval_spec.runner.batch import for_batch

            self.executor = for_batch(self.executor, gate, say, parsed.name)
        self.waiting: dict[str, list[_Group]] = {}  # request hash -> groups that need it
        self.sent = _Hashes()
        self.failed: dict[str, tuple[str, bool]] = {}  # request hash -> (error, transport failure), once given up
        self.position = 0
        self.judgments: list[Judgment] = []
        self.fallback: list[Request] = []
        self.tally = Tally()

    # -- the store -----------------------------------------------------------------------
    def _sink(self, record: ResponseRecord) -> None:
        self.gate.add_response(record)

    def _flush_judgments(self) -> None:
        batch, self.judgments = self.judgments, []
        if batch:  # (their case keys are the run's cases', stored with them: the store fills them in)
            self.gate.add_judgments(self.run_id, batch)

    def _register(self, requests: Sequence[Request], start: int, findings: Findings) -> None:
        """Journal a chunk's requests, then queue them (with the chunk's findings) for the gate's next session.

        Before any of them is sent: a killed run's journal then replays its answers with their requests. Sending
        does not wait for a store session."""
        planned = Planned.of(self.run_id, requests, start)
        self.journal.write_planned(planned)
        self.gate.add_planned(self.run_id, planned, findings)

    async def _stored(self, op: Callable[[Store], T]) -> T:
        """``op`` done by the store's gate; waited for in a thread, so the event loop goes on with what is in
        flight meanwhile."""
        return await asyncio.to_thread(self.gate.call, op)

    # -- planning ---------------------------------------------------------------------------
    async def _plan(self, chunk: Sequence[Case]) -> list[Request]:
        """Render a chunk of cases; register their requests; return those still to send."""
        findings = precheck(self.parsed, chunk)
        plan = prepare_requests(self.parsed, chunk, judges=tuple(self.judges), findings=findings)
        requests = list(plan.requests)
        self._register(requests, self.position, findings)
        self.position += len(requests)
        # an identical prompt in an earlier chunk (cases whose fields are the same) has the same hash: that request
        # is not sent again, and if its outcome is already in, this chunk's cases take it (below)
        outcome_in = {r.hash for r in requests if r.hash in self.sent and r.hash not in self.waiting}
        groups: dict[tuple[str, str], _Group] = {}
        for r in requests:
            group = groups.setdefault((r.case_id, r.judge), _Group(r.case_id, r.judge, []))
            group.requests.append(r)
        for group in groups.values():
            for h in {r.hash for r in group.requests}:
                self.waiting.setdefault(h, []).append(group)
        fresh = {r.hash: r for r in requests if r.hash not in self.sent}
        self.progress.total += len(fresh)
        for h in outcome_in & self.failed.keys():
            error, transport = self.failed[h]
            self._resolve(h, error=error, transport_failure=transport)
        answered = [h for h in outcome_in if h not in self.failed]  # their answers are stored (or queued to be)
        lookup = (list(fresh) if self.reuse_answers else []) + answered
        if lookup:
            stored = await self._stored(lambda store: store.ok_responses(lookup))
            model = {r.hash: r.model for r in requests}
            for h, recorded in stored.items():
                if h in fresh:
                    self.progress.cached += 1
                    self.sent.add(h)
                self._resolve(h, completion=completion_of(recorded, model[h]))
            for h in answered:
                if h not in stored:  # (cannot happen: an answer reaches the gate before its outcome is handled)
                    self._resolve(h, error="the answer to an identical earlier request was not found in the store")
        out = [r for h, r in fresh.items() if h not in self.sent]
        self.sent.update(r.hash for r in out)
        return out

    async def _feed(self, cases: list[Case], let_go: Callable[[list[Case]], None]) -> AsyncIterator[Request]:
        """Plan ``cases`` a chunk at a time, taking each chunk out of the list: a case planned is held no more
        (``let_go`` sees each chunk once it is planned)."""
        size = FIRST_CHUNK
        cases.reverse()  # (taken from the end: a chunk leaves the list without moving the rest)
        while cases:
            chunk = cases[-size:]
            del cases[-size:]
            chunk.reverse()
            chunk = with_texts(chunk)  # (a JSON Lines file's texts, read again: OnDisk)
            for request in await self._plan(chunk):
                yield request
            let_go(chunk)
            del chunk
            size = CHUNK
        # everything is queued: write what came in so far while the last answers are on their way, so that the
        # session after them is a short one
        self.gate.nudge()

    async def _feed_list(self, requests: Sequence[Request]) -> AsyncIterator[Request]:
        for request in requests:
            yield request

    # -- outcomes and scoring ---------------------------------------------------------------------
    def _resolve(self, h: str, completion: Completion | None = None, error: str | None = None,
                 transport_failure: bool = False) -> None:
        if completion is None:
            self.failed[h] = (error or "no response", transport_failure)
        for group in self.waiting.pop(h, []):
            if completion is not None:
                group.completions[h] = completion
            else:
                group.errors[h] = error or "no response"
                group.transport_failed = group.transport_failed or transport_failure
            if group.complete:
                self._score(group)

    def _on_outcome(self, outcome: Outcome) -> None:
        self._resolve(outcome.request.hash, outcome.completion, outcome.error, outcome.transport_failure)

    def _score(self, group: _Group) -> None:
        spec = self.parsed.spec
        method, fb = spec.scoring.method, spec.scoring.fallback
        comps = [group.completions.get(r.hash) for r in group.requests]
        if group.fallback and fb != "none":
            judgment = as_fallback(score_case(spec, fb, group.judge, group.case_id, group.requests, comps,
                                              [group.errors.get(r.hash) for r in group.requests]), method)
            self._judged(judgment, group.transport_failed and not group.completions)
            return
        if method == "logprobs" and fb != "none" and all(c is not None for c in comps) and any(
                c is not None and missing_logprobs(r, c) for r, c in zip(group.requests, comps)):
            judge = next(j for j in self.judges if j.label == group.judge)
            for r in group.requests:
                rendered = Rendered(r.case_id, tuple(Message(m["role"], m["content"]) for m in r.messages))
                self.fallback += method_requests(judge, rendered, fb, spec.scoring.samples, purpose="fallback")
            return
        judgment = score_case(spec, method, group.judge, group.case_id, group.requests, comps,
                              [group.errors.get(r.hash) for r in group.requests])
        self._judged(judgment, group.transport_failed and not group.completions)

    def _judged(self, judgment: Judgment, transport_failed: bool) -> None:
        self.tally.add(transport_failed, judgment.reason)
        self.progress.cases_done += 1
        self.judgments.append(judgment)
        if len(self.judgments) >= JUDGMENT_BATCH:
            self._flush_judgments()

    # -- the run ---------------------------------------------------------------------------------
    async def _stream(self, feed: AsyncIterator[Request]) -> None:
        loop = asyncio.get_running_loop()

        def interrupt() -> None:
            if self.executor.stopping:
                self.executor.abandon()
                return
            in_flight = self.executor.stop_sending()
            self.say(f"stopping: {in_flight} in flight, press Ctrl-C again to abandon them")
            loop.call_later(GRACE, self.executor.abandon)

        try:
            loop.add_signal_handler(signal.SIGINT, interrupt)
            handled = True
        except (RuntimeError, ValueError, NotImplementedError):  # not the main thread: Ctrl-C stays Python's
            handled = False
        try:
            await self.executor.stream(feed, self._on_outcome)
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)

    def run(self, cases: list[Case], routes: Routes, let_go: Callable[[list[Case]], None] = lambda chunk: None) -> None:
        """Judge ``cases``, emptying the list as they are planned (so that a run holds a chunk of cases, not all of
        them, once it is under way; ``let_go`` sees each chunk once planned, in order); raise
        :class:`Interrupted` after Ctrl-C and a JudgeError on an outage."""
        async def main() -> None:
            try:
                await self._stream(self._feed(cases, let_go))
                if self.fallback and not self.executor.stopping:
                    await self._stream(self._feed_list(await self._send_fallback()))
            finally:
                await routes.close()

        try:
            asyncio.run(main())
        finally:
            self._flush_judgments()
        if self.executor.cost_stopped and self.executor.ceiling is not None:
            c = self.executor.ceiling
            raise CostCeiling(
                f"--max-cost ${c.limit:.4f} reached: this run spent ${c.total:.4f} and held back the rest "
                f"(the next request could have taken it past the ceiling); {self.progress.cases_done} of "
                f"{self.progress.cases} cases judged. What was received is stored: run again with a higher "
                "--max-cost (or --batch, at the batch price) to judge the rest; nothing answered is sent again")
        if self.executor.stopping:
            raise Interrupted(f"interrupted: {self.progress.cases_done} of {self.progress.cases} cases judged; "
                              "what was received is stored, run the same command again to go on")
        unjudged = sorted({g.case_id for groups in self.waiting.values() for g in groups})
        if unjudged:  # every request has an outcome once the stream has ended: a case still waiting is a bug
            raise RuntimeError(f"{len(unjudged)} case(s) were left without a judgment (first: {unjudged[0]!r}); "
                               "what was received is stored, and a rerun sends nothing answered again")
        self._check_outage()

    async def _send_fallback(self) -> list[Request]:
        """Register the fallback requests; return those to send (each distinct request once)."""
        spec = self.parsed.spec
        self.say(f"{len({r.case_id for r in self.fallback})} case(s) had no logprobs: scoring them with "
                 f"fallback {spec.scoring.fallback}")
        requests = list(self.fallback)
        self._register(requests, self.position, {})
        self.position += len(requests)
        groups: dict[tuple[str, str], _Group] = {}
        for r in requests:
            groups.setdefault((r.case_id, r.judge), _Group(r.case_id, r.judge, [], fallback=True)).requests.append(r)
        for group in groups.values():
            for h in {r.hash for r in group.requests}:
                self.waiting.setdefault(h, []).append(group)
        out = [r for r in unique(requests) if r.hash not in self.sent]  # identical prompts: one request for all
        self.sent.update(r.hash for r in out)
        self.progress.total += len(out)
        if self.reuse_answers and out:  # a run stopped midway received some of them already: not sent again
            stored = await self._stored(lambda store: store.ok_responses([r.hash for r in out]))
            for r in out:
                if r.hash in stored:
                    self.progress.cached += 1
                    self._resolve(r.hash, completion=completion_of(stored[r.hash], r.model))
            out = [r for r in out if r.hash not in stored]
        return out

    def _check_outage(self) -> None:
        t = self.tally
        if t.transport_failed and (t.answered == 0 or t.transport_failed > OUTAGE_SHARE * t.judged):
            kinds = ", ".join(f"{reason} x{count}" for reason, count in
                              sorted(t.failures.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
            raise JudgeError(f"the judge could not be used: {t.transport_failed} of {t.judged} cases got no answer "
                             f"after their retries ({kinds}); an outage is not a quality result. What was received "
                             "is stored; fix the judge or its credentials and run the same command again")
