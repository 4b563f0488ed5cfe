"""The ``geval-spec`` command line. The only module that prints.

Exit codes: 0 success; 1 a quality gate failed; 2 invalid input (spec, data,
arguments, template); 3 the judge could not be reached or failed beyond the
retry budget; 70 an internal error (a bug: please report it with --debug).
"""

from __future__ import annotations

import functools
import json
import os
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
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write the gate as JUnit XML."),
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
    code = EXIT_OK
    cal = parsed.spec.calibration
    if split is not None and split not in ("all", cal.split) and cal.split != "all":
        gate_line = f"gate not judged: this run covers split {split}, the gate is judged on {cal.split}"
    else:
        from .analysis import gate_only
        from .errors import EXIT_GATE
        from .runs import load

        with open_store(db) as store:
            loaded = load(store, project(), result.run_id)
        g = gate_only(loaded.source, loaded.case_ids, loaded.judgments, loaded.findings)
        gate_line = f"gate {'passed' if g.passed else 'FAILED'}: {g.reason}"
        if junit is not None:
            write_junit(junit, parsed.name, {"metric": g.metric, "level": g.level, "split": g.split,
                                             "threshold": g.threshold, "passed": g.passed, "reason": g.reason})
        code = EXIT_OK if g.passed else EXIT_GATE
    print_run(parsed, result, gate_line)
    return code


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


def print_run(parsed, r, gate_line: str) -> None:
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


# -- analysis ------------------------------------------------------------------------------
def open_store(db: Optional[Path]):
    from .errors import RefError
    from .store import Store

    path = db_path(db)
    if not path.exists():
        raise RefError(problems=[Problem(f"no results database at {path}",
                                         hint="run or import judgments first: geval-spec run REF")])
    return Store(path)


@app.command()
@handled
def sweep(
    what: str = typer.Argument(..., metavar="RUN|REF", help="A run id or a spec REF."),
    fmt: str = typer.Option("md", "--format", help="md or json."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default .geval/results.duckdb)."),
) -> int:
    """TCVA temperature sweep from stored verdicts: choose on dev, report on test. Sends nothing."""
    from .analysis import sweep as run_sweep
    from .errors import InputError
    from .report import sweep_block, sweep_markdown
    from .runs import load

    if fmt not in ("md", "json"):
        raise InputError(problems=[Problem(f"--format must be md or json, not {fmt!r}")])
    with open_store(db) as store:
        loaded = load(store, project(), what)
    spec = loaded.source.spec
    if spec.scoring.method != "verdicts":
        raise InputError(problems=[Problem(f"sweep re-aggregates TCVA verdicts; {spec.name} uses method "
                                           f"{spec.scoring.method}")])
    if spec.split is None:
        raise InputError(problems=[Problem(f"sweep chooses the temperature on the dev split; {spec.name} "
                                           "defines no splits", hint="add split: {by: group, fractions: "
                                                                     "{dev: 0.5, test: 0.5}}")])
    block = sweep_block(run_sweep(loaded.source, loaded.case_ids, loaded.judgments, findings=loaded.findings))
    if fmt == "json":
        sys.stdout.write(json.dumps({"spec": spec.name, "run": loaded.run.run_id, **block}, indent=2) + "\n")
        return EXIT_OK
    echo(f"# TCVA temperature sweep: {spec.name}, run {loaded.run.run_id}")
    echo("")
    for line in sweep_markdown(block):
        echo(line)
    return EXIT_OK


@app.command()
@handled
def compare(
    a: str = typer.Argument(..., metavar="A", help="A run id or a spec REF (e.g. summary-consistency@v3)."),
    b: str = typer.Argument(..., metavar="B", help="A run id or a spec REF (e.g. summary-consistency)."),
    fmt: str = typer.Option("md", "--format", help="md or json."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write here (default reports/<spec>/compare-A-B.<ext>); "
                                                           "- prints to stdout."),
    margin: Optional[float] = typer.Option(None, "--margin", min=0.0,
                                           help="Regression margin (default: B's calibration.margin)."),
    run_missing: bool = typer.Option(False, "--run", help="Run a spec REF that has no stored run yet."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default .geval/results.duckdb)."),
) -> int:
    """Compare two spec versions or runs: spec diff, paired deltas with intervals; exit 1 on a regression."""
    from .compare import compare as run_compare, to_json, to_markdown
    from .errors import EXIT_GATE, InputError, NoStoredRun
    from .runs import load

    if fmt not in ("md", "json"):
        raise InputError(problems=[Problem(f"--format must be md or json, not {fmt!r}")])
    proj = project()

    def side(what: str):
        from .registry import RUN_ID

        if db_path(db).exists() or run_missing or RUN_ID.match(what):
            with open_store(db) if not run_missing else _new_store(db) as store:
                try:
                    return load(store, proj, what)
                except NoStoredRun:
                    if not run_missing:
                        raise
        else:
            from .load import load_spec

            parsed = load_spec(proj.resolve(what))
            raise NoStoredRun(problems=[Problem(f"no stored run of {parsed.name} (no results database yet)",
                                                hint=f"make one: geval-spec run {what}, or pass --run")])
        from .load import load_spec
        from .run import RunOptions, execute_run

        echo_err(f"no stored run for {what}: running it")
        parsed = load_spec(proj.resolve(what))
        with ProgressView(parsed.name) as view:
            execute_run(parsed, RunOptions(db=db_path(db), ref=what), on_progress=view.update,
                        on_event=lambda t: echo_err(t))
        with open_store(db) as store:
            return load(store, proj, what)

    left, right = side(a), side(b)
    result = run_compare(left, right, margin=margin)
    text = to_json(result) if fmt == "json" else to_markdown(result)
    if out is not None and str(out) == "-":
        sys.stdout.write(text)
    else:
        path = out or (proj.root / "reports" / right.source.spec.name / f"compare-{_slug(a)}-{_slug(b)}.{fmt}")
        write_atomic(path, text)
        r = result["regression"]
        echo(f"change: {result['change']['class']} ({result['change']['meaning']})")
        echo(f"{'REGRESSION' if r['regressed'] else 'no significant regression'}: {r['reason']}")
        echo(f"wrote {_shown(path)}")
    return EXIT_GATE if result["regression"]["regressed"] else EXIT_OK


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_")[:60] or "x"


def _new_store(db: Optional[Path]):
    from .store import Store

    return Store(db_path(db))


@app.command()
@handled
def audit(
    ref: str = typer.Argument(..., help="A spec REF."),
    fmt: str = typer.Option("md", "--format", help="md or json."),
) -> int:
    """Splits (leakage), human agreement and sample size of a spec's data; needs no judge."""
    from .diagnostics import audit as run_audit
    from .errors import InputError
    from .load import load_spec
    from .report import f3

    if fmt not in ("md", "json"):
        raise InputError(problems=[Problem(f"--format must be md or json, not {fmt!r}")])
    parsed = load_spec(project().resolve(ref))
    result = run_audit(parsed.spec, parsed.load_data())
    if fmt == "json":
        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    s, a, z = result["splits"], result["agreement"], result["sample_size"]
    echo(f"# audit: {parsed.name} ({result['cases']['n']} cases, {result['cases']['labelled']} with a human score)")
    echo("")
    echo("## Splits")
    echo("")
    if s["by"] is None:
        echo("no splits defined: the gate is judged on all cases, the same ones any tuning looked at")
    else:
        echo(f"split by {s['by']}; " + ", ".join(f"{k} {v}" for k, v in s["counts"].items()))
        echo(f"duplicate ids: {', '.join(s['duplicate_ids']) or 'none'}")
        if s["overlapping_groups"]:
            echo(f"source groups in more than one split ({len(s['overlapping_groups'])}):")
            for group, names in list(s["overlapping_groups"].items())[:20]:
                echo(f"  {group}: {', '.join(names)}")
        else:
            echo("source groups in more than one split: none")
        declared = set(getattr(parsed.spec.split, "fractions", None) or ("examples", "dev", "test"))
        empty = [f"{m}{'' if m in declared else ' (not in split.fractions)'}" for m in s["missing_splits"]]
        echo(f"splits without cases: {', '.join(empty) or 'none'}")
    echo("")
    echo("## Human agreement")
    echo("")
    if a is None:
        echo("one human score column: agreement between raters cannot be measured "
             "(list the rater columns in data.human to measure it)")
    else:
        echo(f"Krippendorff's alpha over {len(a['raters'])} raters, {a['n']} cases: interval "
             f"{f3(a['alpha_interval'])}, ordinal {f3(a['alpha_ordinal'])}")
        if a["warning"]:
            echo(f"warning: {a['warning']}")
    echo("")
    echo("## Sample size")
    echo("")
    if z["required"] is None:
        echo(z["method"])
    else:
        echo(f"to tell {z['alternative']} from 0.5: {z['required']} cases; the {z['split']} split has "
             f"{z['available']} labelled cases: {'enough' if z['enough'] else 'NOT enough'}")
        echo(f"method: {z['method']}")
        echo(f"formula: {z['formula']}")
    return EXIT_OK


def write_junit(path: Path, spec_name: str, gate: dict) -> None:
    """One test case per gate: failed when the gate failed."""
    from xml.sax.saxutils import escape, quoteattr

    name = f"{gate['metric']} {gate['level']} {gate['split']} >= {gate['threshold']}"
    body = (f'<testcase classname={quoteattr("geval-spec." + spec_name)} name={quoteattr(name)}>'
            + ("" if gate["passed"] else f'<failure message={quoteattr(gate["reason"])}>{escape(gate["reason"])}'
                                         "</failure>") + "</testcase>")
    xml = ('<?xml version="1.0" encoding="utf-8"?>\n'
           f'<testsuites><testsuite name={quoteattr("geval-spec")} tests="1" failures="{0 if gate["passed"] else 1}" '
           f'errors="0">{body}</testsuite></testsuites>\n')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(xml, encoding="utf-8")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


@app.command()
@handled
def report(
    what: str = typer.Argument(..., metavar="RUN|REF", help="A run id, or a spec REF (its newest matching run)."),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.1, max=1.0,
                                                help="TCVA: re-aggregate stored verdicts at this temperature."),
    fmt: str = typer.Option("md", "--format", help="md, json, html, or all (the three files)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write here (default reports/<spec>/report.<ext>); "
                                                           "- prints to stdout."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write the gate as JUnit XML."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when the gate fails."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default .geval/results.duckdb)."),
) -> int:
    """Calibration report from stored judgments (sends nothing); exit 1 when the gate fails."""
    from .errors import EXIT_GATE, InputError
    from .report import build, to_html, to_json, to_markdown
    from .runs import load

    if fmt not in ("md", "json", "html", "all"):
        raise InputError(problems=[Problem(f"--format must be md, json, html or all, not {fmt!r}")])
    if fmt == "all" and out is not None:
        raise InputError(problems=[Problem("--format all writes three files; give --out a directory's "
                                           "file only with one format")])
    proj = project()
    with open_store(db) as store:
        loaded = load(store, proj, what)
    if temperature is not None and loaded.source.spec.scoring.method != "verdicts":
        raise InputError(problems=[Problem("--temperature re-aggregates TCVA verdicts; "
                                           f"{loaded.source.spec.name} uses method {loaded.source.spec.scoring.method}")])
    data, frame = build(loaded, temperature=temperature)
    renderers = {"md": to_markdown, "json": to_json, "html": lambda d: to_html(d, frame)}
    g = data["gate"]
    if out is not None and str(out) == "-":
        sys.stdout.write(renderers[fmt](data))
    else:
        echo(f"gate {'passed' if g['passed'] else 'FAILED'}: {g['reason']}")
        for ext in (("md", "json", "html") if fmt == "all" else (fmt,)):
            path = out or (proj.root / "reports" / loaded.source.spec.name / f"report.{ext}")
            write_atomic(path, renderers[ext](data))
            echo(f"wrote {_shown(path)}")
    if junit is not None:
        write_junit(junit, loaded.source.spec.name, g)
    return EXIT_OK if g["passed"] or exit_zero else EXIT_GATE


def _shown(path: Path) -> str:
    from .registry import display_path

    return display_path(path)


def main() -> None:
    """Console entry point.

    pydantic's plugin scan is switched off (geval-spec's own models need
    none), and the interpreter's teardown is skipped once output is flushed:
    every command has closed its store and files by the time ``app`` returns,
    and a normal exit spends 20-30 ms tearing down modules (see BENCHMARKS.md).
    """
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
