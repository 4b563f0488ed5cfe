"""``report``, ``sweep``, ``compare``, ``audit`` and ``label-sample``: the commands that analyse; none sends a request
(``compare --run`` excepted)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import typer

from geval_spec.cli.common import (DB_HELP, app, db_path, default_output, echo, echo_err, follow_ref, handled, kept,
                               project, write_out)
from geval_spec.cli.progress import ProgressView
from geval_spec.errors import EXIT_GATE, EXIT_OK, InputError, Problem

OUT_HELP = "Write here (default reports/<spec>/{name}); - prints to stdout."
HALFWIDTH_HELP = "Plan the cases needed for an interval of this half-width on the correlation scale."


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_")[:60] or "x"


@app.command()
@handled
def report(
    what: str = typer.Argument(..., metavar="RUN|REF", help="A run id, or a spec REF (its newest matching run)."),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.1, max=1.0,
                                                help="TCVA: re-aggregate stored verdicts at this temperature."),
    fmt: Literal["md", "json", "html", "all"] = typer.Option("md", "--format",
                                                             help="md, json, html, or all (the three files)."),
    out: Optional[Path] = typer.Option(None, "--out", help=OUT_HELP.format(name="report.<ext>")),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write the gate as JUnit XML."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when the gate fails."),
    halfwidth: float = typer.Option(0.1, "--halfwidth", min=0.01, max=0.99, help=HALFWIDTH_HELP),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> int:
    """Calibration report from stored judgments (sends nothing); exit 1 when the gate fails.

    Writes reports/<spec>/report.<ext> (or --out; --out - prints it).

    \b
    Examples:
      geval-spec report summary-consistency
      geval-spec report summary-consistency --format all --junit reports/junit.xml
      geval-spec report run_20261130104512a1b2c3 --format json --out -
      geval-spec report summeval-consistency --temperature 0.3

    \b
    Exit codes:
      0    the gate passed, or --exit-zero
      1    the gate failed
      2    unknown run or REF, no results database, invalid spec or arguments
      141  standard output closed before the report was written (--out - | head)
    """
    follow_ref(what)
    from geval_spec.analysis.calibration import build
    from geval_spec.analysis.resolve import load
    from geval_spec.files import prepare_output
    from geval_spec.output.html import to_html
    from geval_spec.output.jsonout import to_json
    from geval_spec.output.junit import to_junit
    from geval_spec.output.report import to_markdown
    from geval_spec.store.db import Store

    if fmt == "all" and out is not None:
        raise InputError(problems=[Problem("--format all writes three files into reports/<spec>/; "
                                           "--out takes one file, so give it with one format")])
    for path, kind in ((None if out is None or str(out) == "-" else out, "report"), (junit, "JUnit file")):
        if path is not None:
            prepare_output(path, kind, keep=kept(db))
    proj = project()
    with Store.open_existing(db_path(db)) as store:
        loaded = load(store, proj, what)
    spec = loaded.source.spec
    if out is None:  # the default files, every one of them before any is written
        for ext in (("md", "json", "html") if fmt == "all" else (fmt,)):
            default_output(proj.root / "reports" / spec.name / f"report.{ext}", "report")
    if temperature is not None and spec.scoring.method != "verdicts":
        raise InputError(problems=[Problem("--temperature re-aggregates TCVA verdicts; "
                                           f"{spec.name} uses method {spec.scoring.method}")])
    result = build(loaded, temperature=temperature, halfwidth=halfwidth)
    renderers = {"md": to_markdown, "json": to_json, "html": to_html}
    g = result.gate
    if out is not None and str(out) == "-":
        write_out(renderers["md" if fmt == "all" else fmt](result), out, out)
    else:
        echo(g.summary)
        for ext in (("md", "json", "html") if fmt == "all" else (fmt,)):
            written = write_out(renderers[ext](result), out, proj.root / "reports" / spec.name / f"report.{ext}")
            echo(f"wrote {written}")
    if junit is not None:
        wrote = f"wrote {write_out(to_junit(spec.name, g), junit, junit)}"
        if out is not None and str(out) == "-":  # stdout holds the report
            echo_err(wrote)
        else:
            echo(wrote)
    return EXIT_OK if g.passed or exit_zero else EXIT_GATE


@app.command()
@handled
def sweep(
    what: str = typer.Argument(..., metavar="RUN|REF", help="A run id or a spec REF."),
    fmt: Literal["md", "json"] = typer.Option("md", "--format", help="md or json."),
    out: Optional[Path] = typer.Option(None, "--out", help=OUT_HELP.format(name="sweep.<ext>")),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> int:
    """TCVA temperature sweep from stored verdicts: choose on dev, report on test. Sends nothing.

    \b
    Examples:
      geval-spec sweep summeval-consistency
      geval-spec sweep summeval-consistency --format json --out -

    \b
    Exit codes:
      0  written (or printed with --out -)
      2  no stored run, or a spec not using scoring.method verdicts
    """
    follow_ref(what)
    import json

    from geval_spec.analysis.resolve import load
    from geval_spec.analysis.sweep import sweep_report
    from geval_spec.files import prepare_output
    from geval_spec.output.report import sweep_markdown
    from geval_spec.store.db import Store

    if out is not None and str(out) != "-":
        prepare_output(out, "sweep", keep=kept(db))
    proj = project()
    with Store.open_existing(db_path(db)) as store:
        loaded = load(store, proj, what)
    default = proj.root / "reports" / loaded.source.spec.name / f"sweep.{fmt}"
    if out is None:
        default_output(default, "sweep")
    result = sweep_report(loaded)
    if fmt == "json":
        text = json.dumps(result.model_dump(mode="json"), indent=2) + "\n"
    else:
        text = "\n".join([f"# TCVA temperature sweep: {result.spec}, run {result.run}", "",
                          *sweep_markdown(result.block)]) + "\n"
    written = write_out(text, out, default)
    if written is not None:
        echo(f"wrote {written}")
    return EXIT_OK


@app.command()
@handled
def compare(
    a: str = typer.Argument(..., metavar="A", help="A run id or a spec REF (e.g. summary-consistency@v3)."),
    b: str = typer.Argument(..., metavar="B", help="A run id or a spec REF (e.g. summary-consistency)."),
    fmt: Literal["md", "json"] = typer.Option("md", "--format", help="md or json."),
    out: Optional[Path] = typer.Option(None, "--out", help=OUT_HELP.format(name="compare-A-B.<ext>")),
    margin: Optional[float] = typer.Option(None, "--margin", min=0.0, max=2.0,
                                           help="Regression margin, 0 to 2 as calibration.margin (default: B's)."),
    run_missing: bool = typer.Option(False, "--run", help="Run a spec REF that has no stored run yet."),
    rule: Literal["default", "strict"] = typer.Option(
        "default", "--rule", help="default: exit 1 when B is worse; strict: also when inconclusive (for CI)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> int:
    """Compare two spec versions or runs: spec diff, paired deltas with intervals, a verdict.

    The verdict places the paired interval of B - A of the gate's metric against 0 and -margin: better,
    not worse, inconclusive or worse (docs/comparing.md). Writes reports/<spec>/compare-A-B.<ext>.

    \b
    Examples:
      geval-spec compare summary-consistency@HEAD~1 summary-consistency
      geval-spec compare summary-consistency@v3 summary-consistency@v4 --format json --out -
      geval-spec compare summary-consistency@main summary-consistency --rule strict --margin 0.02 --run

    \b
    Exit codes:
      0    B is not shown worse (--rule strict: B is better or not worse)
      1    B is worse (--rule strict: also inconclusive or not comparable)
      2    unknown run or REF, no stored run for a REF (give --run), invalid arguments
      3    --run could not reach the judge
    """
    follow_ref(a)
    follow_ref(b)  # (the first spec file's project, when both are)
    from geval_spec.analysis.compare import compare as run_compare
    from geval_spec.analysis.compare import load_side
    from geval_spec.files import prepare_output
    from geval_spec.output.compare import to_markdown
    from geval_spec.output.jsonout import to_json

    if out is not None and str(out) != "-":
        prepare_output(out, "comparison", keep=kept(db))
    proj = project()
    path = db_path(db)
    sides = []
    for ref in (a, b):
        with ProgressView(ref) as view:
            sides.append(load_side(proj, path, ref, run_missing, on_progress=view.update, say=echo_err))
    default = proj.root / "reports" / sides[1].source.spec.name / f"compare-{_slug(a)}-{_slug(b)}.{fmt}"
    if out is None:
        default_output(default, "comparison")
    result = run_compare(sides[0], sides[1], margin=margin, rule=rule)
    text = to_json(result) if fmt == "json" else to_markdown(result)
    written = write_out(text, out, default)
    if written is not None:
        r = result.regression
        echo(f"change: {result.change.klass} ({result.change.meaning})")
        echo(f"{r.verdict}{' (REGRESSION)' if r.regressed else ''}, rule {r.rule}: {r.reason}")
        echo(f"wrote {written}")
    return EXIT_GATE if result.regression.fails else EXIT_OK


@app.command()
@handled
def audit(
    ref: str = typer.Argument(..., help="A spec REF."),
    fmt: Literal["md", "json"] = typer.Option("md", "--format", help="md or json."),
    out: Optional[Path] = typer.Option(None, "--out", help=OUT_HELP.format(name="audit.<ext>")),
    halfwidth: float = typer.Option(0.1, "--halfwidth", min=0.01, max=0.99, help=HALFWIDTH_HELP),
) -> int:
    """Splits (leakage), human agreement and sample size of a spec's data; needs no judge.

    \b
    Examples:
      geval-spec audit summary-consistency
      geval-spec audit summary-consistency --format json --out - | jq .sample_size

    \b
    Exit codes:
      0  written (or printed with --out -); findings are reported, not failed on
      2  invalid spec or data
    """
    follow_ref(ref)
    from geval_spec.analysis.audit import audit as run_audit
    from geval_spec.dataset.cases import read_cases
    from geval_spec.files import prepare_output
    from geval_spec.output.audit import to_markdown
    from geval_spec.output.jsonout import to_json
    from geval_spec.spec.load import load_spec

    if out is not None and str(out) != "-":
        prepare_output(out, "audit", keep=kept(None))
    proj = project()
    parsed = load_spec(proj.resolve(ref))
    default = proj.root / "reports" / parsed.name / f"audit.{fmt}"
    if out is None:
        default_output(default, "audit")
    result = run_audit(parsed.spec, read_cases(parsed), halfwidth=halfwidth)
    written = write_out(to_json(result) if fmt == "json" else to_markdown(result), out, default)
    if written is not None:
        echo(f"wrote {written}")
    return EXIT_OK


@app.command("label-sample")
@handled
def label_sample(
    ref: str = typer.Argument(..., help="A spec REF."),
    n: int = typer.Option(..., "--n", help="How many unlabelled cases to draw (at most the unlabelled count)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw: the same seed gives the same sample."),
    out: Optional[Path] = typer.Option(None, "--out", help=OUT_HELP.format(name="label-sample.csv")),
) -> int:
    """The unlabelled cases to label next, drawn at random, as a CSV for annotators; needs no judge.

    Uniform among the unlabelled cases of the spec's data, in proportion per system when data.system is set.
    The estimate (docs/estimate.md) is unbiased only for a random sample: do not pick the cases by hand.

    \b
    Examples:
      geval-spec label-sample summary-consistency --n 40
      geval-spec label-sample summary-consistency --n 40 --seed 7 --out to-label.csv

    \b
    Exit codes:
      0  written (or printed with --out -)
      2  invalid spec or data, an unknown REF, or --n below 1 or above the unlabelled count
    """
    follow_ref(ref)
    from geval_spec.analysis.labelsample import label_sample as draw
    from geval_spec.dataset.cases import read_cases
    from geval_spec.files import prepare_output
    from geval_spec.output.labelsample import to_csv
    from geval_spec.spec.load import load_spec

    if out is not None and str(out) != "-":
        prepare_output(out, "label sample", keep=kept(None))
    proj = project()
    parsed = load_spec(proj.resolve(ref))
    default = proj.root / "reports" / parsed.name / "label-sample.csv"
    if out is None:
        default_output(default, "label sample")
    sample = draw(parsed.spec, read_cases(parsed), n, seed)
    written = write_out(to_csv(sample), out, default)
    if written is not None:
        systems = ", ".join(f"{name}: {drawn} of {size}" for name, drawn, size in sample.per_system)
        echo(f"{len(sample.rows)} of {sample.unlabelled} unlabelled cases, seed {seed}"
             + (f" (per system {systems})" if systems else ""))
        echo(f"wrote {written}")
    return EXIT_OK
