"""The report's estimate of the human-scale mean from a few labels, and ``label-sample``.

The worked example (``test_worked_example``), six cases, a rubric 1..5 judge
and humans on 0..1 (``data.human_scale``), estimate.min_labels 2:

    case  judge  on the human scale (judge - 1) / 4  human
    c0    5      1.0                                 0.75
    c1    3      0.5                                 0.5
    c2    3      0.5                                 0.25
    c3    1      0.0                                 0.0
    c4    5      1.0                                 (unlabelled)
    c5    3      0.5                                 (unlabelled)

n = 4 labelled, N = 2 unlabelled.

- judge-only: the judge's mean over all six, (1 + .5 + .5 + 0 + 1 + .5) / 6 = 0.58333.
- human-only: mean(Y) = 1.5 / 4 = 0.375; var(Y) with divisor n - 1: deviations
  .375, .125, -.125, -.375, squares summing to .3125, / 3 = .104167; se =
  sqrt(.104167 / 4) = .161374; t(0.975, 3 df) = 3.182446, so the interval is
  .375 +- .513565 = [-0.13857, 0.88857].
- lambda (PPI++): Cov(Y, f) over the labelled pairs, divisor n: f deviations
  .5, 0, 0, -.5 against Y's .375, .125, -.125, -.375 give .375 / 4 = .09375.
  Var(f) over all six, divisor 5: mean .58333, squared deviations summing to
  .708333, / 5 = .141667. lambda = .09375 / ((1 + 4/2) * .141667) = 0.220588.
- PPI point: lambda mean(f~) + mean(Y - lambda f) = .220588 * .75 + (.375 -
  .220588 * .5) = 0.430147.
- PPI variance: lambda^2 var(f~) / N with var(f~) = .125 (divisor N - 1) gives
  .048659 * .125 / 2 = .003041; the rectifier Y - lambda f = .529412, .389706,
  .139706, 0 has mean .264706 and sample variance .171388 / 3 = .057129, / 4 =
  .014282. Sum .017323, se .131619, half-width 3.182446 * .131619 = .418870:
  [0.01128, 0.84902].
- effective_labels = n * var_human_only / var_ppi = 4 * .026042 / .017323 = 6.0.
- labels_needed for a half-width of 0.2: the half-width at m labels is
  t(m - 1 df) * sqrt(4 * .017323 / m): 0.2023 at m = 9, 0.1883 at m = 10, so 10.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import cli
from import_helpers import import_lines, import_scores, write_project

from geval_spec.analysis.estimate import student_t
from geval_spec.analysis.labelsample import allocate
from geval_spec.analysis.ppi import ppi_mean

FAST = "bootstrap: {draws: 100, seed: 1}\ncalibration: {threshold: -1, min_validity: 0}\n"


def _report(root: Path, fmt: str = "json", name: str = "p") -> str:
    res = cli("report", name, "--format", fmt, "--out", "-", "--exit-zero", cwd=root)
    assert res.code == 0, res.err
    return res.out


def _estimate(root: Path, name: str = "p") -> dict[str, Any]:
    return json.loads(_report(root, name=name))["estimate"]


def _rows(humans: list[float | None], systems: list[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    for i, h in enumerate(humans):
        row: dict[str, Any] = {"id": f"c{i}", "doc": f"d{i}", "human": h}
        if systems is not None:
            row["sys"] = systems[i]
        rows.append(row)
    return rows


def test_worked_example(tmp_path: Path) -> None:
    rest = FAST + "estimate: {min_labels: 2, target_halfwidth: 0.2}\n"
    write_project(tmp_path, _rows([0.75, 0.5, 0.25, 0.0, None, ""]), rest)
    text = (tmp_path / "specs" / "p.yaml").read_text().replace("  human: human\n",
                                                               "  human: human\n  human_scale: {min: 0, max: 1}\n")
    (tmp_path / "specs" / "p.yaml").write_text(text)
    import_scores(tmp_path, {"c0": 5, "c1": 3, "c2": 3, "c3": 1, "c4": 5, "c5": 3}, "run")
    e = _estimate(tmp_path)
    assert (e["method"], e["level"], e["labelled"], e["unlabelled"], e["excluded_invalid"]) == ("ppi++", 0.95, 4, 2, 0)
    o = e["overall"]
    assert o["judge_only"] == {"value": 0.5833}
    assert o["human_only"] == {"value": 0.375, "ci_low": -0.1386, "ci_high": 0.8886}
    assert o["ppi"] == {"value": 0.4301, "ci_low": 0.0113, "ci_high": 0.849}
    assert o["lambda"] == 0.2206 and o["effective_labels"] == 6.0 and o["labels_needed"] == 10
    assert "systems" not in e and "differences" not in e and e["warnings"] == []


@pytest.mark.parametrize("where", ["estimate", "bootstrap"])
def test_a_level_nearer_1_than_double_precision_resolves_is_refused_at_its_line(tmp_path: Path, where: str) -> None:
    """0.9999999999999999 is below 1: validate passed it, and report and audit exited 70 (0.5 + level / 2 rounds
    to 1.0, where the normal quantile is undefined; Student's t loses its tail to rounding well before that).
    Levels are refused above 0.9999, which still works end to end."""
    for level, ok in ((0.9999999999999999, False), (0.99991, False), (0.9999, True)):
        rest = (FAST.replace("seed: 1}", f"seed: 1, level: {level!r}}}") if where == "bootstrap" else FAST) + (
            f"estimate: {{min_labels: 2{', level: ' + repr(level) if where == 'estimate' else ''}}}\n")
        write_project(tmp_path, _rows([0.75, 0.5, 0.25, 0.0, None, ""]), rest)
        res = cli("validate", cwd=tmp_path)
        if not ok:
            line = next(i for i, text in enumerate((tmp_path / "specs" / "p.yaml").read_text().splitlines(), 1)
                        if text.startswith(where))
            assert res.code == 2 and f"p.yaml:{line}:" in res.err and "0.9999" in res.err, res.err
            continue
        assert res.code == 0, res.err
        import_scores(tmp_path, {"c0": 5, "c1": 3, "c2": 3, "c3": 1, "c4": 5, "c5": 3}, "run")
        e = _estimate(tmp_path)
        assert e["level"] == level and e["overall"]["ppi"]["ci_low"] < e["overall"]["ppi"]["value"]
        assert cli("audit", "p", "--out", "-", cwd=tmp_path).code in (0, 1)


def test_with_no_label_yet_the_human_scale_is_the_rubrics_and_the_report_says_so(tmp_path: Path) -> None:
    """Before any label the estimate used a 0..1 "human scale" no one had named: a judge mean of 3 on 1..5 was
    reported as 0.500."""
    write_project(tmp_path, _rows([None] * 4), FAST + "estimate: {min_labels: 2}\n")
    import_scores(tmp_path, {"c0": 2, "c1": 3, "c2": 3, "c3": 4}, "run")
    e = _estimate(tmp_path)
    assert e["overall"]["judge_only"] == {"value": 3.0} and e["labelled"] == 0
    assert "on the human scale 1..5" in _report(tmp_path, fmt="md")
    notes = json.loads(_report(tmp_path))["warnings"]
    assert any("no case has a human score and data.human_scale is not set" in n for n in notes), notes


def test_unlabelled_is_null_empty_or_absent(tmp_path: Path) -> None:
    """The data contract: a human value that is null, "" or missing from the row leaves the case unlabelled."""
    rows = _rows([1, 2, 3, 4, None, "", 5])
    del rows[6]["human"]
    write_project(tmp_path, rows, FAST + "estimate: {min_labels: 2}\n")
    res = cli("validate", cwd=tmp_path)
    assert res.code == 0 and "3 case(s) have no human score" in res.err
    import_scores(tmp_path, {f"c{i}": s for i, s in enumerate([1, 2, 4, 4, 5, 3, 2])}, "run")
    report = json.loads(_report(tmp_path))
    assert report["cases"]["labelled"] == 4 and report["correlation"]["all"]["dataset"]["n"] == 4
    assert (report["estimate"]["labelled"], report["estimate"]["unlabelled"]) == (4, 3)
    assert "Calibration uses the 4 labelled of 7 cases" in _report(tmp_path, "md")


def test_noise_judge_gets_lambda_zero_and_the_human_only_interval() -> None:
    """A judge with no covariance with the labels is not used: lambda 0, the PPI interval is the labels' own.

    With lambda = 0 the judge-only term lambda^2 var(f~)/N (the finite-N term) vanishes, so the two
    intervals agree exactly; an anti-correlated judge is clipped to 0 the same way.
    """
    y = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.2, 0.8, 0.2, 0.8])
    f = np.array([0.0, 0.0, 1.0, 1.0, 0.3, 0.3, 0.7, 0.7, 0.5, 0.5, 0.9, 0.9])  # Cov(y, f) = 0 exactly
    rng = np.random.default_rng(3)
    for judge in (f, 1 - y + 0.01 * rng.standard_normal(y.size)):
        est = ppi_mean(y, judge, rng.uniform(size=50), t_quantile=student_t)
        assert est.lam == pytest.approx(0, abs=1e-12)  # 0 up to the rounding of Cov(y, f)
        assert est.value == pytest.approx(np.mean(y))
        assert (est.ci_low, est.ci_high) == pytest.approx((est.human_only.ci_low, est.human_only.ci_high), abs=1e-9)
        assert est.effective_labels == pytest.approx(y.size)


def test_per_system_estimates_and_differences(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    systems = ["a"] * 30 + ["b"] * 30 + ["c"] * 30
    truth = np.concatenate([rng.integers(1, 4, 30), rng.integers(2, 6, 30), rng.integers(3, 6, 30)]).astype(float)
    labelled = {i for s in range(3) for i in range(30 * s, 30 * s + 12)}
    humans = [float(truth[i]) if i in labelled else None for i in range(90)]
    write_project(tmp_path, _rows(humans, systems), FAST, system=True)
    import_scores(tmp_path, {f"c{i}": float(np.clip(truth[i] + rng.integers(-1, 2), 1, 5)) for i in range(90)},
                  "run")
    e = _estimate(tmp_path)
    assert list(e["systems"]) == ["a", "b", "c"] and e["labelled"] == 36 and e["unlabelled"] == 54
    for cell in e["systems"].values():
        assert cell["labelled"] == 12 and cell["unlabelled"] == 18
        assert cell["ppi"]["ci_low"] < cell["ppi"]["value"] < cell["ppi"]["ci_high"]
        assert cell["human_only"]["ci_low"] is not None and 0 <= cell["lambda"] <= 1
    assert [(d["a"], d["b"]) for d in e["differences"]] == [("a", "b"), ("a", "c"), ("b", "c")]
    for d in e["differences"]:
        want = e["systems"][d["b"]]["ppi"]["value"] - e["systems"][d["a"]]["ppi"]["value"]
        assert d["value"] == pytest.approx(want, abs=2e-4) and d["ci_low"] < d["value"] < d["ci_high"]
    md = _report(tmp_path, "md")
    assert "## Estimate on the human scale" in md and "| system b | 12 | 18 |" in md
    assert "3 of 3 pairs have an interval" in md


def test_warnings_too_few_labels_equal_labels_and_invalid_judgments(tmp_path: Path) -> None:
    systems = ["a"] * 14 + ["b"] * 14 + ["c"] * 14
    humans: list[float | None] = []
    for s in range(3):
        for i in range(14):
            if s == 0:
                humans.append(float(i % 5 + 1) if i < 12 else None)  # a: 12 labels, varied
            elif s == 1:
                humans.append(3.0 if i < 12 else None)  # b: 12 labels, all equal
            else:
                humans.append(float(i % 5 + 1) if i < 4 else None)  # c: 4 labels
    write_project(tmp_path, _rows(humans, systems), FAST, system=True)
    lines: list[dict[str, Any]] = [{"case_id": f"c{i}", "score": float(i % 5 + 1)} for i in range(42)]
    for i in (13, 27, 41):
        lines[i] = {"case_id": f"c{i}", "error": "judge call failed"}
    import_lines(tmp_path, lines, "run")
    e = _estimate(tmp_path)
    assert e["excluded_invalid"] == 3 and e["labelled"] == 28
    assert e["systems"]["a"]["ppi"]["ci_low"] is not None
    assert e["systems"]["b"]["ppi"]["ci_low"] is None and e["systems"]["b"]["human_only"]["ci_low"] is None
    assert e["systems"]["c"]["ppi"]["value"] is not None and e["systems"]["c"]["ppi"]["ci_low"] is None
    text = " | ".join(e["warnings"])
    assert "3 of 42 cases (7.1%) have no valid judgment" in text and "may be biased" in text
    assert "fewer than estimate.min_labels (10) labelled cases, so no interval, for system c (4)" in text
    assert "system b: all 12 labels are equal (3)" in text
    assert [d["ci_low"] for d in e["differences"]] == [None, None, None]


def test_fully_labelled_data_has_no_estimate(tmp_path: Path) -> None:
    write_project(tmp_path, _rows([1, 2, 3, 4, 5, 4]), FAST)
    import_scores(tmp_path, {f"c{i}": s for i, s in enumerate([1, 2, 3, 4, 5, 5])}, "run")
    assert "estimate" not in json.loads(_report(tmp_path))
    assert "Estimate" not in _report(tmp_path, "md") and "Calibration uses the" not in _report(tmp_path, "md")


def test_report_formats_carry_the_estimate_and_are_deterministic(tmp_path: Path) -> None:
    humans = [float(i % 5 + 1) if i % 2 == 0 else None for i in range(40)]
    write_project(tmp_path, _rows(humans), FAST + "estimate: {target_halfwidth: 0.5}\n")
    import_scores(tmp_path, {f"c{i}": float((i + i // 7) % 5 + 1) for i in range(40)}, "run")
    first = {fmt: _report(tmp_path, fmt) for fmt in ("json", "md", "html")}
    assert first == {fmt: _report(tmp_path, fmt) for fmt in ("json", "md", "html")}
    e = json.loads(first["json"])["estimate"]
    assert e["target_halfwidth"] == 0.5 and isinstance(e["overall"]["labels_needed"], int)
    assert "Calibration uses the 20 labelled of 40 cases" in first["md"]
    assert "| all cases | 20 | 20 |" in first["md"]
    assert "Estimated human-scale mean" in first["html"] and first["html"].count("<svg") >= 3


@pytest.mark.parametrize(("block", "line", "message"), [
    ("estimate: {level: 1.5}", 25, "must be <= 0.9999"),
    ("estimate: {level: 0}", 25, "must be > 0"),
    ("estimate: {target_halfwidth: 0}", 25, "must be > 0"),
    ("estimate: {min_labels: 1}", 25, "must be >= 2"),
    ("estimate:\n  target_halfwidth: 5", 26, "larger than the whole human scale (1..5, data.human_scale)"),
])
def test_validate_errors_point_at_the_line(tmp_path: Path, block: str, line: int, message: str) -> None:
    write_project(tmp_path, _rows([1, 2, None]), FAST + block + "\n")
    text = (tmp_path / "specs" / "p.yaml").read_text().replace("  human: human\n",
                                                               "  human: human\n  human_scale: {min: 1, max: 5}\n")
    (tmp_path / "specs" / "p.yaml").write_text(text)
    res = cli("validate", cwd=tmp_path)
    assert res.code == 2 and "Traceback" not in res.err
    assert f"specs/p.yaml:{line}:" in res.err and message in res.err, res.err


def test_target_wider_than_the_labels_range_without_a_scale(tmp_path: Path) -> None:
    write_project(tmp_path, _rows([1, 2, 3, None]), FAST + "estimate: {target_halfwidth: 2.5}\n")
    res = cli("validate", cwd=tmp_path)
    assert res.code == 2 and "the range of the human scores" in res.err
    import_scores(tmp_path, {"c0": 1, "c1": 2, "c2": 3, "c3": 4}, "run")
    res = cli("report", "p", "--out", "-", cwd=tmp_path)
    assert res.code == 2 and "estimate.target_halfwidth" in res.err and "Traceback" not in res.err


def _sample(root: Path, *args: str) -> list[dict[str, str]]:
    res = cli("label-sample", "p", *args, "--out", "-", cwd=root)
    assert res.code == 0, res.err
    return list(csv.DictReader(io.StringIO(res.out)))


def test_label_sample(tmp_path: Path) -> None:
    systems = ["s1"] * 40 + ["s2"] * 20 + ["s10"] * 10 + ["s3"] * 30
    humans = [1.0 if i % 10 == 0 else None for i in range(100)]  # 10 labelled, 90 unlabelled
    write_project(tmp_path, _rows(humans, systems), FAST, system=True)
    rows = _sample(tmp_path, "--n", "30", "--seed", "4")
    assert list(rows[0]) == ["id", "doc", "sys", "source", "candidate", "human"]
    assert all(r["human"] == "" for r in rows) and len({r["id"] for r in rows}) == 30
    assert not {r["id"] for r in rows} & {f"c{i}" for i in range(0, 100, 10)}  # only unlabelled cases
    counts = {s: sum(r["sys"] == s for r in rows) for s in ("s1", "s2", "s3", "s10")}
    assert counts == {"s1": 12, "s2": 6, "s3": 9, "s10": 3}  # 36, 18, 27 and 9 unlabelled: 30 in proportion
    assert rows == _sample(tmp_path, "--n", "30", "--seed", "4")
    assert rows != _sample(tmp_path, "--n", "30", "--seed", "5")
    assert [r["id"] for r in rows] == sorted((r["id"] for r in rows), key=lambda x: int(x[1:]))  # data order
    res = cli("label-sample", "p", "--n", "5", cwd=tmp_path)
    assert res.code == 0 and (tmp_path / "reports" / "p" / "label-sample.csv").is_file()
    assert "5 of 90 unlabelled cases, seed 0" in res.out


@pytest.mark.parametrize(("args", "message"), [
    (("p", "--n", "0"), "--n must be at least 1"),
    (("p", "--n", "91"), "--n 91 is more than the 90 unlabelled case(s)"),
    (("nosuch", "--n", "3"), "no spec named 'nosuch'"),
])
def test_label_sample_errors_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    write_project(tmp_path, _rows([1.0 if i % 10 == 0 else None for i in range(100)]), FAST)
    res = cli("label-sample", *args, "--out", "-", cwd=tmp_path)
    assert res.code == 2 and message in res.err and "Traceback" not in res.err


def test_allocation_is_proportional_with_largest_remainders() -> None:
    assert allocate(10, {"a": 5, "b": 5}) == {"a": 5, "b": 5}
    assert allocate(3, {"a": 1, "b": 1, "c": 1, "d": 1}) == {"a": 1, "b": 1, "c": 1, "d": 0}
    assert allocate(7, {"a": 10, "b": 3, "c": 1}) == {"a": 5, "b": 2, "c": 0}
    assert sum(allocate(17, {"x": 13, "y": 29, "z": 2}).values()) == 17


def test_t_quantile_matches_scipy() -> None:
    from scipy.special import stdtrit

    from geval_spec.analysis.student_t import t_quantile

    for level in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        for df in [*range(1, 40), 99, 1000, 1001, 5000, 10**6]:
            assert t_quantile(level, df) == pytest.approx(float(stdtrit(df, 0.5 + level / 2)), rel=1e-11)
    with pytest.raises(ValueError):
        t_quantile(1.0, 5)
    with pytest.raises(ValueError):
        t_quantile(0.95, 0)


def test_the_estimate_block_is_in_the_analysis_fingerprint_only() -> None:
    from geval_spec.spec.load import load_spec
    from geval_spec.spec.project import Project, SpecSource

    from conftest import ROOT

    src = Project(ROOT).resolve("summeval-consistency-40-labels")

    def fps(text: str) -> tuple[str, str]:
        parsed = load_spec(SpecSource(display=src.display, text=text, root=src.root, rel=src.rel))
        return parsed.judging_fp, parsed.analysis_fp

    base = fps(src.text)
    assert "target_halfwidth: 0.05" in src.text
    changed = fps(src.text.replace("target_halfwidth: 0.05", "target_halfwidth: 0.03"))
    assert changed[0] == base[0] and changed[1] != base[1]
    without = fps(src.text[:src.text.index("estimate:")])
    assert without[0] == base[0] and without[1] != base[1]


def test_a_carriage_return_in_a_label_sample_cell_keeps_the_case_one_row() -> None:
    """csv quotes only for its own line end: a lone \\r in a text or an id split the case's row in two for every
    reader, and the part after it, a row of its own, could start with a formula the ' guard never saw."""
    import csv
    import io

    from geval_spec.analysis.labelsample import LabelSample
    from geval_spec.output.labelsample import to_csv

    rows = (("a\rb", "Harmless text.\r=cmd|' /C calc'!A0", None), ("c", 'say "hi",\r\nbye', 2.0),
            ("=d", "plain", None))
    sample = LabelSample(columns=("id", "text", "human"), rows=rows, unlabelled=3, per_system=(), seed=0)
    text = to_csv(sample)
    read = list(csv.reader(io.StringIO(text, newline="")))
    assert read == [["id", "text", "human"], ["a\rb", "Harmless text.\r=cmd|' /C calc'!A0", ""],
                    ["c", 'say "hi",\r\nbye', "2.0"], ["'=d", "plain", ""]]
    assert text.endswith("\n") and "\r\n" not in text.replace('\r\nbye', "")


def test_label_sample_cells_a_spreadsheet_would_run_are_text(tmp_path: Path) -> None:
    """Case texts come from anyone's data; a cell like =HYPERLINK(...) ran as a formula where the labeller opened
    the CSV. Numbers stay numbers; the documented way back takes the ' off the ids."""
    from geval_spec.output.labelsample import _inert

    for cell, shown in (("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("@SUM(A1)", "'@SUM(A1)"),
                        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"), ("-2+3", "'-2+3"), ("\tx", "'\tx"),
                        ("-3", "-3"), ("+1.5e3", "+1.5e3"), ("-.5", "-.5"), ("plain", "plain"), ("", ""),
                        (3.0, 3.0), (None, None)):
        assert _inert(cell) == shown, cell
    write_project(tmp_path, _rows([None] * 4), FAST)
    data = tmp_path / "specs" / "data" / "p.jsonl"
    lines = [json.loads(line) for line in data.read_text().splitlines()]
    lines[0]["id"], lines[0]["src"] = "=1+1", "@SUM(A1:A9)"
    data.write_text("".join(json.dumps(row) + "\n" for row in lines))
    rows = _sample(tmp_path, "--n", "4")
    assert {r["id"] for r in rows} >= {"'=1+1"} and any(r["source"] == "'@SUM(A1:A9)" for r in rows)
