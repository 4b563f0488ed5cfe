"""Seed 003's worked examples and validation rules."""

from __future__ import annotations

import numpy as np
import pytest

from geval_spec import audit_eval_split, paired_bootstrap, summarize_eval
from geval_spec.analysis.hygiene import paired_resample


def test_audit_example():
    rows = [dict(id="e", group="g", split="examples"), dict(id="d", group="g", split="dev"),
            dict(id="t", group="h", split="test")]
    r = audit_eval_split(rows)
    assert r["overlapping_groups"] == {"g": ["dev", "examples"]}
    assert r["missing_splits"] == []
    assert r["counts"] == {"examples": 1, "dev": 1, "test": 1}
    assert list(r["counts"]) == ["examples", "dev", "test"]


def test_audit_duplicates_and_missing():
    rows = [dict(id="b", group="g", split="dev"), dict(id="b", group="g", split="dev"),
            dict(id="a", group="h", split="dev"), dict(id="a", group="i", split="dev")]
    r = audit_eval_split(rows)
    assert r["duplicate_ids"] == ["a", "b"] and r["missing_splits"] == ["examples", "test"]
    assert r["overlapping_groups"] == {}


@pytest.mark.parametrize("bad", [[], [dict(id="a", group="g")], [dict(id="a", group="g", split="train")],
                                 [dict(id="", group="g", split="dev")], [dict(id="a" * 101, group="g", split="dev")],
                                 [dict(id=1, group="g", split="dev")], "rows",
                                 [dict(id="a", group="g", split="dev", extra=1)],
                                 [dict(id=str(i), group="g", split="dev") for i in range(1001)]])
def test_audit_rejects(bad):
    with pytest.raises(ValueError):
        audit_eval_split(bad)


def test_summarize_example():
    rows = [dict(id=str(i), group="direct", valid=True, correct=i < 3) for i in range(4)]
    rows.append(dict(id="rare", group="rare", valid=False, correct=False))
    r = summarize_eval(rows)
    o = r["overall"]
    assert (o["validity"], o["accuracy"], o["accuracy_when_valid"]) == (0.8, 0.6, 0.75)
    assert r["macro_group_accuracy"] == 0.375
    assert list(r["groups"]) == ["direct", "rare"]
    assert r["groups"]["rare"] == {"n": 1, "validity": 0.0, "accuracy": 0.0, "accuracy_when_valid": None}


@pytest.mark.parametrize("bad", [
    [dict(id="a", group="g", valid=False, correct=True)],
    [dict(id="a", group="g", valid=1, correct=False)],
    [dict(id="a", group="g", valid=True, correct=True), dict(id="a", group="g", valid=True, correct=True)],
    [dict(id="a", group="", valid=True, correct=True)],
    [dict(id="a", group="g", valid=True)],
    [],
])
def test_summarize_rejects(bad):
    with pytest.raises(ValueError):
        summarize_eval(bad)


def test_paired_bootstrap_example():
    a = np.array([1, 1, 0, 0, 0, 0], bool)
    b = np.array([1, 0, 1, 1, 0, 0], bool)
    d = b.astype(float) - a.astype(float)
    assert d[[2, 2, 3, 0, 4, 5]].mean() == 0.5
    r = paired_bootstrap(a, b, 1000, 7)
    assert round(r["difference"], 4) == 0.1667
    assert (round(r["low"], 4), round(r["high"], 4)) == (-0.5, 0.6667)


@pytest.mark.parametrize("args", [
    ([True], [True], 1000, 7), ([1, 0], [1, 0], 1000, 7), ([True, False], [True], 1000, 7),
    ([True, False], [True, False], 99, 7), ([True, False], [True, False], 5001, 7),
    ([True, False], [True, False], 1000.0, 7), ([True, False], [True, False], True, 7),
    ([True, False], [True, False], 1000, -1), ([True, False], [True, False], 1000, 2**32),
    ([[True, False]], [[True, False]], 1000, 7),
])
def test_paired_bootstrap_rejects(args):
    a, b, draws, seed = args
    with pytest.raises(ValueError):
        paired_bootstrap(np.asarray(a), np.asarray(b), draws, seed)


def test_chunking_does_not_change_the_stream():
    rng = np.random.default_rng(3)
    a = rng.random(700) < 0.5
    b = rng.random(700) < 0.6
    whole = paired_bootstrap(a, b, 5000, 11)
    d = b.astype(float) - a.astype(float)
    rng2 = np.random.default_rng(11)
    idx = rng2.integers(0, 700, size=(5000, 700))
    lo, hi = np.quantile(d[idx].mean(axis=1), [0.025, 0.975])
    assert (whole["low"], whole["high"]) == (float(lo), float(hi))


def test_group_resampling_keeps_groups_together():
    delta = np.array([1.0, 1.0, 0.0, 0.0])
    groups = ["a", "a", "b", "b"]
    _, low, high, samples = paired_resample(delta, 500, 1, groups=groups)
    assert set(np.round(samples, 6)) <= {0.0, 0.5, 1.0}


def test_paired_bootstrap_with_whole_groups():
    a = np.array([1, 1, 0, 0, 0, 0], bool)
    b = np.array([1, 0, 1, 1, 0, 0], bool)
    r = paired_bootstrap(a, b, 1000, 7, groups=["g1", "g1", "g2", "g2", "g3", "g3"])
    assert round(r["difference"], 4) == 0.1667
    # groups g1 (d = 0, -1), g2 (1, 1), g3 (0, 0): a resample's mean is one of a few values
    assert r["low"] >= -0.5 and r["high"] <= 1.0 and r["low"] < r["difference"] < r["high"]
    with pytest.raises(ValueError):
        paired_bootstrap(a, b, 1000, 7, groups=["g1"])


def test_correlations_equal_scipy():
    from scipy import stats as sp

    from geval_spec.analysis.correlation import correlation

    rng = np.random.default_rng(4)
    for n in (3, 7, 50, 400):
        for _ in range(20):
            x = np.round(rng.random(n) * 5) if n % 2 else rng.random(n)  # with and without ties
            y = x + rng.normal(0, 0.5, n)
            y = np.round(y, 1)
            if np.ptp(x) == 0 or np.ptp(y) == 0:
                continue
            assert correlation(x, y, "spearman") == pytest.approx(sp.spearmanr(x, y).statistic, abs=1e-12)
            assert correlation(x, y, "pearson") == pytest.approx(sp.pearsonr(x, y).statistic, abs=1e-12)
            assert correlation(x, y, "kendall") == pytest.approx(sp.kendalltau(x, y).statistic, abs=1e-12)
