"""``run``, ``import`` and ``export``: the commands that put judgments into the store or take responses out."""

from __future__ import annotations

import functools
import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

import typer

from geval_spec.cli.common import (DB_HELP, app, db_path, echo, echo_err, follow_ref, freeze_for_good, handled, kept,
                                   project, shown, write_out)
from geval_spec.cli.progress import ProgressView
from geval_spec.errors import EXIT_GATE, EXIT_INPUT, EXIT_OK, InputError, Problem

if TYPE_CHECKING:  # heavy modules are imported by the command that needs them
    from geval_spec.runner.estimate import DryRun
    from geval_spec.runner.run import RunOptions, RunResult
    from geval_spec.spec.load import ParsedSpec


def fmt_cost(cost: float | None) -> str:
    if cost is None:
        return "unknown (model not in litellm's cost map)"
    return f"${cost:,.4f}"


def print_dry_run(parsed: ParsedSpec, d: DryRun, model: str | None = None) -> None:
    s = parsed.spec
    judges = model or ", ".join(j.label for j in s.panel)
    echo(f"dry run: {s.name} v{s.version}, judge(s) {judges}; nothing was sent")
    echo(f"  cases          {d.cases}")
    echo(f"  requests       {d.requests} ({d.to_send} to send, {d.cached} already answered)")
    unit = "o200k_base tokens" if d.exact_tokens else "tokens, estimated at 4 characters each"
    echo(f"  input          {d.input_tokens:,} {unit}")
    typical = f"; about {d.output_tokens_typical:,} at earlier runs' length" if d.output_tokens_typical else ""
    echo(f"  output         at most {d.output_tokens_max:,} tokens (max_tokens){typical}")
    if d.cost_max is not None:
        echo(f"  cost           about {fmt_cost(d.cost_estimate)}, at most {fmt_cost(d.cost_max)} "
             "(litellm's offline cost map)")
    else:
        echo(f"  cost           unknown for {', '.join(d.unpriced_models)} (not in litellm's cost map)")
    echo(f"  static prefix  {100 * d.static_prefix_share:.1f}% of the prompt tokens (cacheable by providers)")


def print_run(parsed: ParsedSpec, r: RunResult, gate_line: str, ref: str, replay: Path | None = None,
              part: str | None = None) -> None:
    """The run's summary; ``part``: why the run is not the spec's whole run (a REF does not name it then)."""
    s = parsed.spec
    echo(f"{s.name} v{s.version}: {r.cases} cases, {r.valid} valid, {r.invalid} invalid "
         f"(validity {100 * r.valid / max(1, r.valid + r.invalid):.1f}%), method {', '.join(r.methods) or '-'}")
    for reason, count in r.invalid_reasons[:5]:
        echo(f"  invalid x{count}: {reason}")
    reused = f"; {r.reused} cases reused from earlier runs" if r.reused else ""
    sent = f"{r.sent} replayed from {shown(replay)}, nothing sent" if replay is not None else f"{r.sent} sent"
    echo(f"requests: {r.requests} ({sent}, {r.cached} already answered, {r.failed} failed, "
         f"{r.retries} retries){reused}")
    cached = ""
    if r.cached_tokens:
        saved = f", saving {fmt_cost(r.cache_saved)}" if r.cache_saved is not None else ""
        cached = (f" ({r.cached_tokens:,} = {100 * r.cached_tokens / max(1, r.prompt_tokens):.0f}% read from the "
                  f"provider's cache{saved})")
    reasoning = f" ({r.reasoning_tokens:,} of them reasoning)" if r.reasoning_tokens else ""
    paid = " as recorded (a replay pays nothing)" if replay is not None else ""
    echo(f"tokens: {r.prompt_tokens:,} in{cached}, {r.completion_tokens:,} out{reasoning}; cost {fmt_cost(r.cost)}"
         f"{paid}")
    echo(gate_line)
    if r.batch:
        echo(f"batch: {r.batch} answer(s) came through the provider's batch API, costed at its batch price")
    from geval_spec.spec.project import Project, find_root

    # --db unless the store is the default of the project found from here (the commands printed are run from here:
    # a spec file of another project, or --root, stores elsewhere)
    here = Project(find_root()).default_db
    db = "" if Path(r.db) == here else f" --db {shlex.quote(shown(Path(r.db)))}"
    other = f"  (or: geval-spec report {ref}{db})" if part is None else f"  (a run of {part}: {ref} names whole runs)"
    echo(f"stored in {shown(Path(r.db))}; next: geval-spec report {r.run_id}{db}{other}")
    echo(r.run_id)


@app.command()
@handled
def run(
    ref: str = typer.Argument(..., help="A spec REF."),
    model: Optional[str] = typer.Option(None, "--model", help="Judge with this model instead of the spec's."),
    split: Optional[Literal["examples", "dev", "test", "all"]] = typer.Option(
        None, "--split", help="Only cases of this split."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N cases."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, max=1024, help="Requests in flight at once."),
    replay: Optional[Path] = typer.Option(None, "--replay", help="Answer requests from this cassette."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and its cost; send nothing."),
    batch: bool = typer.Option(False, "--batch", help="Send through the provider's batch API (about half the price, "
                                                      "answers within 24 h); run again to resume waiting. "
                                                      "See docs/batch.md."),
    batch_errors: Literal["online", "invalid"] = typer.Option(
        "online", "--batch-errors", help="Requests that fail inside a batch: retried online (default), or left "
                                         "invalid with their reason (a later run asks again)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    regenerate_steps: bool = typer.Option(False, "--regenerate-steps", help="Ask the judge for new steps."),
    retry_budget: Optional[int] = typer.Option(
        None, "--retry-budget", min=0, help="Retries allowed in the whole run (default: one per request to send, "
                                            "at least 20)."),
    backoff: Optional[float] = typer.Option(None, "--backoff", min=0.0,
                                            help="Base of the exponential backoff in seconds (default 0.5)."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write the gate as JUnit XML."),
    shard: Optional[str] = typer.Option(None, "--shard", metavar="K/N",
                                        help="Only shard K of N of the cases (by a hash of the case id); merge the "
                                             "shards' stores with geval-spec merge."),
    rpm: Optional[int] = typer.Option(None, "--rpm", min=1, help="Requests per minute for every judge (over "
                                      "judge.limits.rpm); paced evenly."),
    tpm: Optional[int] = typer.Option(None, "--tpm", min=1, help="Tokens per minute for every judge (over "
                                      "judge.limits.tpm)."),
    max_cost: Optional[float] = typer.Option(
        None, "--max-cost", metavar="USD", min=0.0,
        help="Refuse to start when the estimate is above USD; stop sending before the spend could pass it "
             "(exit 3; the next run goes on)."),
) -> int:
    """Judge the spec's cases, store every response and judgment; print the run id last.

    A request already answered in the store is never sent again; a stopped or killed run goes on where it
    stopped; --dry-run prints the requests, tokens and cost and sends nothing.

    \b
    Examples:
      geval-spec run summary-consistency --dry-run
      geval-spec run summary-consistency
      geval-spec run summary-consistency --split dev --limit 20 --concurrency 16
      geval-spec run summary-consistency --rpm 500 --tpm 200000 --max-cost 5
      geval-spec run summary-consistency --batch       (again later: resumes waiting for the batch)
      geval-spec run summary-consistency --replay specs/cassettes/summary-consistency.jsonl

    \b
    Exit codes:
      0    judged, and the gate passed or was not judged (--split, --shard)
      1    the gate failed
      2    invalid spec, data, template or arguments; a replayed request not in the cassette
      3    judge unreachable, retry budget spent, no logprobs with fallback none, --max-cost reached,
           or a batch failed at the provider
      130  Ctrl-C (the next run goes on)
    """
    follow_ref(ref)
    from geval_spec.files import prepare_output
    from geval_spec.judge.clients.replay import check_cassette
    from geval_spec.runner.run import RunOptions

    if model is not None:
        _check_model(model)
    if replay is not None:
        check_cassette(replay)
    if batch:
        _check_batch(replay)
    if junit is not None:
        prepare_output(junit, "JUnit file", keep=kept(db))
    if not dry_run:
        prepare_output(db_path(db), "database")
    options = RunOptions(db=db_path(db), model=model, split=split, limit=limit, concurrency=concurrency,
                         replay=replay, dry_run=dry_run, regenerate_steps=regenerate_steps,
                         retry_budget=retry_budget, backoff=backoff, ref=ref,
                         shard=parse_shard(shard) if shard is not None else None, rpm=rpm, tpm=tpm,
                         max_cost=max_cost, batch=batch, batch_errors=batch_errors)
    return _run(ref, options, junit)


def _check_batch(replay: Path | None) -> None:
    """--batch's arguments, before anything is read or sent."""
    from geval_spec.runner.batch import poll_interval

    if replay is not None:
        raise InputError(problems=[Problem("--batch and --replay do not go together: a cassette answers at once")])
    poll_interval()  # GEVAL_BATCH_POLL is read before the run starts


def _check_model(model: str) -> None:
    """--model is a model string, as the spec's judge.model (pydantic's check is not made on a judge copied with
    --model, and a spec without a judge made one that failed it: exit 70)."""
    from geval_spec.spec.sections import MODEL_STRING

    if not model.strip():
        raise InputError(problems=[Problem("--model is empty: give a model string such as openai/gpt-4.1-mini")])
    if not re.search(MODEL_STRING, model):
        raise InputError(problems=[Problem(f"--model {model!r} is not a model string: write provider/model "
                                           "without spaces, e.g. openai/gpt-4.1-mini")])


def _run(ref: str, options: RunOptions, junit: Path | None) -> int:
    """Run, then judge the gate on what the run covers and print the summary."""
    from geval_spec.runner.estimate import DryRun
    from geval_spec.runner.run import execute_run
    from geval_spec.spec.load import load_spec
    from geval_spec.store.db import Store

    proj = project()
    parsed = load_spec(proj.resolve(ref))
    # What exists now (modules, the spec's models and values) lives until the process ends: frozen out of the
    # garbage collector's scans, a run's first young collection no longer walks them (18-25 ms; BENCHMARKS.md,
    # scale, twenty-second session), and a 2,000-case run then makes too few objects to need a collection at all.
    freeze_for_good()
    # The gate's analysis (numpy, the result models) is imported after the run, on this thread. Imported in the
    # background while answers came in, it took the interpreter's lock in turns with the event loop: 4% more CPU
    # at 2,000 cases, and no less wall time at a latency of 0.2 s (BENCHMARKS.md, scale, twenty-second session).
    with ProgressView(parsed.name, sent="sent" if options.replay is None else "replayed") as view:
        result = execute_run(parsed, options, on_progress=view.update, on_event=echo_err)
    if isinstance(result, DryRun):
        print_dry_run(parsed, result, options.model)
        return EXIT_OK
    split = options.split
    gate: Any = None
    # (vacuum=False, as the run's own sessions: the gate saved below makes this session checkpoint, which by
    # default merged every row group the run appended: 826 against 358 MB of RSS at 100,000 cases, a 365 MB file)
    with Store(options.db, vacuum=False) as store:
        info = store.get_run(result.run_id)
        part = info.partial([j.label for j in parsed.spec.panel]) if info is not None else None
        # an unchanged rerun reads the gate its run saved, judged by the same code: it neither loads NumPy nor the
        # judgments (about 0.9 s of a 2.1 s rerun at 100,000 cases; BENCHMARKS.md, scale)
        saved = store.saved_gate(result.run_id, gate_key()) if result.unchanged and options.shard is None else None
        if saved is not None:
            gate = _SavedGate(saved)
        elif options.shard is None:
            from geval_spec.analysis.gate import gate_after_run

            gate = gate_after_run(store, proj, result.run_id, split, result.dataset)
            if gate is not None:
                store.save_gate(result.run_id, gate_key(), json.dumps(
                    {"summary": gate.summary, "passed": gate.passed, "block": gate.model_dump_json()}))
    if options.shard is not None:
        k, n = options.shard
        print_run(parsed, result, f"gate not judged: this run is shard {k}/{n}; merge the shards' stores "
                  "(geval-spec merge) and report the merged run", ref, options.replay, part)
        return EXIT_OK
    if gate is None:
        cal = parsed.spec.calibration
        print_run(parsed, result, f"gate not judged: this run covers split {split}, the gate is judged on {cal.split}",
                  ref, options.replay, part)
        return EXIT_OK
    if junit is not None:
        from geval_spec.output.junit import to_junit

        block = gate.block() if isinstance(gate, _SavedGate) else gate
        echo(f"wrote {write_out(to_junit(parsed.name, block), junit, junit)}")
    print_run(parsed, result, gate.summary, ref, options.replay, part)
    return EXIT_OK if gate.passed else EXIT_GATE


class _SavedGate:
    """A gate as a run saved it (:meth:`~geval_spec.store.db.Store.save_gate`): its line, its verdict, and the
    whole block for --junit."""

    def __init__(self, text: str) -> None:
        data = json.loads(text)
        self.summary: str = data["summary"]
        self.passed: bool = data["passed"]
        self._block: str = data["block"]

    def block(self) -> Any:
        from geval_spec.analysis.verdict import GateBlock

        return GateBlock.model_validate_json(self._block)


@functools.cache
def gate_key() -> str:
    """What judged a saved gate: this package's source, the numeric libraries' versions and Python's. A gate
    saved by other code is judged again (an edited checkout included, whatever its version says). The libraries'
    versions are read from their ``*.dist-info`` folders' names, beside the packages, without importing them or
    importlib.metadata (about 20 ms: see geval_spec.plugins)."""
    import hashlib
    import importlib.util
    import sys

    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for dist in ("numpy", "scipy", "krippendorff"):
        spec = importlib.util.find_spec(dist)
        if spec is not None and spec.origin:
            site = Path(spec.origin).resolve().parent.parent
            digest.update(" ".join(sorted(p.name for p in site.glob(f"{dist}-*.dist-info"))).encode() + b"\0")
    return digest.hexdigest()


@app.command("import")
@handled
def import_cmd(
    ref: str = typer.Argument(..., help="A spec REF."),
    judgments: Path = typer.Argument(..., help="JSON Lines of judgments keyed by case_id."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Judge label (default: the spec's judge)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> int:
    """Store judgments made elsewhere as a run; print the run id last.

    One JSON object per line, keyed by case_id, with the method's field (score, distribution, samples or
    verdicts); the same file imported again for the same spec and judge is the same run.

    \b
    Examples:
      geval-spec import summeval-consistency specs/data/tcva/summeval-consistency.verdicts.jsonl
      geval-spec import summary-consistency judgments.jsonl --judge gpt-4.1-mini

    \b
    Exit codes:
      0    imported
      2    invalid spec, or a line that is not a judgment of this spec (file:line)
    """
    follow_ref(ref)
    from geval_spec.runner.importer import import_judgments
    from geval_spec.spec.load import load_spec

    if judge is not None and not judge.strip():
        raise InputError(problems=[Problem("--judge is empty: give the label of the judge that made the judgments")])
    parsed = load_spec(project().resolve(ref))
    r = import_judgments(parsed, judgments, db_path(db), judge=judge, ref=ref)
    forms = ", ".join(f"{k} {v}" for k, v in sorted(r.forms.items()))
    if r.reused:
        echo(f"already imported: the same file for the same spec and judge is run {r.run_id}")
    echo(f"{parsed.name}: {r.imported} judgments imported ({forms}); {r.valid} valid, {r.invalid} invalid, "
         f"{len(r.missing)} missing of {r.cases} cases")
    if r.missing:
        listed = ", ".join(r.missing[:10]) + (f" and {len(r.missing) - 10} more" if len(r.missing) > 10 else "")
        echo(f"  missing: {listed}")
    echo(r.run_id)
    return EXIT_OK


MAX_SHARDS = 10_000


def parse_shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isascii() and n.isascii() and k.isdigit() and n.isdigit()) or not 1 <= int(k) <= int(n):
        raise InputError(problems=[Problem(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")])
    if int(n) > MAX_SHARDS:
        raise InputError(problems=[Problem(f"--shard {text!r}: at most {MAX_SHARDS:,} shards")])
    return int(k), int(n)


@app.command()
@handled
def export(
    run_id: str = typer.Argument(..., metavar="RUN", help="A run id."),
    cassette: Optional[Path] = typer.Option(None, "--cassette", help="Write the run's responses here."),
    parquet: Optional[Path] = typer.Option(None, "--parquet", metavar="DIR",
                                           help="Write the run's cases, requests, responses, judgments and "
                                                "verdicts as Parquet files into this folder."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> int:
    """Write a run's recorded responses to a cassette for run --replay, or its tables as Parquet.

    \b
    Examples:
      geval-spec export run_20261130104512a1b2c3 --cassette tests/cassettes/summary.jsonl
      geval-spec export run_20261130104512a1b2c3 --parquet exports/summary/

    \b
    Exit codes:
      0    written
      2    unknown run, no results database, neither --cassette nor --parquet
    """
    from geval_spec.runner.export import export_cassette, export_parquet, prepare_exports

    if cassette is None and parquet is None:
        raise InputError(problems=[Problem("give --cassette FILE or --parquet DIR (or both)")])
    keep = kept(db)  # never over a spec, its data or the results database
    prepare_exports(cassette, parquet, keep)
    if cassette is not None:
        count = export_cassette(db_path(db), run_id, cassette, keep)
        echo(f"wrote {count} recorded responses of {run_id} to {shown(cassette)}")
    if parquet is not None:
        for path in export_parquet(db_path(db), run_id, parquet, keep):
            echo(f"wrote {shown(path)}")
    return EXIT_OK


@app.command()
@handled
def merge(
    stores: list[Path] = typer.Argument(..., metavar="DB...", help="The shards' results databases."),
    db: Optional[Path] = typer.Option(None, "--db", help="Merge into this database (default "
                                                        ".geval/results.duckdb)."),
) -> int:
    """Merge the stores of shards (run --shard K/N --db ...) into one; each complete set becomes one run.

    A complete set of shards becomes the run an unsharded run would have made (its report is the same,
    byte for byte); an incomplete set is copied and named. Shards the target holds already count: a shard
    run into the default store, or sets merged in steps.

    \b
    Examples:
      geval-spec run summary-consistency --shard 1/4 --db shard1.duckdb      (one per CI job)
      geval-spec merge shard1.duckdb shard2.duckdb shard3.duckdb shard4.duckdb
      geval-spec report summary-consistency

    \b
    Exit codes:
      0    merged
      2    a set of shards is incomplete (copied, not combined), a file that is not a results database (or
           is the target itself), no store given
    """
    from geval_spec.runner.shards import merge as merge_stores

    target = db_path(db)
    result = merge_stores(target, [p.resolve() for p in stores])
    echo(f"copied {len(result.copied)} run(s) from {result.stores} store(s) into {shown(target)}")
    for note in result.incomplete:
        echo_err(f"not merged: {note}")
    for run_id in result.runs:
        echo(run_id)
    return EXIT_OK if not result.incomplete else EXIT_INPUT
