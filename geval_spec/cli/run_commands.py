"""``run``, ``import`` and ``export``: the commands that put judgments into the store or take responses out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional

import typer

from geval_spec.cli.common import DB_HELP, app, db_path, echo, echo_err, handled, project, shown, write_out
from geval_spec.cli.progress import ProgressView
from geval_spec.errors import EXIT_GATE, EXIT_OK, InputError, Problem

if TYPE_CHECKING:  # heavy modules are imported by the command that needs them
    from geval_spec.runner.estimate import DryRun
    from geval_spec.runner.run import RunResult
    from geval_spec.spec.load import ParsedSpec


def fmt_cost(cost: float | None) -> str:
    if cost is None:
        return "unknown (model not in litellm's cost map)"
    return f"${cost:,.4f}"


def print_dry_run(parsed: ParsedSpec, d: DryRun) -> None:
    s = parsed.spec
    echo(f"dry run: {s.name} v{s.version}, judge(s) {', '.join(j.label for j in s.panel)}; nothing was sent")
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


def print_run(parsed: ParsedSpec, r: RunResult, gate_line: str) -> None:
    s = parsed.spec
    echo(f"{s.name} v{s.version}: {r.cases} cases, {r.valid} valid, {r.invalid} invalid "
         f"(validity {100 * r.valid / max(1, r.valid + r.invalid):.1f}%), method {', '.join(r.methods)}")
    for reason, count in r.invalid_reasons[:5]:
        echo(f"  invalid x{count}: {reason}")
    echo(f"requests: {r.requests} ({r.sent} sent, {r.cached} already answered, {r.failed} failed, "
         f"{r.retries} retries)")
    echo(f"tokens: {r.prompt_tokens:,} in, {r.completion_tokens:,} out; cost {fmt_cost(r.cost)}")
    echo(gate_line)
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
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    regenerate_steps: bool = typer.Option(False, "--regenerate-steps", help="Ask the judge for new steps."),
    retry_budget: Optional[int] = typer.Option(
        None, "--retry-budget", min=0, help="Retries allowed in the whole run (default: one per request to send, "
                                            "at least 20)."),
    backoff: Optional[float] = typer.Option(None, "--backoff", min=0.0,
                                            help="Base of the exponential backoff in seconds (default 0.5)."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write the gate as JUnit XML."),
) -> int:
    """Judge the spec's cases, store every response and judgment; print the run id last."""
    from geval_spec.analysis.gate import gate_after_run
    from geval_spec.files import prepare_output
    from geval_spec.judge.clients.replay import check_cassette
    from geval_spec.output.junit import to_junit
    from geval_spec.runner.estimate import DryRun
    from geval_spec.runner.run import RunOptions, execute_run
    from geval_spec.spec.load import load_spec
    from geval_spec.store.db import Store

    if model is not None and not model.strip():
        raise InputError(problems=[Problem("--model is empty: give a model string such as openai/gpt-4.1-mini")])
    if replay is not None:
        check_cassette(replay)
    for path, what in ((junit, "JUnit file"), (None if dry_run else db_path(db), "database")):
        if path is not None:
            prepare_output(path, what)
    proj = project()
    parsed = load_spec(proj.resolve(ref))
    options = RunOptions(db=db_path(db), model=model, split=split, limit=limit, concurrency=concurrency,
                         replay=replay, dry_run=dry_run, regenerate_steps=regenerate_steps,
                         retry_budget=retry_budget, backoff=backoff, ref=ref)
    with ProgressView(parsed.name) as view:
        result = execute_run(parsed, options, on_progress=view.update, on_event=echo_err)
    if isinstance(result, DryRun):
        print_dry_run(parsed, result)
        return EXIT_OK
    with Store(options.db) as store:
        gate = gate_after_run(store, proj, result.run_id, split)
    if gate is None:
        cal = parsed.spec.calibration
        print_run(parsed, result, f"gate not judged: this run covers split {split}, the gate is judged on {cal.split}")
        return EXIT_OK
    if junit is not None:
        write_out(to_junit(parsed.name, gate), junit, junit)
    print_run(parsed, result, f"gate {'passed' if gate.passed else 'FAILED'}: {gate.reason}")
    return EXIT_OK if gate.passed else EXIT_GATE


@app.command("import")
@handled
def import_cmd(
    ref: str = typer.Argument(..., help="A spec REF."),
    judgments: Path = typer.Argument(..., help="JSON Lines of judgments keyed by case_id."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Judge label (default: the spec's judge)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> int:
    """Store judgments made elsewhere as a run; print the run id last."""
    from geval_spec.runner.importer import import_judgments
    from geval_spec.spec.load import load_spec

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


@app.command()
@handled
def export(
    run_id: str = typer.Argument(..., metavar="RUN", help="A run id."),
    cassette: Path = typer.Option(..., "--cassette", help="Write the run's responses here."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> int:
    """Write a run's recorded responses to a cassette for run --replay."""
    from geval_spec.runner.export import export_cassette

    count = export_cassette(db_path(db), run_id, cassette)
    echo(f"wrote {count} recorded responses of {run_id} to {shown(cassette)}")
    return EXIT_OK
