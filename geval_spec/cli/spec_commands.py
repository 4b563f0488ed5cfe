"""``list``, ``validate``, ``schema`` and ``render``: the commands that need no judge and no store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

import typer

from geval_spec.cli.common import (app, console, echo, echo_err, follow_ref, handled, print_problems, project,
                                   safe, write_stdout)
from geval_spec.errors import EXIT_INPUT, EXIT_OK, InputError, Problem

if TYPE_CHECKING:
    from geval_spec.spec.load import Listed


@app.command("list", short_help="Every spec: name, version, method, judging and analysis fingerprints.")
@handled
def list_cmd(
    fmt: Literal["table", "json"] = typer.Option("table", "--format", help="table, or json (full fingerprints, "
                                                 "data file and its SHA-256)."),
    changed_since: Optional[str] = typer.Option(
        None, "--changed-since", metavar="REV", help="Only specs whose file, data, template or lock differs from "
        "git revision REV (each marked added or modified)."),
) -> int:
    """Name, version, criterion, method and both fingerprints of every spec.

    With --format json: a list of objects with name, version, criterion,
    method, judging and analysis (full fingerprints), file, data and
    data_sha256 (paths relative to the project), valid; with --changed-since
    also change (added or modified). A CI job keys its cache on the judging
    fingerprints and data hashes, and runs only the changed specs.

    \b
    Examples:
      geval-spec list
      geval-spec list --format json | jq -r '.[].judging'
      geval-spec list --format json --changed-since origin/main

    \b
    Exit codes:
      0  every spec loaded
      2  no specs, a spec that does not load (listed, with its problems), or REV is not a revision
    """
    from geval_spec.spec.load import load_all

    proj = project()
    listed = load_all(proj)
    if not listed:
        echo_err(f"no specs in {proj.specs_dir}")
        return EXIT_INPUT
    changes = changed_specs(proj, listed, changed_since) if changed_since is not None else None
    shown_items = [item for item in listed if changes is None or item.source.display in changes]
    failed: list[Problem] = [p for item in listed if item.parsed is None for p in item.problems]
    failed += proj.duplicate_name_problems()
    if fmt == "json":
        entries = [list_entry(proj.root, item) for item in shown_items]
        if changes is not None:
            for entry, item in zip(entries, shown_items):
                entry["change"] = changes[item.source.display]
        echo(json.dumps(entries, indent=2, ensure_ascii=False))
    else:
        _list_table(shown_items, changes)
    if failed:
        echo_err()
        print_problems(failed)
        return EXIT_INPUT
    return EXIT_OK


def _list_table(listed: list[Listed], changes: dict[str, str] | None) -> None:
    from rich.table import Table

    from geval_spec.spec.fingerprint import short

    table = Table(box=None, pad_edge=False)
    for col in ("name", "version", "criterion", "method", "judging", "analysis", "file") + (
            ("change",) if changes is not None else ()):
        table.add_column(col)
    for item in listed:
        extra = (changes.get(item.source.display, ""),) if changes is not None else ()
        if item.parsed is None:
            table.add_row(item.source.display.rsplit("/", 1)[-1].rsplit(".", 1)[0], "-", "(invalid)", "-", "-", "-",
                          item.source.display, *extra)
            continue
        s = item.parsed.spec
        table.add_row(s.name, str(s.version), s.criterion.name, s.scoring.method, short(item.parsed.judging_fp),
                      short(item.parsed.analysis_fp), item.source.display, *extra)
    console().print(table)


def _rel(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _sha256(path: Path) -> str | None:
    import hashlib

    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def list_entry(root: Path, item: Listed) -> dict[str, Any]:
    """One spec of ``list --format json``; paths are relative to the project root."""
    file = _rel(root, root / item.source.rel) if item.source.rel else item.source.display
    if item.parsed is None:
        return {"name": Path(file).stem, "file": file, "valid": False,
                "problems": [p.headline() for p in item.problems]}
    p = item.parsed
    s = p.spec
    return {"name": s.name, "version": s.version, "criterion": s.criterion.name, "method": s.scoring.method,
            "judging": p.judging_fp, "analysis": p.analysis_fp, "file": file, "data": _rel(root, p.data_path),
            "data_sha256": _sha256(p.data_path), "valid": True}


def _inputs(item: Listed) -> list[Path]:
    """The files a spec's results depend on: the spec, its data, its custom template, its steps lock."""
    paths = [item.source.root / item.source.rel] if item.source.rel else []
    p = item.parsed
    if p is not None:
        paths.append(p.data_path)
        if p.spec.prompt.template is not None:
            paths.append(p.source.base_dir / p.spec.prompt.template)
        paths.append(p.lock_path)
    return paths


def changed_specs(proj: Any, listed: list[Listed], rev: str) -> dict[str, str]:
    """Spec display name -> 'added' or 'modified', for the specs whose inputs differ from git revision ``rev``.

    Blob ids are compared (``git ls-tree`` at ``rev`` against ``git hash-object`` of the working tree), so
    uncommitted edits count and binary data files work.
    """
    from geval_spec.spec.project import git

    root: Path = proj.root
    if git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}") is None:
        raise InputError(problems=[Problem(f"--changed-since {rev!r}: not a git revision of {root}",
                                           hint="in CI, fetch the base branch first (actions/checkout with "
                                                "fetch-depth: 0)")])
    out: dict[str, str] = {}
    for item in listed:
        rels = sorted({_rel(root, path) for path in _inputs(item)})
        listing = git(root, "ls-tree", "-r", "-z", rev, "--", *rels) or ""
        before = {entry.split("\t", 1)[1]: entry.split()[2] for entry in listing.split("\0") if "\t" in entry}
        present = [rel for rel in rels if (root / rel).is_file()]
        hashed = (git(root, "hash-object", "--", *present) or "").split() if present else []
        now = dict(zip(present, hashed))
        spec_rel = _rel(root, root / item.source.rel) if item.source.rel else None
        if spec_rel is not None and spec_rel not in before:
            out[item.source.display] = "added"
        elif before != now:
            out[item.source.display] = "modified"
    return out


@app.command(short_help="Check specs, templates and data (no judge, no cost).")
@handled
def validate(refs: list[str] = typer.Argument(None, metavar="[REF]...", help="Specs to check (default: all).")) -> int:
    """Check specs, their templates and data; print every problem with file:line:col.

    Sends nothing and needs no key: everything that can be checked without a
    judge (YAML, keys and types, rubric, splits, template variables, data
    columns, ids, generated-steps locks). The problems of a file are printed
    together, each with a numbered excerpt, a stage at a time: YAML, keys and
    types first, then (once those are right) the checks across keys, the
    template and the data.

    \b
    Examples:
      geval-spec validate                          every spec in specs/
      geval-spec validate summary-consistency      one spec, by name
      geval-spec validate specs/new.yaml summary-consistency@HEAD~1

    \b
    Exit codes:
      0  every spec is valid (warnings may be printed)
      2  at least one error, printed as file:line:col with the key
    """
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


@app.command(short_help="Print the JSON Schema of a spec file.")
@handled
def schema(fmt: Literal["json", "markdown"] = typer.Option("json", "--format",
                                                           help="json, or markdown for the key reference.")) -> int:
    """Print the JSON Schema of a spec file (the same as schemas/geval-spec.schema.json).

    Editors with the YAML language server use it through the first line of a
    spec: # yaml-language-server: $schema=../schemas/geval-spec.schema.json

    \b
    Examples:
      geval-spec schema > schemas/geval-spec.schema.json
      geval-spec schema --format markdown              the key reference

    \b
    Exit codes:
      0    printed
      141  the reader closed the pipe before the schema was written (| head)
    """
    from geval_spec.spec.jsonschema import reference_markdown, schema_text

    write_stdout(schema_text() if fmt == "json" else reference_markdown())
    return EXIT_OK


@app.command(short_help="Print the exact messages a judge receives.")
@handled
def render(
    ref: str = typer.Argument(..., help="A spec REF."),
    case: Optional[str] = typer.Option(None, "--case", help="Case id (default: the first case)."),
    fmt: Literal["text", "json"] = typer.Option("text", "--format",
                                                help="text, or json for the exact request bodies."),
) -> int:
    """Print the exact messages a judge receives for one case.

    Sends nothing. The text form shows each message and the share of the
    prompt that is the same for every case (cacheable by providers); --format
    json prints the exact request bodies with their hashes.

    \b
    Examples:
      geval-spec render summary-consistency
      geval-spec render summary-consistency --case library-sundays-b
      geval-spec render summary-consistency@v1 --format json

    \b
    Exit codes:
      0  printed
      2  the spec, its data or its template is invalid, or no such case
    """
    follow_ref(ref)
    from geval_spec.runner.validate import preview
    from geval_spec.spec.load import load_spec

    shown = preview(load_spec(project().resolve(ref)), case)
    requests = shown.plan.requests
    if fmt == "json":
        out = [{"hash": r.hash, "case_id": r.case_id, "judge": r.judge, "sample": r.sample, "purpose": r.purpose,
                "body": r.body} for r in requests]
        write_stdout(safe(json.dumps(out, indent=2, ensure_ascii=False)) + "\n")
        return EXIT_OK
    s = shown.parsed.spec
    echo(f"# {s.name} v{s.version} | case {shown.case_id} | {len(requests)} request(s) | "
         f"judge(s): {', '.join(j.label for j in s.panel) or 'none yet (run --model gives one)'}")
    share = 100.0 * shown.static_tokens / shown.total_tokens if shown.total_tokens else 0.0
    echo(f"# static prefix: {shown.static_tokens} of {shown.total_tokens} prompt tokens ({share:.1f}%), "
         "identical for every case")
    for rendered in shown.plan.rendered[shown.case_id]:
        for m in rendered.messages:
            echo(f"--- {m.role} ---")
            echo(m.content)
    return EXIT_OK
