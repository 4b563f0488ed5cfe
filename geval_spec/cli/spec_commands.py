"""``list``, ``validate``, ``schema`` and ``render``: the commands that need no judge and no store."""

from __future__ import annotations

import json
import sys
from typing import Literal, Optional

import typer

from geval_spec.cli.common import app, console, echo, echo_err, handled, print_problems, project
from geval_spec.errors import EXIT_INPUT, EXIT_OK, Problem


@app.command("list")
@handled
def list_cmd() -> int:
    """Name, version, criterion, method and both fingerprints of every spec."""
    from rich.table import Table

    from geval_spec.spec.fingerprint import short
    from geval_spec.spec.load import load_all

    proj = project()
    listed = load_all(proj)
    if not listed:
        echo_err(f"no specs in {proj.specs_dir}")
        return EXIT_INPUT
    table = Table(box=None, pad_edge=False)
    for col in ("name", "version", "criterion", "method", "judging", "analysis", "file"):
        table.add_column(col)
    failed: list[Problem] = []
    for item in listed:
        if item.parsed is None:
            failed += list(item.problems)
            table.add_row(item.source.display.rsplit("/", 1)[-1].rsplit(".", 1)[0], "-", "(invalid)", "-", "-", "-",
                          item.source.display)
            continue
        s = item.parsed.spec
        table.add_row(s.name, str(s.version), s.criterion.name, s.scoring.method, short(item.parsed.judging_fp),
                      short(item.parsed.analysis_fp), item.source.display)
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
    from geval_spec.runner.validate import validate_specs

    checked, project_problems = validate_specs(project(), refs or [])
    problems = list(project_problems)
    for item in checked:
        if item.errors:
            echo(f"bad {item.display}: {item.errors} error{'s' if item.errors != 1 else ''}")
        else:
            warn = len(item.problems)
            echo(f"ok  {item.display}" + (f" ({warn} warning{'s' if warn != 1 else ''})" if warn else ""))
        problems += item.problems
    if problems:
        echo_err()
        print_problems(problems)
    return EXIT_INPUT if project_problems or any(item.errors for item in checked) else EXIT_OK


@app.command()
@handled
def schema(fmt: Literal["json", "markdown"] = typer.Option("json", "--format",
                                                           help="json, or markdown for the key reference.")) -> int:
    """Print the JSON Schema of a spec file (the same as schemas/geval-spec.schema.json)."""
    from geval_spec.spec.jsonschema import reference_markdown, schema_text

    sys.stdout.write(schema_text() if fmt == "json" else reference_markdown())
    return EXIT_OK


@app.command()
@handled
def render(
    ref: str = typer.Argument(..., help="A spec REF."),
    case: Optional[str] = typer.Option(None, "--case", help="Case id (default: the first case)."),
    fmt: Literal["text", "json"] = typer.Option("text", "--format",
                                                help="text, or json for the exact request bodies."),
) -> int:
    """Print the exact messages a judge receives for one case."""
    from geval_spec.runner.validate import preview
    from geval_spec.spec.load import load_spec

    shown = preview(load_spec(project().resolve(ref)), case)
    requests = shown.plan.requests
    if fmt == "json":
        out = [{"hash": r.hash, "case_id": r.case_id, "judge": r.judge, "sample": r.sample, "purpose": r.purpose,
                "body": r.body} for r in requests]
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    s = shown.parsed.spec
    echo(f"# {s.name} v{s.version} | case {shown.case_id} | {len(requests)} request(s) | "
         f"judge(s): {', '.join(j.label for j in s.panel)}")
    share = 100.0 * shown.static_tokens / shown.total_tokens if shown.total_tokens else 0.0
    echo(f"# static prefix: {shown.static_tokens} of {shown.total_tokens} prompt tokens ({share:.1f}%), "
         "identical for every case")
    for rendered in shown.plan.rendered[shown.case_id]:
        for m in rendered.messages:
            echo(f"--- {m.role} ---")
            echo(m.content)
    return EXIT_OK
