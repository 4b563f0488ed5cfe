"""compare: spec versions in git, paired deltas, a constructed regression, determinism."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from conftest import ROOT, cli, git
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig


@pytest.fixture(scope="module")
def two_imports(tmp_path_factory):
    """The recorded SummEval verdicts, and the same verdicts shuffled across cases."""
    tmp = tmp_path_factory.mktemp("cmp")
    db = tmp / "r.duckdb"
    good = ROOT / "specs" / "data" / "tcva" / "summeval-consistency.verdicts.jsonl"
    lines = [json.loads(x) for x in good.read_text().splitlines()]
    payloads = [{k: v for k, v in x.items() if k != "case_id"} for x in lines]
    random.Random(5).shuffle(payloads)
    shuffled = tmp / "shuffled.jsonl"
    shuffled.write_text("\n".join(json.dumps({"case_id": x["case_id"], **p}) for x, p in zip(lines, payloads)) + "\n")
    a = cli("import", "summeval-consistency", str(good), "--db", str(db))
    b = cli("import", "summeval-consistency", str(shuffled), "--db", str(db))
    assert a.code == 0 and b.code == 0, a.err + b.err
    return db, a.out.strip().splitlines()[-1], b.out.strip().splitlines()[-1]


def test_shuffled_scores_are_a_regression(two_imports):
    db, good, bad = two_imports
    res = cli("compare", good, bad, "--format", "json", "--out", "-", "--db", str(db))
    assert res.code == 1, res.err
    c = json.loads(res.out)
    r = c["regression"]
    assert r["regressed"] is True and r["ci_high"] < 0 and r["split"] == "test"
    assert c["change"]["class"] == "metadata"  # same spec, same judging: only the judgments differ
    e = c["correlation"]["test"]["dataset"]["spearman"]
    assert e["b"] < e["a"] and e["difference"] == pytest.approx(e["b"] - e["a"], abs=2e-4)
    assert c["agreement"]["difference"] < 0 and c["moved"]
    # the other way round is an improvement, not a regression
    assert cli("compare", bad, good, "--out", "-", "--db", str(db)).code == 0


def test_identical_pair_difference_is_zero(two_imports):
    db, good, _ = two_imports
    res = cli("compare", good, good, "--format", "json", "--out", "-", "--db", str(db))
    assert res.code == 0
    c = json.loads(res.out)
    for levels in c["correlation"].values():
        for entry in levels.values():
            for metric in ("spearman", "pearson", "kendall"):
                e = entry[metric]
                assert e["difference"] == 0 and e["ci_low"] <= 0 <= e["ci_high"]
    assert c["agreement"]["difference"] == 0 and c["spec_diff"] == [] and c["moved"] == []


def test_compare_is_byte_identical(two_imports):
    db, good, bad = two_imports
    for fmt in ("md", "json"):
        first = cli("compare", good, bad, "--format", fmt, "--out", "-", "--db", str(db)).out
        assert first == cli("compare", good, bad, "--format", fmt, "--out", "-", "--db", str(db)).out


@pytest.mark.parametrize("margin", ["inf", "2.5", "-0.1"])
def test_a_margin_outside_0_to_2_is_refused_as_calibration_margin_is(two_imports, margin):
    """--margin inf called a drop of 0.56 "not worse" and wrote the margin as null in the JSON."""
    db, good, bad = two_imports
    res = cli("compare", good, bad, "--margin", margin, "--out", "-", "--db", str(db))
    assert res.code == 2 and "--margin" in res.err, res.err


def test_margin_turns_a_regression_into_noise(two_imports):
    db, good, bad = two_imports
    assert cli("compare", good, bad, "--margin", "0.9", "--out", "-", "--db", str(db)).code == 0


def test_versions_in_git_differing_in_aggregation_send_nothing(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=30, method="verdicts", client="openai-http")
        spec = root / "specs" / "demo.yaml"
        spec.write_text(spec.read_text().replace("scoring:\n  method: verdicts",
                                                 "scoring:\n  method: verdicts\naggregation: {temperature: 0.5}"))
        (root / ".gitignore").write_text(".geval/\nreports/\n")
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "v1")
        spec.write_text(spec.read_text().replace("version: 1", "version: 2").replace(
            "aggregation: {temperature: 0.5}", "aggregation: {temperature: 0.2}"))
        git(root, "commit", "-qam", "v2: stricter")
        # no stored run yet: exit 2 with the command that makes one
        res = cli("compare", "demo@v1", "demo@v2", cwd=root)
        assert res.code == 2 and "geval-spec run demo@v1" in res.err
        assert srv.state.total == 0
        assert cli("run", "demo@v1", cwd=root).code == 0
        sent = srv.state.total
        res = cli("compare", "demo@v1", "demo@v2", cwd=root)
        assert res.code in (0, 1), res.err
        assert srv.state.total == sent  # analysis only: the same judgments, re-aggregated
        assert "change: analysis" in res.out
        written = next((root / "reports" / "demo").glob("compare-demo_v1-demo_v2.md"))
        text = written.read_text()
        assert "-  aggregation:" not in text and "temperature: 0.2" in text and "temperature: 0.5" in text
        assert "## Spec diff" in text and "```diff" in text
        # HEAD~1 is v1
        res2 = cli("compare", "demo@HEAD~1", "demo", "--format", "json", "--out", "-", cwd=root)
        c = json.loads(res2.out)
        assert c["change"]["class"] == "analysis" and c["a"]["temperature"] == 0.5 and c["b"]["temperature"] == 0.2
        assert srv.state.total == sent


def test_run_flag_runs_a_missing_side(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=10, client="openai-http")
        shutil.copy(root / "specs" / "demo.yaml", root / "specs" / "demo2.yaml")
        spec2 = root / "specs" / "demo2.yaml"
        spec2.write_text(spec2.read_text().replace("name: demo", "name: demo2").replace(
            "  - Read the source.", "  - Read the source twice."))
        res = cli("compare", "demo", "demo2", "--run", "--out", "-", cwd=root)
        assert res.code in (0, 1), res.err
        assert srv.state.total == 20 and "**judging**" in res.out


def _group_runs(tmp_path):
    """Six groups of four; B ranks groups 0-2 right and 3-5 reversed; A like B in 0-2, constant in 3-5."""
    from import_helpers import import_scores, write_project

    rows = [{"id": f"g{g}c{k}", "doc": f"g{g}", "human": k + 1} for g in range(6) for k in range(4)]
    write_project(tmp_path, rows, "calibration: {level: group, threshold: 0.5}\nbootstrap: {draws: 200, seed: 1}\n")
    b = {r["id"]: (r["human"] if int(r["doc"][1]) < 3 else 5 - r["human"]) for r in rows}
    a = {r["id"]: (r["human"] if int(r["doc"][1]) < 3 else 3) for r in rows}
    return import_scores(tmp_path, a, "a"), import_scores(tmp_path, b, "b")


def test_compare_group_level_points_and_interval_on_the_same_groups(tmp_path):
    """A's point used to be over its 3 valid groups and B's over 6 (-1.0), the interval over 3 ([0, 0])."""
    run_a, run_b = _group_runs(tmp_path)
    res = cli("compare", run_a, run_b, "--format", "json", "--out", "-", cwd=tmp_path)
    assert res.code == 0, res.err
    entry = json.loads(res.out)["correlation"]["all"]["group"]
    for metric in ("spearman", "pearson", "kendall"):
        assert entry[metric] == {"a": 1.0, "b": 1.0, "difference": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    assert entry["n"] == 3 and entry["skipped_groups_a"] == 3 and entry["skipped_groups_b"] == 0
    md = cli("compare", run_a, run_b, "--out", "-", cwd=tmp_path).out
    assert "| all | group | 3 (skipped: A 3, B 0) | 1.000 | 1.000 | +0.000 [+0.000, +0.000] |" in md


def test_compare_verdicts_better_worse_inconclusive_and_rule_strict(two_imports, tmp_path):
    """An interval containing 0 used to read 'no significant regression' whatever CI needed; strict fails it."""
    db, good, bad = two_imports

    def run(a, b, *extra):
        res = cli("compare", a, b, "--format", "json", "--out", "-", "--db", str(db), *extra)
        return res.code, json.loads(res.out)["regression"] if res.out.startswith("{") else None

    # the same judgments on both sides: a difference of 0 in every draw is not worse, under either rule
    code, r = run(good, good, "--rule", "strict")
    assert code == 0 and r["verdict"] == "not worse" and r["fails"] is False and r["rule"] == "strict"
    assert r["reason"] == "B is not worse: spearman +0.000, interval [0.000, 0.000], the same in every draw (no change)"
    # two verdicts swapped between test cases: a small change whose interval contains 0
    lines = [json.loads(x) for x in (ROOT / "specs/data/tcva/summeval-consistency.verdicts.jsonl").read_text().splitlines()]
    payload = [{k: v for k, v in x.items() if k != "case_id"} for x in lines]
    payload[0], payload[1] = payload[1], payload[0]
    near = tmp_path / "near.jsonl"
    near.write_text("\n".join(json.dumps({"case_id": x["case_id"], **p}) for x, p in zip(lines, payload)) + "\n")
    near_run = cli("import", "summeval-consistency", str(near), "--db", str(db)).out.strip().splitlines()[-1]
    code, r = run(good, near_run, "--rule", "strict")
    assert code == 1 and r["verdict"] == "inconclusive" and r["fails"] is True and r["rule"] == "strict"
    assert r["reason"].startswith("inconclusive: spearman ") and r["reason"].endswith(" contains 0")
    code, r = run(good, near_run)
    assert code == 0 and r["verdict"] == "inconclusive" and r["fails"] is False and r["regressed"] is False
    code, r = run(good, near_run, "--rule", "strict", "--margin", "0.05")
    assert code == 0 and r["verdict"] == "not worse"
    code, r = run(good, bad, "--rule", "strict")
    assert code == 1 and r["verdict"] == "worse" and r["regressed"] is True
    code, r = run(bad, good, "--rule", "strict")
    assert code == 0 and r["verdict"] == "better" and r["reason"].startswith("B is better: spearman +")
    md = cli("compare", good, near_run, "--out", "-", "--db", str(db), "--rule", "strict").out
    assert "## Verdict: inconclusive" in md and "rule strict (exit 1)" in md
    assert "Only this decides: spearman at dataset level on test. The other intervals below are descriptive." in md
    line = cli("compare", bad, good, "--db", str(db), "--out", str(tmp_path / "c.md")).out.splitlines()[1]
    assert line.startswith("better, rule default: B is better")


def test_a_change_of_the_human_labels_is_named_in_the_comparison(tmp_path):
    """compare scores both sides against B's labels; after data.human changed, A's column silently showed A's
    judge against B's labels ('no change' while A's own gate passed and B's failed). It now says so."""
    import subprocess

    from import_helpers import import_scores, write_project

    rows = [{"id": c, "doc": f"d{i}", "human": i + 1, "h2": 5 - i} for i, c in enumerate("abcde")]
    write_project(tmp_path, rows, "calibration: {split: all, threshold: 0.5}\nbootstrap: {draws: 100, seed: 1}\n")
    import_scores(tmp_path, {c: i + 1 for i, c in enumerate("abcde")}, "j")
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(git + ["add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(git + ["commit", "-qm", "v1"], cwd=tmp_path, check=True)
    spec = tmp_path / "specs" / "p.yaml"
    spec.write_text(spec.read_text().replace("  human: human\n", "  human: h2\n"))
    res = cli("compare", "p@HEAD", "p", "--out", "-", cwd=tmp_path)
    assert "the human scores differ between A and B on 4 of the 5 common cases" in res.out
