"""A run, from spec to stored judgments: the stages in order.

1. select the cases (``--split``, ``--limit``) and the judges (``--model``);
2. generate the evaluation steps once, if the spec asks for it and the lock
   is missing or stale (:mod:`geval_spec.runner.steps`);
3. reuse: a case whose *case key* (below) has a stored judgment gets a copy
   of it, made inside the store: an unchanged rerun sends, renders and
   parses nothing;
4. stream the other cases (:mod:`geval_spec.runner.engine`): pre-checks,
   prompts and requests in chunks; answered requests are never sent again;
   the rest are sent with a journal, and each case is scored as its answers
   arrive (:func:`geval_spec.judge.scoring.score_case`);
5. store everything through the store's gate thread, in short sessions.

A run that is killed leaves its responses behind; the next ``run`` of the same
spec sends only what is still missing. The first Ctrl-C stops sending and
keeps what arrives; the second abandons what is in flight (exit 130).

A case key is the SHA-256 of the judging fingerprint, the judges' labels and
models, the versions of the loaded language plugins, the judgment code's
version (:data:`JUDGMENT_VERSION`), and the case's id and fields: everything
its judgment depends on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from geval_spec import __version__
from geval_spec.dataset.cases import Case, Dataset, FieldsJson, read_cases, with_texts, without_texts
from geval_spec.dataset.splits import assign_splits
from geval_spec.errors import CostCeiling, GevalError, InputError, MissingLogprobs, Problem
from geval_spec.judge import costs
from geval_spec.judge.clients import client_name, warm_up
from geval_spec.judge.models import model_problems
from geval_spec.judge.requests import prepare_requests, unique
from geval_spec.judge.scoring import missing_logprobs
from geval_spec.judge.types import Completion, Request
from geval_spec.plugins import load_plugins
from geval_spec.redact import redact
from geval_spec.runner.engine import Engine, Interrupted
from geval_spec.runner.estimate import DryRun, estimate
from geval_spec.runner.execute import Check, LimitOverride, Progress, Routes, Settings
from geval_spec.runner.steps import generate_steps, needs_steps
from geval_spec.spec.load import ParsedSpec
from geval_spec.spec.sections import Judge, Spec
from geval_spec.store.db import Store
from geval_spec.store.gate import StoreGate, store_settings
from geval_spec.store.journal import Journal, journal_dir
from geval_spec.store.records import RunInfo, RunJudge, RunSettings, RunStatus
from geval_spec.values import frozen

if TYPE_CHECKING:  # the batch route is imported when a run asks for it
    from geval_spec.runner.batch import BatchErrors

JUDGMENT_VERSION = "2"  # bump when the same responses would give other judgments (scoring changed)

Say = Callable[[str], None]
OnProgress = Callable[[Progress], None]


@frozen
class RunOptions:
    """The options of one run, as the command line gives them."""

    db: Path
    model: str | None = None
    split: str | None = None
    limit: int | None = None
    concurrency: int = 8
    replay: Path | None = None
    dry_run: bool = False
    batch: bool = False  # through the provider's batch API (runner/batch.py)
    batch_errors: BatchErrors = "online"  # requests that fail in their batch: retried online, or left failed
    regenerate_steps: bool = False
    retry_budget: int | None = None
    backoff: float | None = None  # overrides every judge's backoff base (seconds)
    ref: str = ""
    shard: tuple[int, int] | None = None  # (K, N): only the cases of shard K of N
    rpm: int | None = None  # over every judge's judge.limits
    tpm: int | None = None
    max_cost: float | None = None  # USD this run may spend


@frozen
class RunResult:
    """What a run did: its id, cases, valid and invalid judgments, requests and cost."""

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
    reused: int = 0  # cases whose judgment was copied from an earlier run
    batch: int = 0  # answers that came through a batch API (costed at the batch price)
    cached_tokens: int = 0
    db: str = ""
    reasoning_tokens: int = 0
    cache_saved: float | None = None  # USD the provider's prompt cache saved (None: no price known)
    unchanged: bool = False  # the run was finished before: nothing was judged or stored now
    dataset: Dataset | None = field(default=None, repr=False, compare=False)  # as read, for the gate, without
    # texts (the gate reads none; a JSON Lines file's are on disk: looking at them opened the file once a case)


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


def in_shard(case_id: str, shard: tuple[int, int]) -> bool:
    """Shard K of N holds the cases whose id hashes to K - 1 modulo N (the same on every machine)."""
    k, n = shard
    return int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:16], 16) % n == k - 1


def run_id_for(spec: tuple[str, int], judging_fp: str, analysis_fp: str, data_sha256: str,
               judges: Sequence[tuple[str, str | None]], case_ids: Sequence[str]) -> str:
    """A run's id, from what it judges: the same spec (name, version, fingerprints), data, judges (label, model)
    and cases give the same run; two specs that ask the same questions still have runs of their own.

    So a rerun of an unchanged spec is the run that is already stored, a run stopped midway is continued
    under its own id, and shards merged together are the run made in one go.
    """
    material = json.dumps([list(spec), judging_fp, analysis_fp, data_sha256, JUDGMENT_VERSION, [list(j) for j in judges],
                           list(case_ids)])
    return "run_" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:20]


def panel_for(parsed: ParsedSpec, model: str | None) -> tuple[Judge, ...]:
    """The spec's judges; ``--model`` replaces a one-judge spec's model or supplies a judge-less spec's judge.

    A supplied judge has the defaults of the judge keys, with what the scoring method needs: 20 top
    logprobs for ``logprobs``, temperature 1 for ``samples``.
    """
    panel = parsed.spec.panel
    if model is None:
        if not panel:
            raise InputError(problems=[parsed.key_problem(
                (), "this spec names no judge: give --model (a litellm model string, e.g. openai/gpt-4.1-mini)"
            ).with_hint("or add judge: {model: ...} to the spec")])
        return panel
    if len(panel) > 1:
        raise InputError(problems=[Problem("--model replaces the judge of a one-judge spec; this spec has a panel",
                                           hint="edit judges: in the spec instead")])
    if not panel:
        scoring = parsed.spec.scoring
        uses = {scoring.method, scoring.fallback}
        return (Judge(model=model, top_logprobs=20 if "logprobs" in uses else None,
                      temperature=1.0 if "samples" in uses else 0.0),)
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


def _session(db: Path) -> Store:
    """A store session of the run, under the same DuckDB memory limit as the gate's (GEVAL_STORE_MEMORY)."""
    return Store(db, memory_limit=store_settings()[1])


def case_keys(parsed: ParsedSpec, cases: Sequence[Case], judges: Sequence[Judge]) -> dict[str, str]:
    """Case id -> the key of everything its judgment depends on (see the module docstring)."""
    keys = CaseKeys(parsed, judges)
    for case in cases:
        keys.add(case)
    return keys.keys


class CaseKeys:
    """:func:`case_keys`, a case at a time (a run keys each case as its data is read, while its texts are at hand:
    they stay in the file afterwards, :class:`~geval_spec.dataset.cases.OnDisk`)."""

    def __init__(self, parsed: ParsedSpec, judges: Sequence[Judge]) -> None:
        plugins = ""
        if parsed.spec.language is not None:  # the checkers' findings are part of the judgment: so are their versions
            registry = load_plugins()
            plugins = ",".join(f"{name}={registry.versions.get(name, '')}" for name in sorted(registry.loaded))
        base = json.dumps([parsed.judging_fp, JUDGMENT_VERSION, [(j.label, j.model) for j in judges], plugins])
        self._base = hashlib.sha256((base + "\x00").encode("utf-8"))  # (base is ASCII: json.dumps escapes the rest)
        self._json = FieldsJson()
        self.keys: dict[str, str] = {}

    def add(self, case: Case) -> None:
        """Key ``case``: sha256 of the base, the case's id and its fields' JSON, NUL between them."""
        h = self._base.copy()
        h.update((case.id + "\x00" + self._json(case)).encode("utf-8"))
        self.keys[case.id] = h.hexdigest()


def journal_path(db: Path, run_id: str) -> Path:
    return journal_dir(db) / f"{run_id}.jsonl"


def _dry_run(parsed: ParsedSpec, cases: Sequence[Case], judges: tuple[Judge, ...], options: RunOptions) -> DryRun:
    if needs_steps(parsed, options.regenerate_steps):
        raise InputError(problems=[parsed.key_problem(
            ("steps",), "the steps are not generated yet; a dry run sends nothing")])
    plan = prepare_requests(parsed, cases, judges=judges)
    if not options.db.exists():
        return estimate(plan, unique(plan.requests), None)
    with _session(options.db) as store:
        answered = store.answered(r.hash for r in plan.requests)
        pending = [r for r in unique(plan.requests) if r.hash not in answered]
        return estimate(plan, pending, store.typical_output_tokens(parsed.judging_fp))


def _check_ceiling(plan: DryRun, max_cost: float) -> None:
    """Refuse a run whose estimate is above ``--max-cost``, or whose cost cannot be known."""
    if plan.unpriced_models:
        raise InputError(problems=[Problem(
            f"--max-cost cannot be enforced: litellm's cost map has no price for {', '.join(plan.unpriced_models)}",
            hint="run without --max-cost, or use a model with a known price")])
    if plan.cost_estimate is not None and plan.cost_estimate > max_cost:
        basis = "typical output of earlier runs" if plan.output_tokens_typical is not None else "max_tokens"
        raise CostCeiling(
            f"--max-cost ${max_cost:.4f}: the estimate for this run is ${plan.cost_estimate:.4f} "
            f"({plan.to_send} request(s) to send, {plan.input_tokens:,} input tokens, output at {basis}); "
            "nothing was sent. Raise --max-cost, judge fewer cases (--limit, --split, --shard), or use --batch")


def execute_run(parsed: ParsedSpec, options: RunOptions, on_progress: OnProgress | None = None,
                on_event: Say | None = None) -> RunResult | DryRun:
    """Run ``parsed`` with ``options``; return the dry-run plan or the run's result."""
    say: Say = on_event or (lambda text: None)
    judges = panel_for(parsed, options.model)
    problems = model_problems(parsed, judges, from_cli=options.model is not None)
    if problems:
        raise InputError(problems=problems)
    keyed = CaseKeys(parsed, judges)  # (keyed as read: the texts of a JSON Lines file stay in it, OnDisk)
    dataset = read_cases(parsed, on_disk=True, on_case=keyed.add)
    cases = select_cases(parsed, dataset.cases, options.split, options.limit)
    if options.shard is not None:
        shard = options.shard
        cases = [c for c in cases if in_shard(c.id, shard)]
        if not cases:  # a completed empty run, so that the set of shards still merges (once: exit 2)
            say(f"--shard {shard[0]}/{shard[1]}: no cases fall in this shard; it is stored as an empty shard, "
                "for merge")
    if options.dry_run:
        return _dry_run(parsed, with_texts(cases), judges, options)
    if options.max_cost is not None:
        _check_ceiling(_dry_run(parsed, with_texts(cases), judges, options), options.max_cost)
    steps_generated = needs_steps(parsed, options.regenerate_steps)
    with _session(options.db) as store:  # one session from the journals' recovery to the run's creation
        if store.recovered:
            say(f"recovered {store.recovered} response(s) from an interrupted run")
        if steps_generated:
            routes = Routes(judges[:1], 1, options.replay, options.backoff)
            parsed = generate_steps(parsed, judges[0], store, routes, options.regenerate_steps, say)
        started = _start(store, parsed, dataset.sha256, cases, judges, options, keyed.keys)
    del keyed  # (26 MB at 100,000 cases: stored with the run's cases, where its judgments take them)
    if isinstance(started, RunResult):  # finished before: nothing is planned
        return replace(started, steps_generated=steps_generated, dataset=dataset.without_texts())
    n_cases = len(cases)
    cases[:] = [c for c in cases if c.id not in started.reused]  # (in place: the engine empties this very list)
    text_free = _TextFree(dataset, cases)
    del dataset  # the engine drops each case once it is planned: nothing else may hold them
    result = _judge(parsed, cases, n_cases, judges, options, started, text_free.let_go, on_progress, say)
    return replace(result, steps_generated=steps_generated, dataset=text_free.dataset())


class _TextFree:
    """The run's data without its cases' texts, for the gate at the end: the cases the engine judges are copied
    as it lets each chunk go, the others at once. (Copied up front, every case was held twice as the run
    started, and the run's peak RSS at 100,000 cases was 15-20 MB higher: BENCHMARKS.md, scale.)"""

    def __init__(self, dataset: Dataset, judged: Sequence[Case]) -> None:
        self.empty = replace(dataset, cases=())
        self.slots: list[Case | None] = []  # the data's cases in order; None: judged, copied when let go
        j = 0
        for case in dataset.cases:
            if j < len(judged) and judged[j] is case:
                self.slots.append(None)
                j += 1
            else:
                self.slots.append(without_texts(case))
        self.copies: list[Case] = []
        self.in_order = j == len(judged)  # (the judged cases are the data's, in its order; if not, copied up front)
        if not self.in_order:
            self.slots = list(dataset.without_texts().cases)

    def let_go(self, chunk: list[Case]) -> None:
        if self.in_order:
            self.copies.extend(without_texts(c) for c in chunk)

    def dataset(self) -> Dataset:
        copies = iter(self.copies)
        return replace(self.empty, cases=tuple(c if c is not None else next(copies) for c in self.slots))


@frozen
class _Started:
    """A run created in the store, its journal locked, with the cases whose judgments were reused. (The cases'
    reuse keys are stored with the run's cases, where its judgments take them: a run does not hold them, 26 MB
    at 100,000 cases.)"""

    run_id: str
    journal: Journal
    reused: frozenset[str]
    answers_exist: bool


def _start(store: Store, parsed: ParsedSpec, data_sha256: str, cases: list[Case], judges: tuple[Judge, ...],
           options: RunOptions, all_keys: dict[str, str]) -> RunResult | _Started:
    """The summary of the same run finished before, or the run created, with what it reuses (``all_keys``: the
    data's case keys, :class:`CaseKeys`)."""
    ids = [c.id for c in cases]
    if not ids and options.shard is not None:  # empty shards must not share an id: not within a set, nor across
        k, n = options.shard                     # sets made with other case options (see runner.shards._family)
        ids = [f"(empty shard {k}/{n}, split {options.split}, limit {options.limit}, model {options.model})"]
    run_id = run_id_for((parsed.name, parsed.spec.version), parsed.judging_fp, parsed.analysis_fp, data_sha256,
                        [(j.label, j.model) for j in judges], ids)
    keys = all_keys if len(all_keys) == len(cases) else {c.id: all_keys[c.id] for c in cases}  # (only the run's
    # cases: another case's judgment is not reused. The cases are the data's, each once: as many are all of them)
    if store.finished(run_id):
        return replace(_summary(store, run_id, parsed.name, len(cases), Progress(), len(cases), options.db),
                       unchanged=True)
    if options.replay is None:  # the clients' imports (litellm: seconds) while the run is created; not before
        for name in sorted({client_name(j.client, j.model) for j in judges}):  # a rerun that sends nothing
            warm_up(name)
    info = RunInfo(run_id=run_id, kind="run", spec_name=parsed.name, spec_version=parsed.spec.version,
                   spec_ref=options.ref or parsed.name, spec_file=parsed.source.report_name,
                   judging_fp=parsed.judging_fp, analysis_fp=parsed.analysis_fp, resolved=parsed.resolved(),
                   judges=tuple(RunJudge.of(j) for j in judges), method=parsed.spec.scoring.method,
                   data_path=str(parsed.data_path), data_sha256=data_sha256, tool_version=__version__,
                   git_commit=parsed.source.commit(),
                   settings=RunSettings(cases=len(cases), model=options.model, split=options.split,
                                        limit=options.limit, concurrency=options.concurrency,
                                        replay=str(options.replay) if options.replay else None,
                                        shard=f"{options.shard[0]}/{options.shard[1]}" if options.shard else None))
    try:
        journal = Journal(journal_path(options.db, run_id))  # locked first: the run counts as alive from here
    except BlockingIOError:
        raise InputError(problems=[Problem(f"this run ({run_id}: the same spec, data, judges and cases) is in "
                                           "progress in another process; wait for it or stop it")]) from None
    try:
        earlier = store.set_aside(run_id)  # a run stopped midway: its judgments are reused below
        store.create_run(info, cases, splits=assign_splits(parsed.spec, tuple(cases)), case_keys=keys)
        reused = store.reuse_judgments(run_id, [j.label for j in judges], keys)
        if earlier is not None:
            store.delete_run(earlier)
        answers_exist = store.has_answers([j.model for j in judges])
    except BaseException:
        journal.close()  # the file stays, empty: whoever opens the store next removes it
        raise
    return _Started(run_id, journal, frozenset(reused), answers_exist)


def _judge(parsed: ParsedSpec, cases: list[Case], n_cases: int, judges: tuple[Judge, ...], options: RunOptions,
           started: _Started, let_go: Callable[[list[Case]], None], on_progress: OnProgress | None,
           say: Say) -> RunResult:
    """Stream ``cases`` (those of the run's ``n_cases`` not reused) through the engine, and finish the run."""
    run_id, journal, reused, answers_exist = started.run_id, started.journal, started.reused, started.answers_exist
    progress = Progress(cases=n_cases, cases_done=len(reused))
    routes = Routes(judges, options.concurrency, options.replay, options.backoff,
                    LimitOverride(options.rpm, options.tpm))
    if options.batch:
        from geval_spec.runner.batch import BatchRoutes

        routes = BatchRoutes(routes, options.batch_errors)
    settings = Settings(concurrency=options.concurrency, retry_budget=options.retry_budget
                        if options.retry_budget is not None else max(20, len(cases)),
                        max_cost=options.max_cost)
    gate = StoreGate(options.db)
    engine = Engine(parsed, judges, run_id, gate, journal, routes, settings, answers_exist,
                    logprobs_check(parsed.spec), on_progress, say, progress)
    status: RunStatus = "failed"
    error = None
    try:
        engine.run(cases, routes, let_go)
        status = "completed"
    except (Interrupted, CostCeiling) as exc:
        status, error = "interrupted", str(exc)
        raise
    except BaseException as exc:
        error = redact(str(exc) if isinstance(exc, GevalError) else f"{type(exc).__name__}: {exc}")
        raise
    finally:
        try:
            gate.put(lambda s: s.finish_run(run_id, status, error))
            if status == "completed":  # read in the gate's last session, after everything is written
                summary = gate.call(lambda s: _summary(s, run_id, parsed.name, n_cases, progress, len(reused),
                                                       options.db))
        finally:
            gate.close()  # raises if responses could not be stored: the journal then stays for the next run
        journal.discard()
    return summary


def _summary(store: Store, run_id: str, name: str, n_cases: int, progress: Progress, reused: int,
             db: Path) -> RunResult:
    usage = store.usage(run_id)
    valid, invalid, reasons, methods = store.judgment_counts(run_id)
    return RunResult(
        run_id=run_id, spec=name, cases=n_cases, valid=valid, invalid=invalid, requests=progress.total,
        sent=progress.done + progress.failed, cached=progress.cached, failed=progress.failed,
        retries=progress.retries, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
        cost=usage.cost, methods=methods, invalid_reasons=tuple(reasons), reused=reused,
        cached_tokens=usage.cached_tokens, db=str(db), reasoning_tokens=usage.reasoning_tokens,
        cache_saved=_saved(usage.cached_by_model), batch=store.batch_answers(run_id))


def _saved(cached_by_model: Sequence[tuple[str, int]]) -> float | None:
    """What reading prompt tokens from the provider's cache saved, at each model's prices."""
    prices = [(costs.price(model), n) for model, n in cached_by_model]
    if any(p is None for p, _ in prices):
        return None
    return sum(n * (p.input - p.cached_input) for p, n in prices if p is not None)
