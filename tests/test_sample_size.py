"""Sample size: pairs counted at the gate's level, Kendall's scale, the half-width plan, the numbers in the docs."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from conftest import ROOT, cli
from import_helpers import write_project

from geval_spec.analysis.samplesize import required_n


def _audit(tmp_path, calibration: str) -> dict:
    rows = [{"id": f"c{i}", "doc": f"d{i // 4}", "sys": f"s{i % 5}", "human": 1 + i % 5} for i in range(200)]
    write_project(tmp_path, rows, f"calibration: {calibration}\n", system=True)
    res = cli("audit", "p", "--format", "json", "--out", "-", cwd=tmp_path)
    assert res.code == 0, res.err
    return json.loads(res.out)["sample_size"]


def test_sample_size_at_system_level_counts_systems(tmp_path):
    """5 systems and 200 cases used to be 'enough' for a system-level gate that needs 38 pairs."""
    ss = _audit(tmp_path, "{level: system, threshold: 0.8}")
    assert ss["required"] == 38 and ss["enough"] is False
    assert ss["unit"] == "systems" and ss["available_units"] == 5 and ss["available"] == 200
    md = cli("audit", "p", "--out", "-", cwd=tmp_path).out
    assert "38 systems; the all split has 5 systems: NOT enough to tell 0.8 from 0.5" in md


def test_sample_size_at_group_level_says_the_formula_does_not_apply(tmp_path):
    ss = _audit(tmp_path, "{level: group, threshold: 0.8}")
    assert ss["required"] is None and ss["enough"] is None and ss["precision"] is None
    assert ss["method"].startswith("not applicable at group level")


def test_sample_size_kendall_names_the_tau_scale(tmp_path):
    ss = _audit(tmp_path, "{metric: kendall, threshold: 0.8}")
    assert ss["required"] == 16 and ss["enough"] is True
    assert "0.5 and 0.8 are on Kendall's tau scale" in ss["method"] and "tau 0.5 is r 0.71" in ss["method"]


def test_sample_size_halfwidth_plan_matches_the_fisher_interval():
    """The n found gives a Fisher-z interval of half-width <= w at r, and n - 1 does not."""
    from scipy.stats import norm

    from geval_spec.analysis.samplesize import halfwidth_n

    z = norm.ppf(0.975)
    for metric in ("pearson", "spearman", "kendall"):
        for r in (-0.4, 0.0, 0.3, 0.69, 0.9):
            for w in (0.05, 0.1, 0.2):
                n = halfwidth_n(r, w, metric)

                def half(m: int) -> float:
                    var = (0.437 / (m - 4) if metric == "kendall" else
                           (1 + r * r / 2 if metric == "spearman" else 1.0) / (m - 3))
                    h = z * math.sqrt(var)
                    return (math.tanh(math.atanh(r) + h) - math.tanh(math.atanh(r) - h)) / 2

                assert half(n) <= w + 1e-12 < half(n - 1), (metric, r, w, n)
    assert halfwidth_n(0.691, 0.1, "spearman") == 135
    assert halfwidth_n(1.0, 0.1) is None and halfwidth_n(0.5, 1.0) is None


def test_sample_size_doc_numbers_match_the_formula():
    """docs/calibration.md once said 55 cases where the formula gives 55.02, so 56."""
    doc = (ROOT / "docs" / "calibration.md").read_text()
    text = " ".join(doc.split())
    from scipy.stats import norm

    k = ((norm.ppf(0.975) + norm.ppf(0.8)) / (math.atanh(0.8) - math.atanh(0.5))) ** 2
    assert "55 for Pearson" not in text
    spearman, pearson = required_n(0.8, 0.5, "spearman")[0], required_n(0.8, 0.5, "pearson")[0]
    assert f"(Spearman, 0.80 against 0.50) that is {spearman} cases" in text and spearman == 38
    assert f"Pearson needs {pearson}" in text and f"Kendall's tau {required_n(0.8, 0.5, 'kendall')[0]}" in text
    two_pearson, two_spearman = math.ceil(3 + 2 * k), math.ceil(3 + 2 * 1.32 * k)
    assert (two_pearson, two_spearman) == (56, 72)
    np.testing.assert_allclose(3 + 2 * k, 55.02, atol=0.005)
    assert f"{two_pearson} for Pearson, {two_spearman} for Spearman" in text
    from geval_spec.analysis.samplesize import halfwidth_n

    assert f"{halfwidth_n(0.8, 0.1, 'spearman')} cases at rho = 0.8" in text


def test_sample_size_halfwidth_option_plans_for_the_chosen_precision(tmp_path):
    from geval_spec.analysis.samplesize import halfwidth_n

    ss = _audit(tmp_path, "{threshold: 0.8}")
    assert ss["precision"] == {"halfwidth": 0.1, "conf": 0.95, "at": 0.8, "at_source": "threshold",
                               "required": 72, "enough": True,
                               "formula": "n = 3 + (1 + r^2/2) * (z_(1-a/2) / h)^2, h = (atanh(w) + asinh(w * "
                                          "cosh(2 atanh(r)) / sqrt(1 - w^2))) / 2"}
    res = cli("audit", "p", "--format", "json", "--halfwidth", "0.05", "--out", "-", cwd=tmp_path)
    p = json.loads(res.out)["sample_size"]["precision"]
    assert p["halfwidth"] == 0.05 and p["required"] == halfwidth_n(0.8, 0.05) == 269 and p["enough"] is False
