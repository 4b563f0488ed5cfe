"""A run, from spec to stored judgments: the stages in order.

1. select the cases (``--split``, ``--limit``) and the judges (``--model``);
2. generate the evaluation steps once, if the spec asks for it and the lock
   is missing or stale (:mod:`geval_spec.runner.steps`);
3. run the language pre-checks of plugins;
4. plan the requests (cases x judges x samples) and look up which are
   already answered in the store: those are never sent again;
5. send the rest (:mod:`geval_spec.runner.execute`), with a journal and a
   writer thread so nothing received is lost;
6. score every case from its responses (:func:`geval_spec.judge.scoring.score_case`)
   and store the judgments.

A run that is killed leaves its responses behind; the next ``run`` of the same
spec sends only what is still missing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from geval_spec import __version__
from geval_spec.dataset.cases import Case, read_cases
from geval_spec.dataset.splits import assign_splits
from geval_spec.errors import GevalError, InputError, MissingLogprobs, Problem
from geval_spec.judge.clients.base import completion_of
from geval_spec.judge.precheck import precheck
from geval_spec.judge.requests import Plan, method_requests, prepare_requests, unique
from geval_spec.judge.scoring import as_fallback, missing_logprobs, score_case
from geval_spec.judge.types import Completion, Judgment, Request
from geval_spec.runner.estimate import DryRun, estimate
from geval_spec.runner.execute import Check, Outcome, Progress, Routes, Settings, run_requests
from geval_spec.runner.steps import generate_steps, needs_steps
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import Judge, Spec
from geval_spec.store.db import ResponseWriter, Store
from geval_spec.store.records import RunInfo, RunJudge, RunSettings, RunStatus, new_run_id

Say = Callable[[str], None]
OnProgress = Callable[[Progress], None]


@dataclass(frozen=True)
class RunOptions:
    db: Path
    model: str | None = None
    split: str | None = None
    limit: int | None = None
    concurrency: int = 8
    replay: Path | None = None
    dry_run: bool = False
    regenerate_steps: bool = False
    retry_budget: int | None = None
    backoff: float | None = None  # overrides every judge's backoff base (seconds)
    ref: str = ""


@dataclass(frozen=True)
class RunResult:
    run_id: str
    spec: str
    cases: int
    valid: int
    invalid: int
    requests: int
    sent: int
    cached: int
    failed: int
    retries: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    methods: tuple[str, ...]
    steps_generated: bool = False
    invalid_reasons: tuple[tuple[str, int], ...] = ()


def select_cases(parsed: ParsedSpec, cases: Sequence[Case], split: str | None, limit: int | None) -> list[Case]:
    chosen = list(cases)
    if split is not None and split != "all":
        if parsed.spec.split is None:
            raise InputError(problems=[Problem(f"--split {split}: spec {parsed.name} defines no splits")])
        splits = assign_splits(parsed.spec, tuple(cases))
        chosen = [c for c in chosen if splits[c.id] == split]
        if not chosen:
            raise InputError(problems=[Problem(f"--split {split}: no cases in that split")])
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


def panel_for(parsed: ParsedSpec, model: str | None) -> tuple[Judge, ...]:
    panel = parsed.spec.panel
    if model is None:
        return panel
    if len(panel) > 1:
        raise InputError(problems=[Problem("--model replaces the judge of a one-judge spec; this spec has a panel",
                                           hint="edit judges: in the spec instead")])
    return (panel[0].model_copy(update={"model": model, "name": None}),)


def logprobs_check(spec: Spec) -> Check | None:
    """Stop the run at the first response without logprobs when the spec has no fallback for it."""
    if spec.scoring.method != "logprobs" or spec.scoring.fallback != "none":
        return None

    def check(request: Request, completion: Completion) -> GevalError | None:
        if missing_logprobs(request, completion):
            return MissingLogprobs(
                f"judge {request.judge!r} (model {request.model}) returned no logprobs; "
                "scoring.method logprobs needs them. Set scoring.fallback to samples or direct to score "
                "without them (the method used is recorded per judgment), or use a model that returns logprobs")
        return None

    return check


class Sender:
    """Sends a run's requests that the store has no answer for, and keeps what came back."""

    def __init__(self, store: Store, run_id: str, judges: Sequence[Judge], options: RunOptions,
                 check: Check | None, on_progress: OnProgress | None) -> None:
        self.store = store
        self.run_id = run_id
        self.judges = judges
        self.options = options
        self.check = check
        self.on_progress = on_progress
        self.progress = Progress()
        self.outcomes: dict[str, Outcome] = {}

    def send(self, requests: Sequence[Request]) -> None:
        todo = unique(requests)
        done = self.store.answered(r.hash for r in todo)
        waiting = [r for r in todo if r.hash not in done]
        self.progress.total += len(todo)
        self.progress.cached += len(todo) - len(waiting)
        if self.on_progress:
            self.on_progress(self.progress)
        if not waiting:
            return
        routes = Routes(self.judges, self.options.concurrency, self.options.replay, self.options.backoff)
        budget = self.options.retry_budget if self.options.retry_budget is not None else max(20, len(waiting))
        writer = ResponseWriter(self.store)
        journal = self.store.journal(self.run_id)
        try:
            self.outcomes.update(run_requests(
                routes, waiting, run_id=self.run_id, journal=journal, writer=writer,
                settings=Settings(concurrency=self.options.concurrency, retry_budget=budget),
                progress=self.progress, on_progress=self.on_progress, check=self.check))
        finally:
            writer.close()  # raises if responses could not be committed: the journal then stays
            journal.discard()

    def completions(self, requests: Sequence[Request]) -> dict[str, Completion]:
        """Completions per request hash: received in this run (in memory), else from the store."""
        out = {h: o.completion for h, o in self.outcomes.items() if o.completion is not None}
        rest = {r.hash: r for r in requests if r.hash not in out}
        for h, recorded in self.store.ok_responses(rest).items():
            out[h] = completion_of(recorded, rest[h].model)
        return out

    def errors(self, requests: Sequence[Request], answered: set[str]) -> dict[str, str]:
        """Why each unanswered request failed: in this run, else the last stored failure."""
        stored = self.store.last_errors(r.hash for r in requests if r.hash not in answered)
        out = dict(stored)
        for h, o in self.outcomes.items():
            if o.error:
                out[h] = o.error
        return out


def _by_case(requests: Sequence[Request]) -> dict[tuple[str, str], list[Request]]:
    by_case: dict[tuple[str, str], list[Request]] = {}
    for r in requests:
        by_case.setdefault((r.case_id, r.judge), []).append(r)
    return by_case


def build_judgments(parsed: ParsedSpec, plan: Plan, judges: Sequence[Judge],
                    sender: Sender) -> tuple[list[Judgment], list[Request]]:
    """Score every case and judge; list the fallback requests needed for cases without logprobs."""
    spec = parsed.spec
    method, fb = spec.scoring.method, spec.scoring.fallback
    by_case = _by_case(plan.requests)
    completions = sender.completions(plan.requests)
    errors = sender.errors(plan.requests, set(completions))
    judgments: list[Judgment] = []
    fallback: list[Request] = []
    for case_id in plan.rendered:
        for judge in judges:
            reqs = by_case.get((case_id, judge.label), [])
            comps = [completions.get(r.hash) for r in reqs]
            if method == "logprobs" and fb != "none" and any(
                    c is not None and missing_logprobs(r, c) for r, c in zip(reqs, comps)) \
                    and all(c is not None for c in comps):
                for prompt in plan.rendered[case_id]:
                    fallback += method_requests(judge, prompt, fb, spec.scoring.samples, purpose="fallback")
                judgments.append(Judgment.invalid(case_id, judge.label, method, "no logprobs (fallback pending)"))
                continue
            judgments.append(score_case(spec, method, judge.label, case_id, reqs, comps,
                                        [errors.get(r.hash) for r in reqs]))
    return judgments, fallback


def apply_fallback(parsed: ParsedSpec, judgments: list[Judgment], requests: list[Request],
                   sender: Sender) -> list[Judgment]:
    """Replace the pending judgments by the fallback method's, marked with the method they replace."""
    spec = parsed.spec
    fb = spec.scoring.fallback
    if fb == "none":
        return judgments
    completions = sender.completions(requests)
    errors = sender.errors(requests, set(completions))
    by_case = _by_case(requests)
    out = []
    for j in judgments:
        reqs = by_case.get((j.case_id, j.judge))
        if not reqs:
            out.append(j)
            continue
        new = score_case(spec, fb, j.judge, j.case_id, reqs, [completions.get(r.hash) for r in reqs],
                         [errors.get(r.hash) for r in reqs])
        out.append(as_fallback(new, spec.scoring.method))
    return out


def execute_run(parsed: ParsedSpec, options: RunOptions, on_progress: OnProgress | None = None,
                on_event: Say | None = None) -> RunResult | DryRun:
    """Run ``parsed`` with ``options``; return the dry-run plan or the run's result."""
    say: Say = on_event or (lambda text: None)
    judges = panel_for(parsed, options.model)
    dataset = read_cases(parsed)
    cases = select_cases(parsed, dataset.cases, options.split, options.limit)
    if options.dry_run:
        if needs_steps(parsed, options.regenerate_steps):
            raise InputError(problems=[parsed.key_problem(
                ("steps",), "the steps are not generated yet; a dry run sends nothing")])
        plan = prepare_requests(parsed, cases, judges=judges)
        if not options.db.exists():
            return estimate(plan, unique(plan.requests), None)
        with Store(options.db) as store:
            answered = store.answered(r.hash for r in plan.requests)
            pending = [r for r in unique(plan.requests) if r.hash not in answered]
            return estimate(plan, pending, store.typical_output_tokens(parsed.judging_fp))
    with Store(options.db) as store:
        if store.recovered:
            say(f"recovered {store.recovered} response(s) from an interrupted run")
        steps_generated = needs_steps(parsed, options.regenerate_steps)
        if steps_generated:
            routes = Routes(judges[:1], 1, options.replay, options.backoff)
            parsed = generate_steps(parsed, judges[0], store, routes, options.regenerate_steps, say)
        result = _judge(parsed, store, dataset.sha256, cases, judges, options, on_progress, say)
        return replace(result, steps_generated=steps_generated)


def _judge(parsed: ParsedSpec, store: Store, data_sha256: str, cases: list[Case], judges: tuple[Judge, ...],
           options: RunOptions, on_progress: OnProgress | None, say: Say) -> RunResult:
    """Plan, send, score and store: the run proper, once the steps exist."""
    findings = precheck(parsed, cases)
    plan = prepare_requests(parsed, cases, judges=judges, findings=findings)
    run_id = new_run_id()
    info = RunInfo(run_id=run_id, kind="run", spec_name=parsed.name, spec_version=parsed.spec.version,
                   spec_ref=options.ref or parsed.name, spec_file=parsed.source.display,
                   judging_fp=parsed.judging_fp, analysis_fp=parsed.analysis_fp, resolved=parsed.resolved(),
                   judges=tuple(RunJudge.of(j) for j in judges), method=parsed.spec.scoring.method,
                   data_path=str(parsed.data_path), data_sha256=data_sha256, tool_version=__version__,
                   git_commit=parsed.source.commit(),
                   settings=RunSettings(cases=len(cases), model=options.model, split=options.split,
                                        limit=options.limit, concurrency=options.concurrency,
                                        replay=str(options.replay) if options.replay else None))
    store.create_run(info, cases, plan.requests)
    store.save_findings(run_id, findings)
    sender = Sender(store, run_id, judges, options, logprobs_check(parsed.spec), on_progress)
    status: RunStatus = "failed"
    error = None
    try:
        sender.send(plan.requests)
        judgments, fallback_requests = build_judgments(parsed, plan, judges, sender)
        if fallback_requests:
            say(f"{len({r.case_id for r in fallback_requests})} case(s) had no logprobs: scoring them with "
                f"fallback {parsed.spec.scoring.fallback}")
            store.add_requests(run_id, fallback_requests, start=len(plan.requests))
            sender.send(fallback_requests)
            judgments = apply_fallback(parsed, judgments, fallback_requests, sender)
        store.save_judgments(run_id, judgments)
        status = "completed"
    except BaseException as exc:
        error = str(exc) if isinstance(exc, GevalError) else f"{type(exc).__name__}: {exc}"
        raise
    finally:
        store.finish_run(run_id, status, error)
    return _result(run_id, parsed.name, len(cases), judgments, sender.progress, store)


def _result(run_id: str, name: str, n_cases: int, judgments: list[Judgment], progress: Progress,
            store: Store) -> RunResult:
    usage = store.usage(run_id)
    valid = sum(1 for j in judgments if j.valid)
    reasons: dict[str, int] = {}
    for j in judgments:
        if not j.valid:
            key = (j.reason or "invalid").split(" (after")[0]
            reasons[key] = reasons.get(key, 0) + 1
    return RunResult(
        run_id=run_id, spec=name, cases=n_cases, valid=valid, invalid=len(judgments) - valid,
        requests=progress.total, sent=progress.done + progress.failed, cached=progress.cached,
        failed=progress.failed, retries=progress.retries, prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens, cost=usage.cost,
        methods=tuple(sorted({j.method for j in judgments})),
        invalid_reasons=tuple(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))))
