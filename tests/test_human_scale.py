"""The human scale: declared, or the labels' range; labels that are all the same; a scale too wide to subtract on."""

from __future__ import annotations

import json

from conftest import cli
from import_helpers import import_scores, write_project


def test_labels_that_are_all_the_same_are_placed_on_the_judge_s_scale(tmp_path):
    """Without data.human_scale the labels' range is the scale; with one value it has no range, and the raw labels
    (4) were compared with judge scores on 0..1: gaps of 3-4 'on a 0..1 scale', no case correct at the pass mark."""
    rows = [{"id": f"c{i}", "doc": f"d{i}", "human": 4} for i in range(10)]
    write_project(tmp_path, rows, "calibration: {pass_mark: 0.25}\nbootstrap: {draws: 100, seed: 1}\n")
    import_scores(tmp_path, {f"c{i}": 1 + i % 5 for i in range(10)}, "j")
    res = cli("report", "p", "--format", "json", "--out", "-", "--exit-zero", cwd=tmp_path)
    assert res.code == 0, res.err
    report = json.loads(res.out)
    assert any("every human score is 4" in w and "1..5" in w for w in report["warnings"])
    for row in report["disagreements"]:
        assert 0.0 <= row["human"] <= 1.0 and row["human"] == 0.75 and abs(row["gap"]) <= 1.0
    md = cli("report", "p", "--out", "-", "--exit-zero", cwd=tmp_path).out
    assert "every human score is 4" in md


def test_a_human_scale_too_wide_to_subtract_on_is_refused(tmp_path):
    rows = [{"id": f"c{i}", "doc": f"d{i}", "human": i} for i in range(4)]
    write_project(tmp_path, rows, "")
    spec = tmp_path / "specs" / "p.yaml"
    spec.write_text(spec.read_text().replace("  human: human\n", "  human: human\n  human_scale: {min: -1.7e308, "
                                                                  "max: 1.7e308}\n"))
    res = cli("validate", "p", cwd=tmp_path)
    assert res.code == 2 and "human_scale" in res.err and "1e+100" in res.err
