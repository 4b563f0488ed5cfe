"""A run, from spec to stored judgments: the stages in order.

1. select the cases (``--split``, ``--limit``);
2. generate the evaluation steps once, if the spec asks for it and the lock
   is missing or stale;
3. run the language pre-checks of plugins;
4. plan the requests (cases x judges x samples) and look up which are
   already answered in the store: those are never sent again;
5. send the rest (:mod:`geval_spec.execute`), with a journal and a writer
   thread so nothing received is lost;
6. score every case from its stored responses (:mod:`geval_spec.scoring`)
   and store the judgments.

A run that is killed leaves its responses behind; the next ``run`` of the same
spec sends only what is still missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from . import __version__
from .clients import Completion, client_class
from .data import Case
from .errors import (GevalError, InputError, JudgeError, MissingLogprobs, Problem)
from .execute import Outcome, Progress, Route, Settings, completion_of, run_requests, unique
from .load import ParsedSpec, load_spec
from .model import GenerateSteps, Judge
from .plan import Plan, Request, make_request, method_requests, prepare_requests
from .precheck import precheck
from .render import Message, Rendered
from .scoring import Judgment, judge_pairwise, judge_scores, judge_verdicts, parse_verdicts
from .splits import assign_splits
from .store import ResponseWriter, RunInfo, Store, new_run_id


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
class DryRun:
    cases: int
    requests: int
    to_send: int
    cached: int
    input_tokens: int
    output_tokens_max: int
    output_tokens_typical: int | None
    cost_estimate: float | None
    cost_max: float | None
    unpriced_models: tuple[str, ...]
    static_prefix_share: float
    exact_tokens: bool


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


# -- cases -------------------------------------------------------------------------
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


# -- clients -----------------------------------------------------------------------
class Routes:
    """One client per judge (or one replay client for all), created lazily."""

    def __init__(self, judges: Sequence[Judge], options: RunOptions):
        self.options = options
        self.by_label: dict[str, Route] = {}
        self.clients: list[Any] = []
        replay = None
        if options.replay is not None:
            from .clients.replay import ReplayClient

            replay = ReplayClient(options.replay)
            self.clients.append(replay)
        for judge in judges:
            backoff = options.backoff if options.backoff is not None else 0.5
            if replay is not None:
                client = replay
            else:
                try:
                    cls = client_class(judge.client)
                except KeyError:
                    raise InputError(problems=[Problem(f"unknown judge client {judge.client!r}")]) from None
                client = cls(judge.api_base, options.concurrency)
                self.clients.append(client)
            self.by_label[judge.label] = Route(client=client, timeout=judge.timeout, max_retries=judge.max_retries,
                                               backoff=backoff)

    def __call__(self, request: Request) -> Route:
        return self.by_label[request.judge]


# -- steps ---------------------------------------------------------------------------
STEPS_SYSTEM = ("You design evaluation procedures for an expert judge. Write the steps a careful evaluator follows "
                "to judge one criterion, each step one imperative sentence, in the language of the task.")


def steps_request(parsed: ParsedSpec, judge: Judge, nonce: int) -> Request:
    spec = parsed.spec
    count = spec.steps.count if isinstance(spec.steps, GenerateSteps) else 5
    user = (f"Task: {spec.task}\n\nCriterion: {spec.criterion.name}\n{spec.criterion.description}\n\n"
            f"Write exactly {count} evaluation steps. Answer with one JSON object and nothing else: "
            '{"steps": ["<step 1>", "<step 2>", ...]}')
    rendered = Rendered(case_id="(steps)", messages=(Message("system", STEPS_SYSTEM), Message("user", user)))
    steps_judge = judge.model_copy(update={"top_logprobs": None})
    return make_request(steps_judge, rendered, logprobs=False, sample=nonce, purpose="steps")


def parse_steps(text: str | None) -> list[str] | str:
    from .scoring import extract_json

    obj, reason = extract_json(text, "steps")
    if obj is None:
        return reason or "no steps"
    steps = obj.get("steps")
    if not isinstance(steps, list) or len(steps) < 2 or not all(isinstance(s, str) and s.strip() for s in steps):
        return "'steps' must be a list of at least two sentences"
    return [" ".join(s.split()) for s in steps]


def needs_steps(parsed: ParsedSpec, regenerate: bool) -> bool:
    if not isinstance(parsed.spec.steps, GenerateSteps):
        return False
    return parsed.steps_pending or regenerate or parsed.steps_stale


# -- scoring -------------------------------------------------------------------------
def score_case(parsed: ParsedSpec, method: str, judge: Judge, case_id: str, requests: Sequence[Request],
               completions: Sequence[Completion | None], errors: Sequence[str | None]) -> Judgment:
    spec = parsed.spec
    if spec.pairwise is not None:
        shown = [ch for r, c in zip(requests, completions) if c is not None and r.purpose != "swap" for ch in c.choices]
        swapped = [ch for r, c in zip(requests, completions) if c is not None and r.purpose == "swap"
                   for ch in c.choices]
        failed = [e for c, e in zip(completions, errors) if c is None]
        if not shown and not swapped:
            return Judgment.invalid(case_id, judge.label, method, f"request failed: {failed[0] if failed else '?'}")
        has_swap = any(r.purpose == "swap" for r in requests)
        return judge_pairwise(case_id, judge.label, method, shown, swapped if has_swap else None)
    for c, err in zip(completions, errors):
        if c is None:
            return Judgment.invalid(case_id, judge.label, method, f"request failed: {err or 'no response'}")
    choices = [ch for c in completions for ch in c.choices]  # type: ignore[union-attr]
    if method == "verdicts":
        verdicts, reason = parse_verdicts(choices[0].text)
        return judge_verdicts(case_id, judge.label, verdicts, reason, spec.aggregation)
    scores = list(range(spec.rubric.scale.min, spec.rubric.scale.max + 1))
    return judge_scores(scores, method, case_id, judge.label, choices)


def missing_logprobs(request: Request, completion: Completion) -> bool:
    return bool(request.body.get("logprobs")) and request.purpose != "steps" and any(
        ch.logprobs is None for ch in completion.choices)


# -- the run -------------------------------------------------------------------------------
def execute_run(parsed: ParsedSpec, options: RunOptions,
                on_progress: Callable[[Progress], None] | None = None,
                on_event: Callable[[str], None] | None = None) -> RunResult | DryRun:
    """Run ``parsed`` with ``options``; return the dry-run plan or the run's result."""
    say = on_event or (lambda text: None)
    judges = panel_for(parsed, options.model)
    dataset = parsed.load_data()
    cases = select_cases(parsed, dataset.cases, options.split, options.limit)
    steps_generated = False

    store = None
    if not options.dry_run or options.db.exists():
        store = Store(options.db)
        if store.recovered:
            say(f"recovered {store.recovered} response(s) from an interrupted run")
    try:
        if needs_steps(parsed, options.regenerate_steps):
            if options.dry_run:
                raise InputError(problems=[parsed.key_problem(
                    ("steps",), "the steps are not generated yet; a dry run sends nothing",
                )])
            parsed = generate_steps(parsed, judges[0], options, store, say)  # type: ignore[arg-type]
            steps_generated = True
        findings = precheck(parsed, cases)
        plan = prepare_requests(parsed, cases, judges=judges, findings=findings)
        requests = list(plan.requests)
        answered = store.answered(r.hash for r in requests) if store is not None else set()
        pending = [r for r in unique(requests) if r.hash not in answered]
        if options.dry_run:
            return dry_run(parsed, plan, requests, pending, judges, store)
        assert store is not None
        run_id = new_run_id()
        info = RunInfo(run_id=run_id, kind="run", spec_name=parsed.name, spec_version=parsed.spec.version,
                       spec_ref=options.ref or parsed.name, spec_file=parsed.source.display,
                       judging_fp=parsed.judging_fp, analysis_fp=parsed.analysis_fp,
                       spec_json=parsed.resolved(), judges=[j.model_dump(mode="json") for j in judges],
                       method=parsed.spec.scoring.method, data_path=str(parsed.data_path),
                       data_sha256=dataset.sha256, tool_version=__version__,
                       git_commit=_git_commit(parsed), options=_options_json(options, len(cases)))
        store.create_run(info, cases, requests)
        store.save_findings(run_id, findings)
        progress = Progress()
        method, fallback = parsed.spec.scoring.method, parsed.spec.scoring.fallback

        def check(request: Request, completion: Completion):
            if method == "logprobs" and fallback == "none" and missing_logprobs(request, completion):
                return MissingLogprobs(
                    f"judge {request.judge!r} (model {request.body['model']}) returned no logprobs; "
                    "scoring.method logprobs needs them. Set scoring.fallback to samples or direct to score "
                    "without them (the method used is recorded per judgment), or use a model that returns logprobs")
            return None

        outcomes: dict[str, Outcome] = {}

        def send(reqs: Sequence[Request]) -> None:
            todo = unique(reqs)
            done = store.answered(r.hash for r in todo)
            waiting = [r for r in todo if r.hash not in done]
            progress.total += len(todo)
            progress.cached += len(todo) - len(waiting)
            if on_progress:
                on_progress(progress)
            if not waiting:
                return
            routes = Routes(judges, options)
            settings = Settings(concurrency=options.concurrency,
                                retry_budget=options.retry_budget if options.retry_budget is not None
                                else max(20, len(waiting)))
            writer = ResponseWriter(store)
            journal = store.journal(run_id)
            try:
                outcomes.update(run_requests(routes, routes.clients, waiting, run_id=run_id, journal=journal,
                                             writer=writer, settings=settings, progress=progress,
                                             on_progress=on_progress, check=check))
            finally:
                writer.close()  # raises if responses could not be committed: the journal then stays
                journal.discard()

        status, error = "failed", None
        try:
            send(requests)
            judgments, fallback_requests = build_judgments(parsed, plan, judges, store, outcomes)
            if fallback_requests:
                say(f"{len({r.case_id for r in fallback_requests})} case(s) had no logprobs: scoring them with "
                    f"fallback {fallback}")
                store.add_requests(run_id, fallback_requests, start=len(requests))
                send(fallback_requests)
                judgments = apply_fallback(parsed, judges, judgments, fallback_requests, store, outcomes)
            store.save_judgments(run_id, judgments)
            status = "completed"
        except BaseException as exc:
            error = str(exc) if isinstance(exc, GevalError) else f"{type(exc).__name__}: {exc}"
            raise
        finally:
            store.finish_run(run_id, status, error)
        usage = store.usage(run_id)
        valid = sum(1 for j in judgments if j.valid)
        reasons: dict[str, int] = {}
        for j in judgments:
            if not j.valid:
                key = (j.reason or "invalid").split(" (after")[0]
                reasons[key] = reasons.get(key, 0) + 1
        return RunResult(
            run_id=run_id, spec=parsed.name, cases=len(cases), valid=valid, invalid=len(judgments) - valid,
            requests=progress.total, sent=progress.done + progress.failed, cached=progress.cached,
            failed=progress.failed, retries=progress.retries, prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            cost=(usage["cost"] or 0.0) if usage["priced"] == usage["received"] else None,
            methods=tuple(sorted({j.method for j in judgments})), steps_generated=steps_generated,
            invalid_reasons=tuple(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))))
    finally:
        if store is not None:
            store.close()


def answers(requests: Sequence[Request], store: Store, outcomes: dict[str, Outcome]) -> dict[str, Completion]:
    """Completions per request hash: received in this run (in memory), else from the store."""
    out = {h: o.completion for h, o in outcomes.items() if o.completion is not None}
    rest = {r.hash: r for r in requests if r.hash not in out}
    for h, row in store.ok_responses(rest).items():
        out[h] = completion_of(row, rest[h].body["model"])
    return out


def build_judgments(parsed: ParsedSpec, plan: Plan, judges: Sequence[Judge], store: Store,
                    outcomes: dict[str, Outcome]) -> tuple[list[Judgment], list[Request]]:
    """Score every case and judge from stored responses; list the fallback requests needed."""
    method = parsed.spec.scoring.method
    by_case: dict[tuple[str, str], list[Request]] = {}
    for r in plan.requests:
        by_case.setdefault((r.case_id, r.judge), []).append(r)
    completions = answers(plan.requests, store, outcomes)
    errors = store.last_errors(r.hash for r in plan.requests if r.hash not in completions)
    judgments: list[Judgment] = []
    fallback: list[Request] = []
    fb = parsed.spec.scoring.fallback
    for case_id in plan.rendered:
        for judge in judges:
            reqs = by_case.get((case_id, judge.label), [])
            comps, errs = [], []
            for r in reqs:
                comps.append(completions.get(r.hash))
                out = outcomes.get(r.hash)
                errs.append(out.error if out and out.error else errors.get(r.hash))
            if method == "logprobs" and fb != "none" and all(c is not None for c in comps) and any(
                    missing_logprobs(r, c) for r, c in zip(reqs, comps)):
                for prompt in plan.rendered[case_id]:
                    fallback += method_requests(judge, prompt, fb, parsed.spec.scoring.samples, purpose="fallback")
                judgments.append(Judgment.invalid(case_id, judge.label, method, "no logprobs (fallback pending)"))
                continue
            judgments.append(score_case(parsed, method, judge, case_id, reqs, comps, errs))
    return judgments, fallback


def apply_fallback(parsed: ParsedSpec, judges: Sequence[Judge], judgments: list[Judgment],
                   requests: list[Request], store: Store, outcomes: dict[str, Outcome]) -> list[Judgment]:
    fb = parsed.spec.scoring.fallback
    completions = answers(requests, store, outcomes)
    by_case: dict[tuple[str, str], list[Request]] = {}
    for r in requests:
        by_case.setdefault((r.case_id, r.judge), []).append(r)
    label_to_judge = {j.label: j for j in judges}
    out = []
    for j in judgments:
        reqs = by_case.get((j.case_id, j.judge))
        if not reqs:
            out.append(j)
            continue
        comps = [completions.get(r.hash) for r in reqs]
        errs = [outcomes[r.hash].error if r.hash in outcomes else None for r in reqs]
        new = score_case(parsed, fb, label_to_judge[j.judge], j.case_id, reqs, comps, errs)
        out.append(replace(new, details={**dict(new.details), "fallback_from": "logprobs"}))
    return out


def generate_steps(parsed: ParsedSpec, judge: Judge, options: RunOptions, store: Store, say) -> ParsedSpec:
    """Ask the judge for the evaluation steps once; freeze them in the lock file."""
    from .lock import write_lock

    if parsed.source.rev is not None:
        raise InputError(problems=[parsed.key_problem(
            ("steps",), f"the steps of {parsed.source.display} are not generated; generate them in the working copy "
                        "and commit the lock file")])
    nonce = 0
    if options.regenerate_steps and parsed.lock is not None:
        import time

        nonce = int(time.time())
    request = steps_request(parsed, judge, nonce)
    run_id = new_run_id()
    stored = store.ok_responses([request.hash]).get(request.hash)
    if stored is None:
        say(f"generating evaluation steps with {judge.model}")
        writer = ResponseWriter(store)
        journal = store.journal(run_id)
        routes = Routes([judge], options)
        try:
            outcomes = run_requests(routes, routes.clients, [request], run_id=run_id, journal=journal,
                                    writer=writer, settings=Settings(concurrency=1, retry_budget=10),
                                    progress=Progress(total=1))
        finally:
            writer.close()
            journal.discard()
        outcome = outcomes[request.hash]
        if outcome.completion is None:
            raise JudgeError(f"could not generate the evaluation steps: {outcome.error}")
        text = outcome.completion.choices[0].text
    else:
        text = completion_of(stored, request.body["model"]).choices[0].text
    steps = parse_steps(text)
    if isinstance(steps, str):
        raise JudgeError(f"the judge's evaluation steps are unusable ({steps}); its answer is stored. "
                         f"Retry with: geval-spec run {parsed.name} --regenerate-steps")
    write_lock(parsed.lock_path, parsed.spec, judge.model, steps)
    say(f"wrote {len(steps)} evaluation steps to {parsed.lock_path.name} (commit it)")
    return load_spec(parsed.source)


def dry_run(parsed: ParsedSpec, plan: Plan, requests: Sequence[Request], pending: Sequence[Request],
            judges: Sequence[Judge], store: Store | None) -> DryRun:
    from . import costs, tokens
    from .render import prefix_share, serialise

    input_tokens = 0
    output_max = 0
    cost_est = 0.0
    cost_max = 0.0
    unpriced: set[str] = set()
    typical = _typical_output(store, parsed) if store is not None else None
    prefix = plan.renderer.static_prefix()
    share_num = share_den = 0
    token_cache: dict[str, int] = {}
    for r in pending:
        text = serialise(tuple(Message(m["role"], m["content"]) for m in r.messages))
        n_in = token_cache.get(text)
        if n_in is None:
            n_in = tokens.count(text)
            token_cache[text] = n_in
        out_max = r.body["max_tokens"] * r.n
        input_tokens += n_in
        output_max += out_max
        price = costs.price(r.body["model"])
        if price is None:
            unpriced.add(r.body["model"])
            continue
        cost_max += n_in * price[0] + out_max * price[1]
        cost_est += n_in * price[0] + (min(typical * r.n, out_max) if typical else out_max) * price[1]
    first = next(iter(plan.rendered.values()))[0] if plan.rendered else None
    if first is not None:
        share_num, share_den = prefix_share(prefix, first.messages)
    return DryRun(cases=len(plan.rendered), requests=len(unique(requests)), to_send=len(pending),
                  cached=len(unique(requests)) - len(pending), input_tokens=input_tokens,
                  output_tokens_max=output_max,
                  output_tokens_typical=None if typical is None else int(typical * sum(r.n for r in pending)),
                  cost_estimate=None if unpriced and len(unpriced) == len({r.body['model'] for r in pending}) else
                  cost_est, cost_max=None if unpriced else cost_max, unpriced_models=tuple(sorted(unpriced)),
                  static_prefix_share=share_num / share_den if share_den else 0.0, exact_tokens=tokens.exact())


def _typical_output(store: Store, parsed: ParsedSpec) -> float | None:
    """Mean completion tokens per choice in earlier runs of this judging fingerprint."""
    runs = store.find_runs(judging_fp=parsed.judging_fp, kind="run")
    if not runs:
        return None
    row = store.con.execute(
        "SELECT avg(r.completion_tokens / greatest(q.n, 1)) FROM responses r JOIN requests q "
        "ON q.request_hash = r.request_hash WHERE r.ok AND r.run_id IN (SELECT unnest(?))",
        [[r.run_id for r in runs[:5]]]).fetchone()
    return None if row is None or row[0] is None or math.isnan(row[0]) else float(row[0])


def _git_commit(parsed: ParsedSpec) -> str | None:
    if parsed.source.rev:
        return parsed.source.rev
    from .registry import git

    out = git(parsed.source.root, "rev-parse", "HEAD")
    return out.strip() if out else None


def _options_json(options: RunOptions, n_cases: int) -> dict[str, Any]:
    return {"model": options.model, "split": options.split, "limit": options.limit, "cases": n_cases,
            "concurrency": options.concurrency, "replay": str(options.replay) if options.replay else None}
