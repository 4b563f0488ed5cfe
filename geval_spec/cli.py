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


def main() -> None:
    try:
        app()
    except SystemExit as exc:
        raise
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)
