"""Samples and logprobs in the report: the invalid-sample rate, scoring.min_valid_samples, the ambiguous mass."""

from __future__ import annotations

import json

import pytest

from conftest import cli
from import_helpers import import_lines, write_project

ROWS = [{"id": f"c{i}", "doc": f"d{i // 2}", "human": 1 + i % 5} for i in range(20)]


def _samples_run(tmp_path):
    write_project(tmp_path, ROWS, "calibration: {threshold: 0.5, min_validity: 0}\nbootstrap: {draws: 200}\n",
                  method="samples", scoring="samples: 4")
    lines = [{"case_id": r["id"], "samples": [str(r["human"])] + (["x"] * 3 if i < 5 else [str(r["human"])] * 3)}
             for i, r in enumerate(ROWS)]
    return import_lines(tmp_path, lines, "s")


def test_samples_below_min_valid_samples_make_the_case_invalid(tmp_path):
    """One parsed sample of four used to make a valid case; the default minimum is half of scoring.samples."""
    run_id = _samples_run(tmp_path)
    r = json.loads(cli("report", run_id, "--format", "json", "--out", "-", cwd=tmp_path).out)
    assert r["cases"]["valid"] == 15 and r["cases"]["invalid"] == 5
    assert r["diagnostics"]["validity"]["reasons"] == {"fewer than 2 of 4 samples parsed (scoring.min_valid_samples)": 5}
    assert r["diagnostics"]["samples"] == {"judgments": 20, "samples": 80, "invalid_samples": 15,
                                           "invalid_rate": 0.1875, "min_valid_samples": 2, "below_minimum": 5}
    md = cli("report", run_id, "--out", "-", cwd=tmp_path).out
    assert ("15 of 80 samples did not parse (invalid-sample rate 0.188) over 20 judgments. A case needs 2 parsed "
            "samples (scoring.min_valid_samples); 5 had fewer and count as invalid.") in md


def test_samples_min_valid_samples_is_applied_at_analysis_time(tmp_path):
    """Changing scoring.min_valid_samples recomputes the report from the stored samples: no judge call."""
    _samples_run(tmp_path)
    spec = tmp_path / "specs" / "p.yaml"
    spec.write_text(spec.read_text().replace("samples: 4}", "samples: 4, min_valid_samples: 4}"))
    r = json.loads(cli("report", "p", "--format", "json", "--out", "-", cwd=tmp_path).out)
    assert r["cases"]["valid"] == 15 and r["diagnostics"]["samples"]["min_valid_samples"] == 4
    spec.write_text(spec.read_text().replace("min_valid_samples: 4}", "min_valid_samples: 1}"))
    r = json.loads(cli("report", "p", "--format", "json", "--out", "-", cwd=tmp_path).out)
    assert r["cases"]["valid"] == 20 and r["diagnostics"]["samples"]["below_minimum"] == 0


def test_logprobs_ambiguous_mass_is_reported(tmp_path):
    write_project(tmp_path, ROWS, "calibration: {threshold: 0.5}\nbootstrap: {draws: 200}\n", method="logprobs",
                  scoring="fallback: none")
    spec = tmp_path / "specs" / "p.yaml"
    spec.write_text(spec.read_text().replace("judge: {model: openai/judge-small}",
                                             "judge: {model: openai/judge-small, top_logprobs: 5}"))
    # an imported distribution holds on-scale keys only (an off-scale key is refused); mass short of 1 is off-scale
    lines = [{"case_id": r["id"], "distribution": {str(r["human"]): 0.8 if i == 3 else 1.0}} for i, r in enumerate(ROWS)]
    run_id = import_lines(tmp_path, lines, "d")
    r = json.loads(cli("report", run_id, "--format", "json", "--out", "-", cwd=tmp_path).out)
    assert r["diagnostics"]["logprobs"] == {"judgments": 20, "ambiguous_mass_mean": 0.0, "ambiguous_mass_max": 0.0,
                                            "valid_mass_mean": 0.99, "valid_mass_min": 0.8}
    assert "### Logprobs" in cli("report", run_id, "--out", "-", cwd=tmp_path).out


def test_logprobs_ambiguous_mass_mean_and_maximum():
    from geval_spec.analysis.diagnostics import logprobs_summary
    from geval_spec.judge.types import Details, Judgment

    def j(amb: float | None, mass: float) -> Judgment:
        return Judgment(case_id="c", judge="j", method="logprobs", score=3.0, valid=True, valid_mass=mass,
                        details=Details(ambiguous_mass=amb))

    block = logprobs_summary([j(0.1, 0.9), j(0.3, 0.7), j(None, 1.0),
                              Judgment.invalid("c", "j", "logprobs", "no score")])
    assert block is not None and block.judgments == 3
    assert block.ambiguous_mass_mean == pytest.approx(0.1333) and block.ambiguous_mass_max == 0.3
    assert block.valid_mass_mean == pytest.approx(0.8667) and block.valid_mass_min == 0.7
    assert logprobs_summary([j(0.1, 0.9)][:0]) is None
