"""The ``geval-spec`` command line. The only module that prints.

Exit codes: 0 success; 1 a quality gate failed; 2 invalid input (spec, data,
arguments, template); 3 the judge could not be reached or failed beyond the
retry budget; 70 an internal error (a bug: please report it with --debug).
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path
from typing import Callable, Optional

import typer

from .errors import EXIT_INPUT, EXIT_OK, GevalError, Problem

EXIT_BUG = 70

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  no_args_is_help=True, help="LLM-as-a-judge evaluation as versioned, reviewable specs.")


class State:
    root: Optional[Path] = None
    debug: bool = False


STATE = State()


# -- output -------------------------------------------------------------------
def echo(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def echo_err(text: str = "") -> None:
    sys.stderr.write(text + "\n")


def console(stderr: bool = False):
    from rich.console import Console

    c = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not c.is_terminal:  # piped or captured: never truncate columns
        c = Console(stderr=stderr, highlight=False, soft_wrap=True, width=400)
    return c


def print_problems(problems: list[Problem] | tuple[Problem, ...]) -> None:
    for p in problems:
        echo_err(p.headline())
        if p.hint:
            echo_err(f"  hint: {p.hint}")
        excerpt = p.excerpt()
        if excerpt:
            echo_err(excerpt)
        echo_err()


def handled(fn: Callable) -> Callable:
    """Turn deliberate errors into messages and exit codes; bugs into one line unless --debug."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            code = fn(*args, **kwargs)
        except GevalError as exc:
            if STATE.debug:
                traceback.print_exc()
            if exc.problems:
                print_problems(exc.problems)
            else:
                echo_err(f"error: {exc}")
            raise typer.Exit(exc.exit_code)
        except KeyboardInterrupt:
            echo_err("interrupted")
            raise typer.Exit(130)
        except typer.Exit:
            raise
        except Exception as exc:  # a bug
            if STATE.debug:
                traceback.print_exc()
            else:
                echo_err(f"internal error: {type(exc).__name__}: {exc}")
                echo_err("this is a bug in geval-spec; run again with --debug for the traceback and report it")
            raise typer.Exit(EXIT_BUG)
        raise typer.Exit(code or EXIT_OK)

    return wrapper


def project():
    from .registry import Project, find_root

    return Project(STATE.root.resolve() if STATE.root else find_root())


@app.callback()
def _global(
    root: Optional[Path] = typer.Option(None, "--root", help="Project directory (default: nearest one with specs/)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    STATE.root = root
    STATE.debug = debug


# -- list / validate / schema / render -------------------------------------------
@app.command("list")
@handled
def list_cmd() -> int:
    """Name, version, criterion, method and both fingerprints of every spec."""
    from rich.table import Table

    from .fingerprint import short
    from .load import load_spec

    proj = project()
    files = proj.spec_files()
    if not files:
        echo_err(f"no specs in {proj.specs_dir}")
        return EXIT_INPUT
    table = Table(box=None, pad_edge=False)
    for col in ("name", "version", "criterion", "method", "judging", "analysis", "file"):
        table.add_column(col)
    failed: list[Problem] = []
    for path in files:
        source = proj.source_of(path)
        try:
            parsed = load_spec(source)
        except GevalError as exc:
            failed += list(exc.problems)
            table.add_row(path.stem, "-", "(invalid)", "-", "-", "-", source.display)
            continue
        s = parsed.spec
        table.add_row(s.name, str(s.version), s.criterion.name, s.scoring.method, short(parsed.judging_fp),
                      short(parsed.analysis_fp), source.display)
    console().print(table)
    failed += proj.duplicate_name_problems()
    if failed:
        echo_err()
        print_problems(failed)
        return EXIT_INPUT
    return EXIT_OK


@app.command()
@handled
def validate(refs: list[str] = typer.Argument(None, metavar="[REF]...", help="Specs to check (default: all).")) -> int:
    """Check specs, their templates and data; print every problem with file:line:col."""
    from .load import check_all

    proj = project()
    sources = [proj.resolve(r) for r in refs] if refs else [proj.source_of(p) for p in proj.spec_files()]
    if not sources:
        echo_err(f"no specs in {proj.specs_dir}")
        return EXIT_INPUT
    errors = 0
    problems_all: list[Problem] = [] if refs else proj.duplicate_name_problems()
    errors += len(problems_all)
    for source in sources:
        parsed, problems = check_all(source)
        bad = [p for p in problems if p.severity == "error"]
        errors += len(bad)
        problems_all += problems
        if not bad:
            warn = len(problems)
            suffix = f" ({warn} warning{'s' if warn != 1 else ''})" if warn else ""
            echo(f"ok  {source.display}{suffix}")
        else:
            echo(f"bad {source.display}: {len(bad)} error{'s' if len(bad) != 1 else ''}")
    if problems_all:
        echo_err()
        print_problems(problems_all)
    return EXIT_INPUT if errors else EXIT_OK


@app.command()
@handled
def schema(fmt: str = typer.Option("json", "--format", help="json, or markdown for the key reference.")) -> int:
    """Print the JSON Schema of a spec file (the same as schemas/geval-spec.schema.json)."""
    from .errors import InputError
    from .schema import reference_markdown, schema_text

    if fmt == "json":
        sys.stdout.write(schema_text())
    elif fmt == "markdown":
        sys.stdout.write(reference_markdown())
    else:
        raise InputError(problems=[Problem(f"--format must be json or markdown, not {fmt!r}")])
    return EXIT_OK


@app.command()
@handled
def render(
    ref: str = typer.Argument(..., help="A spec REF."),
    case: Optional[str] = typer.Option(None, "--case", help="Case id (default: the first case)."),
    fmt: str = typer.Option("text", "--format", help="text, or json for the exact request bodies."),
) -> int:
    """Print the exact messages a judge receives for one case."""
    from .errors import RefError
    from .load import load_spec
    from .plan import prepare_requests
    from .render import prefix_share

    if fmt not in ("text", "json"):
        raise RefError(problems=[Problem(f"--format must be text or json, not {fmt!r}")])
    proj = project()
    parsed = load_spec(proj.resolve(ref))
    dataset = parsed.load_data()
    cases = {c.id: c for c in dataset.cases}
    if case is not None and case not in cases:
        import difflib

        close = difflib.get_close_matches(case, list(cases), n=3)
        hint = ("did you mean " + ", ".join(repr(c) for c in close) + "?") if close else None
        raise RefError(problems=[Problem(f"no case {case!r} in {dataset.display}", hint=hint)])
    chosen = cases[case] if case is not None else dataset.cases[0]
    prepared = prepare_requests(parsed, [chosen])
    renderer = prepared.renderer
    if fmt == "json":
        out = [{"hash": r.hash, "case_id": r.case_id, "judge": r.judge, "sample": r.sample, "purpose": r.purpose,
                "body": r.body} for r in prepared.requests]
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    first = prepared.rendered[chosen.id][0]
    static, total = prefix_share(renderer.static_prefix(), first.messages)
    s = parsed.spec
    echo(f"# {s.name} v{s.version} | case {chosen.id} | {len(prepared.requests)} request(s) | "
         f"judge(s): {', '.join(j.label for j in s.panel)}")
    share = 100.0 * static / total if total else 0.0
    echo(f"# static prefix: {static} of {total} prompt tokens ({share:.1f}%), identical for every case")
    for rendered in prepared.rendered[chosen.id]:
        for m in rendered.messages:
            echo(f"--- {m.role} ---")
            echo(m.content)
    return EXIT_OK


# -- run / import / export -----------------------------------------------------------
def db_path(db: Optional[Path]) -> Path:
    return db.resolve() if db is not None else project().default_db


def fmt_cost(cost: float | None) -> str:
    if cost is None:
        return "unknown (model not in litellm's cost map)"
    return f"${cost:,.4f}"


class ProgressView:
    """A rich progress bar on stderr when it is a terminal; a final line otherwise."""

    def __init__(self, label: str):
        self.label = label
        self.console = console(stderr=True)
        self.live = self.console.is_terminal
        self.bar = None
        self.task = None
        self.last = None

    def __enter__(self) -> "ProgressView":
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=self.console,
                                transient=False)
            self.bar.__enter__()
            self.task = self.bar.add_task(self.label, total=None, info="")
        return self

    def update(self, p) -> None:
        self.last = p
        if self.bar is None:
            return
        cost = f" ${p.cost:.4f}" if p.cost else ""
        info = (f"cached {p.cached}  failed {p.failed}  retries {p.retries}  "
                f"tokens {p.prompt_tokens + p.completion_tokens:,}{cost}")
        self.bar.update(self.task, total=p.total or None, completed=p.cached + p.done + p.failed, info=info)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


@app.command()
@handled
def run(
    ref: str = typer.Argument(..., help="A spec REF."),
    model: Optional[str] = typer.Option(None, "--model", help="Judge with this model instead of the spec's."),
    split: Optional[str] = typer.Option(None, "--split", help="Only cases of this split (examples, dev, test)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N cases."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, max=1024, help="Requests in flight at once."),
    replay: Optional[Path] = typer.Option(None, "--replay", help="Answer requests from this cassette."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and its cost; send nothing."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default .geval/results.duckdb)."),
    regenerate_steps: bool = typer.Option(False, "--regenerate-steps", help="Ask the judge for new steps."),
    retry_budget: Optional[int] = typer.Option(None, "--retry-budget", min=0,
                                               help="Retries allowed in the whole run (default: one per request)."),
    backoff: Optional[float] = typer.Option(None, "--backoff", min=0.0,
                                            help="Base of the exponential backoff in seconds (default 0.5)."),
) -> int:
    """Judge the spec's cases, store every response and judgment; print the run id last."""
    from .errors import InputError
    from .load import load_spec
    from .run import DryRun, RunOptions, execute_run

    if split is not None and split not in ("examples", "dev", "test", "all"):
        raise InputError(problems=[Problem(f"--split must be examples, dev, test or all, not {split!r}")])
    if replay is not None and not replay.is_file():
        raise InputError(problems=[Problem(f"no such cassette: {replay}")])
    parsed = load_spec(project().resolve(ref))
    options = RunOptions(db=db_path(db), model=model, split=split, limit=limit, concurrency=concurrency,
                         replay=replay, dry_run=dry_run, regenerate_steps=regenerate_steps,
                         retry_budget=retry_budget, backoff=backoff, ref=ref)
    with ProgressView(f"{parsed.name}") as view:
        result = execute_run(parsed, options, on_progress=view.update, on_event=lambda t: echo_err(t))
    if isinstance(result, DryRun):
        print_dry_run(parsed, result)
        return EXIT_OK
    print_run(parsed, result)
    return EXIT_OK


def print_dry_run(parsed, d) -> None:
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


def print_run(parsed, r) -> None:
    s = parsed.spec
    echo(f"{s.name} v{s.version}: {r.cases} cases, {r.valid} valid, {r.invalid} invalid "
         f"(validity {100 * r.valid / max(1, r.valid + r.invalid):.1f}%), method {', '.join(r.methods)}")
    for reason, count in r.invalid_reasons[:5]:
        echo(f"  invalid x{count}: {reason}")
    echo(f"requests: {r.requests} ({r.sent} sent, {r.cached} already answered, {r.failed} failed, "
         f"{r.retries} retries)")
    echo(f"tokens: {r.prompt_tokens:,} in, {r.completion_tokens:,} out; cost {fmt_cost(r.cost)}")
    echo(r.run_id)


@app.command("import")
@handled
def import_cmd(
    ref: str = typer.Argument(..., help="A spec REF."),
    judgments: Path = typer.Argument(..., help="JSON Lines of judgments keyed by case_id."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Judge label (default: the spec's judge)."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default .geval/results.duckdb)."),
) -> int:
    """Store judgments made elsewhere as a run; print the run id last."""
    from .importer import import_judgments
    from .load import load_spec

    parsed = load_spec(project().resolve(ref))
    r = import_judgments(parsed, judgments, db_path(db), judge=judge, ref=ref)
    forms = ", ".join(f"{k} {v}" for k, v in sorted(r.forms.items()))
    if r.reused:
        echo(f"already imported: the same file for the same spec and judge is run {r.run_id}")
    echo(f"{parsed.name}: {r.imported} judgments imported ({forms}); {r.valid} valid, {r.invalid} invalid, "
         f"{len(r.missing)} missing of {r.cases} cases")
    if r.missing:
        shown = ", ".join(r.missing[:10]) + (f" and {len(r.missing) - 10} more" if len(r.missing) > 10 else "")
        echo(f"  missing: {shown}")
    echo(r.run_id)
    return EXIT_OK


def open_run(run_id: str, db: Optional[Path]):
    from .errors import RefError
    from .store import Store

    path = db_path(db)
    if not path.exists():
        raise RefError(problems=[Problem(f"no results database at {path}", hint="run or import something first")])
    store = Store(path)
    info = store.get_run(run_id)
    if info is None:
        store.close()
        raise RefError(problems=[Problem(f"no run {run_id!r} in {path}")])
    return store, info


@app.command()
@handled
def export(
    run_id: str = typer.Argument(..., metavar="RUN", help="A run id."),
    cassette: Path = typer.Option(..., "--cassette", help="Write the run's responses here."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default .geval/results.duckdb)."),
) -> int:
    """Write a run's recorded responses to a cassette for run --replay."""
    from .clients.replay import cassette_lines

    store, info = open_run(run_id, db)
    with store:
        rows = store.export_responses(run_id)
    header = {"run": info.run_id, "spec": info.spec_name, "judging_fingerprint": info.judging_fp}
    lines = cassette_lines(header, rows)
    cassette.parent.mkdir(parents=True, exist_ok=True)
    tmp = cassette.with_name(cassette.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(cassette)
    echo(f"wrote {len(rows)} recorded responses of {info.run_id} to {cassette}")
    return EXIT_OK


def main() -> None:
    try:
        app()
    except SystemExit as exc:
        raise
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)
