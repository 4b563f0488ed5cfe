"""Reports: the contract's keys, byte-identical output, a self-contained escaped HTML, the gate."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT, cli
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig


@pytest.fixture(scope="module")
def summeval(tmp_path_factory):
    db = tmp_path_factory.mktemp("rep") / "r.duckdb"
    res = cli("import", "summeval-consistency", "specs/data/tcva/summeval-consistency.verdicts.jsonl", "--db", str(db))
    assert res.code == 0, res.err
    return db, res.out.strip().splitlines()[-1]


def report(db, what, fmt, *extra):
    return cli("report", what, "--format", fmt, "--out", "-", "--db", str(db), *extra)


def test_json_has_the_contract_keys(summeval):
    db, run_id = summeval
    res = report(db, run_id, "json")
    assert res.code == 1  # this judge does not reach 0.80 on test
    r = json.loads(res.out)
    assert {"name", "version", "fingerprint"} <= set(r["spec"])
    assert {"id", "judge", "method", "temperature"} <= set(r["run"]) and r["run"]["id"] == run_id
    assert r["cases"] == {**r["cases"], "n": 172, "valid": 169, "invalid": 3, "missing": 0}
    assert r["cases"]["validity"] == round(169 / 172, 4)
    for split in ("all", "dev", "test"):
        for level in ("dataset", "group", "system"):
            entry = r["correlation"][split][level]
            assert set(entry) >= {"spearman", "pearson", "kendall", "n"}
            for metric in ("spearman", "pearson", "kendall"):
                assert set(entry[metric]) == {"value", "ci_low", "ci_high"}
                assert entry[metric]["ci_low"] <= entry[metric]["value"] <= entry[metric]["ci_high"]
    assert "skipped_groups" in r["correlation"]["all"]["group"]
    g = r["gate"]
    assert {"metric", "level", "split", "threshold", "value", "passed"} <= set(g)
    assert g["passed"] is False and g["value"] == r["correlation"]["test"]["dataset"]["spearman"]["value"]
    assert r["sweep"]["chosen_on"] == "dev" and len(r["sweep"]["grid"]) == 19
    assert r["sample_size"]["required"] > 0 and r["sample_size"]["formula"]


def test_report_is_byte_identical(summeval):
    db, run_id = summeval
    for fmt in ("md", "json", "html"):
        assert report(db, run_id, fmt).out == report(db, run_id, fmt).out, fmt


def test_report_by_ref_equals_report_by_run(summeval):
    db, run_id = summeval
    by_ref = json.loads(report(db, "summeval-consistency", "json").out)
    by_run = json.loads(report(db, run_id, "json").out)
    assert by_ref == by_run


def test_temperature_reaggregation_changes_only_scores(summeval):
    db, run_id = summeval
    a = json.loads(report(db, run_id, "json", "--temperature", "0.2").out)
    b = json.loads(report(db, run_id, "json", "--temperature", "0.9").out)
    assert a["run"]["temperature"] == 0.2 and b["run"]["temperature"] == 0.9
    assert a["correlation"]["all"]["dataset"] != b["correlation"]["all"]["dataset"]
    assert a["cases"] == b["cases"]


def _xml_char(c: str) -> bool:  # XML 1.0's Char production
    o = ord(c)
    return o in (0x9, 0xA, 0xD) or 0x20 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD or 0x10000 <= o <= 0x10FFFF


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab&<>\"'\n\r\t ;é")) | st.characters().filter(_xml_char),
               max_size=40))
def test_junit_escapes_match_saxutils(text):
    """The JUnit writer's own escapes give xml.sax.saxutils' output (whose import costs a report 20-30 ms) for
    every text XML can hold."""
    from xml.sax.saxutils import escape, quoteattr

    from geval_spec.output import junit

    assert junit.escape(text) == escape(text)
    assert junit.quoteattr(text) == quoteattr(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("a&<\"'\n\r\t\x00\x01\x0b\x1f\ufffe\uffff\ud800é")) | st.characters(),
               max_size=30))
def test_junit_file_parses_whatever_the_gate_names(text):
    """A split, reason or note holding characters XML 1.0 cannot hold (C0 controls, lone surrogates, U+FFFE/FFFF)
    still gives a file a CI system's parser reads: each such character is U+FFFD, the rest as it was."""
    import xml.etree.ElementTree as ET

    from geval_spec.analysis.verdict import GateBlock
    from geval_spec.output.junit import to_junit

    gate = GateBlock(metric="spearman", level="dataset", split=text, threshold=0.5, rule="point", value=0.1,
                     ci_low=None, ci_high=None, n=3, validity=1.0, min_validity=0.0, passed=False, reason=text,
                     could_flip=None, unseen_data=False, notes=[text])
    xml = to_junit("demo", gate)
    root = ET.fromstring(xml.encode("utf-8", "surrogatepass"))  # (a lone surrogate left in would fail here)
    seen = "".join(c if _xml_char(c) else "\ufffd" for c in text)
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == f"spearman dataset {seen} >= 0.5"
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == f"{seen}; {seen}"
    # (in the element's text a parser makes each line end a newline, as XML says: saxutils' escape did the same)
    assert failure.text == f"{seen}; {seen}".replace("\r\n", "\n").replace("\r", "\n")


def test_a_report_does_not_import_urllib_request(tmp_path):
    """Nothing a report writes needs urllib.request (http.client, ssl): saxutils imported it for the JUnit file."""
    code = ("import sys; import geval_spec.output.junit, geval_spec.output.html, geval_spec.output.report; "
            "print('urllib.request' in sys.modules, 'xml.sax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_gate_pass_and_junit(summeval, tmp_path):
    db, run_id = summeval
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    spec = tmp_path / "specs" / "summeval-consistency.yaml"
    spec.write_text(spec.read_text().replace("threshold: 0.8", "threshold: 0.6"))
    res = cli("report", "summeval-consistency", "--db", str(db), "--junit", str(tmp_path / "gate.xml"), cwd=tmp_path)
    assert res.code == 0, res.err  # a threshold change is analysis only: the same judgments, a new verdict
    assert "gate passed" in res.out
    assert (tmp_path / "reports" / "summeval-consistency" / "report.md").exists()
    assert 'failures="0"' in (tmp_path / "gate.xml").read_text()
    assert "wrote " in res.out and "gate.xml" in res.out.splitlines()[-1]  # (it wrote the file without a word)
    res = cli("report", run_id, "--db", str(db), "--junit", str(tmp_path / "fail.xml"), cwd=tmp_path)
    assert res.code == 1 and "<failure" in (tmp_path / "fail.xml").read_text()
    assert cli("report", run_id, "--db", str(db), "--exit-zero", cwd=tmp_path).code == 0


UNSEEN = [chr(c) for c in [*range(0, 9), *range(11, 32), *range(0x7f, 0xa0)]] + \
    ["\u200e", "\u200f", *map(chr, range(0x202a, 0x202f)), *map(chr, range(0x2066, 0x206a))]


def test_case_text_cannot_reach_a_terminal_or_a_log_as_control_codes(tmp_path):
    """Escape sequences, carriage returns, C1 controls and bidirectional marks in case ids, texts, groups and
    imported errors are written out (\\x1b, \\u202e) in every report format, on stdout and in what commands print:
    a hostile data file cannot erase a CI log's lines, recolour it or reorder what it shows."""
    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=12)
    data = root / "specs" / "data" / "cases.jsonl"
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    nasty = "\x1b[2K\r\x1b]0;t\x07\x9b31m\u202e\u2066"
    for i, r in enumerate(rows):
        r["id"] = f"c{i}{nasty}" if i < 6 else r["id"]
        r["cand"] = f"| pipe\n{nasty} {r['cand']}"
        r["doc"] = f"{nasty}d{i // 2}"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lines = [{"case_id": r["id"], "score": 1 + i % 5} if i % 4 else {"case_id": r["id"], "error": f"bad {nasty}"}
             for i, r in enumerate(rows)]
    (tmp_path / "imp.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    printed = [cli("import", "demo", str(tmp_path / "imp.jsonl"), cwd=root)]
    printed.append(cli("report", "demo", "--format", "all", "--exit-zero", cwd=root))
    printed += [cli("report", "demo", "--format", fmt, "--out", "-", "--exit-zero", cwd=root) for fmt in
                ("md", "json", "html")]
    printed.append(cli("render", "demo", "--case", "c0" + nasty, cwd=root))
    assert all(r.code == 0 for r in printed), [r.err for r in printed]
    texts = [r.out + r.err for r in printed] + [p.read_text() for p in (root / "reports" / "demo").iterdir()]
    found = {repr(ch) for text in texts for ch in UNSEEN if ch in text}
    assert not found, found
    assert "\\x1b" in (root / "reports" / "demo" / "report.md").read_text()
    page = (root / "reports" / "demo" / "report.html").read_text()  # (the HTML showed x1b and u202e: no backslash)
    assert "\\x1b]0;t\\x07\\x9b31m\\u202e\\u2066" in page
    assert not re.search(r"(?<!\\)(x1b|u202e|u2066)", page)
    report = json.loads(printed[3].out)  # the JSON report is the same data, its characters escaped
    values = [report]
    for v in values:
        values += [*v, *v.values()] if isinstance(v, dict) else v if isinstance(v, list) else []
    assert f"bad {nasty}" in values


def test_html_is_self_contained_and_escapes_case_text(tmp_path):
    srv = FakeOpenAI(ServerConfig()).start()
    try:
        root = make_project(tmp_path, srv.base_url, n=12, client="openai-http")
        data = root / "specs" / "data" / "cases.jsonl"
        rows = [json.loads(x) for x in data.read_text().splitlines()]
        rows[4]["cand"] = "<script>alert(1)</script> & <img src=x onerror=alert(2)> [[score=1]]"
        rows[4]["human"] = 5
        data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        res = cli("run", "demo", cwd=root)
        assert res.code in (0, 1), res.err
    finally:
        srv.stop()
    out = cli("report", "demo", "--format", "html", "--out", "-", cwd=root).out
    md = cli("report", "demo", "--format", "md", "--out", "-", cwd=root).out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "<script" not in md and "&lt;script&gt;" in md
    tags, loads = external_loads(out)
    assert not {"script", "img", "link", "iframe", "object", "embed", "audio", "video", "source"} & tags
    assert loads == [], loads
    import re

    assert "http://" not in out and "https://" not in out and "@import" not in out
    assert not re.search(r"url\(\s*['\"]?[^#'\"\s]", out)  # only in-page references like url(#clip)
    assert out.count("<svg") >= 3
    assert out.index('class="gate') < out.index("<svg") < out.index("<table")  # verdict, then plots, then tables
    html_file = tmp_path / "report.html"
    html_file.write_text(out)
    pixels = screenshot(html_file, tmp_path / "shot.png")
    # looked at, not only measured: the coloured verdict sits at the top of the page, and the scatter's
    # translucent dots (dev blue, test red, or the grey of a spec without splits) appear in the first screen
    import numpy as np

    banner = pixels[:260]
    passed_green = np.all(np.abs(banner - np.array([0x2E, 0x7D, 0x32]) / 255) < 0.04, axis=-1).any()
    failed_red = np.all(np.abs(banner - np.array([0xC6, 0x28, 0x28]) / 255) < 0.04, axis=-1).any()
    assert passed_green or failed_red, "no coloured gate verdict at the top of the page"
    first_screen = pixels[:1100]
    tinted = (first_screen.max(axis=-1) - first_screen.min(axis=-1)) > 0.15
    assert tinted.mean() > 0.0005, "no plot colours in the first screen"


def external_loads(page: str) -> tuple[set[str], list[str]]:
    """Element names, and every src/href/srcset/action that points outside the page."""
    from html.parser import HTMLParser

    class Collector(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags: set[str] = set()
            self.loads: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.tags.add(tag)
            for name, value in attrs:
                if name in ("src", "href", "srcset", "action", "data", "poster") and not (value or "").startswith("#"):
                    self.loads.append(f"{tag} {name}={value}")

    c = Collector()
    c.feed(page)
    return c.tags, c.loads


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html_file: Path, png: Path) -> Any:
    """A headless Chromium screenshot of the page, as an RGB array (rows from the top)."""
    browser = chromium()
    if browser is None:
        if os.environ.get("GEVAL_REQUIRE_CHROMIUM"):
            pytest.fail("GEVAL_REQUIRE_CHROMIUM is set but no chromium is installed")
        pytest.skip("no chromium on this machine (.ci/run installs it)")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    f"--user-data-dir={png.parent / 'chrome-profile'}", "--window-size=1200,3000",
                    f"--screenshot={png}", html_file.as_uri()], capture_output=True, timeout=120)
    assert png.exists() and png.stat().st_size > 10_000
    import matplotlib.image as mpimg
    import numpy as np

    pixels = mpimg.imread(str(png))[:, :, :3]
    dark = (pixels < 0.5).any(axis=2).mean()
    colours = len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3)[::97], axis=0))
    assert dark > 0.005 and colours > 20, (dark, colours)  # text and plots, not a blank page
    return pixels


def test_reaggregation_and_sweep_send_nothing(tmp_path):
    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=30, method="verdicts", client="openai-http")
        spec = root / "specs" / "demo.yaml"
        spec.write_text(spec.read_text().replace("calibration: {split: all, level: dataset,",
                                                 "calibration: {split: test, level: dataset,"))
        res = cli("run", "demo", cwd=root)
        assert res.code in (0, 1), res.err
        sent = srv.state.total
        assert sent == 30
        run_id = res.out.strip().splitlines()[-1]
        for args in (["report", run_id, "--temperature", "0.3"], ["report", "demo", "--temperature", "0.8"],
                     ["sweep", run_id], ["sweep", "demo", "--format", "json"], ["report", "demo", "--format", "html"]):
            out = cli(*args, cwd=root)
            assert out.code in (0, 1), out.err
        # an aggregation change in the spec is analysis-only: recomputed from the stored verdicts
        spec.write_text(spec.read_text().replace("scoring:\n  method: verdicts",
                                                 "scoring:\n  method: verdicts\naggregation: {temperature: 0.2}"))
        assert cli("report", "demo", cwd=root).code in (0, 1)
        assert srv.state.total == sent


def test_audit(tmp_path):
    (tmp_path / "specs" / "data").mkdir(parents=True)
    rows = []
    for i in range(40):
        base = (i % 5) + 1
        rows.append({"id": f"c{i}", "doc": f"d{i // 4}", "src": "s", "cand": "c", "r1": base,
                     "r2": base if i % 3 else max(1, base - 1), "r3": base, "split": "dev" if i < 20 else "test"})
    rows[25]["doc"] = "d1"  # a source group in dev and test
    (tmp_path / "specs" / "data" / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "specs" / "a.yaml").write_text(
        "name: a\nversion: 1\ntask: t\ncriterion: {name: C, description: D}\nsteps: [s]\n"
        "rubric: {scale: {min: 1, max: 5}, anchors: {1: {description: a}, 2: {description: b}, 3: {description: c},"
        " 4: {description: d}, 5: {description: e}}}\nscoring: {method: direct}\njudge: {model: openai/x}\n"
        "data: {path: data/c.jsonl, id: id, group: doc, fields: {source: src, candidate: cand}, human: [r1, r2, r3]}\n"
        "split: {field: split}\ncalibration: {split: test, threshold: 0.8}\n")
    res = cli("audit", "a", "--format", "json", "--out", "-", cwd=tmp_path)
    assert res.code == 0, res.err
    a = json.loads(res.out)
    assert a["splits"]["counts"] == {"examples": 0, "dev": 20, "test": 20}
    assert a["splits"]["overlapping_groups"] == {"d1": ["dev", "test"]}
    assert a["agreement"]["raters"] == ["r1", "r2", "r3"] and 0.8 < a["agreement"]["alpha_interval"] < 1
    assert a["sample_size"]["required"] == 38 and a["sample_size"]["available"] == 20
    assert a["sample_size"]["enough"] is False
    md = cli("audit", "a", "--out", "-", cwd=tmp_path)
    assert "d1: dev, test" in md.out and "Krippendorff" in md.out and "NOT enough" in md.out
    val = cli("validate", "a", cwd=tmp_path)
    assert val.code == 0 and "source group 'd1' spans splits dev, test" in val.err


def test_pass_mark_summary_is_reported(tmp_path):
    """calibration.pass_mark used to crash report (exit 70): a nested helper called itself on a float."""
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    spec = tmp_path / "specs" / "summeval-consistency.yaml"
    spec.write_text(spec.read_text().replace("threshold: 0.8", "threshold: 0.8\n  pass_mark: 0.25"))
    db = str(tmp_path / "r.duckdb")
    assert cli("import", "summeval-consistency", "specs/data/tcva/summeval-consistency.verdicts.jsonl", "--db", db,
               cwd=tmp_path).code == 0
    res = cli("report", "summeval-consistency", "--format", "json", "--out", "-", "--db", db, cwd=tmp_path)
    assert res.code == 1, res.err  # the gate fails; the report is made
    pm = json.loads(res.out)["diagnostics"]["pass_mark"]
    assert pm["pass_mark"] == 0.25 and pm["overall"]["n"] == 172
    assert 0 < pm["overall"]["accuracy"] <= pm["overall"]["validity"] <= 1
    assert abs(pm["overall"]["accuracy_when_valid"] - pm["overall"]["accuracy"] / pm["overall"]["validity"]) < 1e-3
    md = cli("report", "summeval-consistency", "--out", "-", "--db", db, cwd=tmp_path).out
    assert "### Accuracy at the pass mark" in md
    section = md.split("### Accuracy at the pass mark", 1)[1].split("###", 1)[0]
    assert section.count("| all |") == 1  # (no data.category: the overall row was listed twice)


def test_sweep_leakage_chosen_temperature_is_measured_on_test_when_the_gate_is_on_all(tmp_path):
    """With calibration.split: all the chosen T used to be measured on all, which contains dev."""
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    spec = tmp_path / "specs" / "summeval-consistency.yaml"
    spec.write_text(spec.read_text().replace("  split: test", "  split: all"))
    db = str(tmp_path / "r.duckdb")
    assert cli("import", "summeval-consistency", "specs/data/tcva/summeval-consistency.verdicts.jsonl", "--db", db,
               cwd=tmp_path).code == 0
    res = cli("sweep", "summeval-consistency", "--format", "json", "--db", db, "--out", "-", cwd=tmp_path)
    assert res.code == 0, res.err
    s = json.loads(res.out)
    assert s["test"]["split"] == "test" and s["test"]["n"] == 92 and s["measured_on"] == "test"
    md = cli("sweep", "summeval-consistency", "--db", db, "--out", "-", cwd=tmp_path).out
    assert "the chosen temperature is then measured on test, which shares no case with dev" in md
    r = json.loads(cli("report", "summeval-consistency", "--format", "json", "--out", "-", "--db", db,
                       cwd=tmp_path).out)
    assert r["gate"]["split"] == "all" and r["sweep"]["test"]["split"] == "test"


def test_sweep_leakage_validate_warns_when_the_gate_is_on_all_with_splits(tmp_path):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    spec = tmp_path / "specs" / "summeval-consistency.yaml"
    res = cli("validate", "summeval-consistency", cwd=tmp_path)
    assert res.code == 0 and "calibration.split" not in res.err
    spec.write_text(spec.read_text().replace("  split: test", "  split: all"))
    res = cli("validate", "summeval-consistency", cwd=tmp_path)
    assert res.code == 0, res.err
    assert "warning [calibration.split]: the gate is judged on all cases, dev included" in res.err
    assert "hint: set calibration.split: test" in res.err


def test_sweep_ties_keep_the_spec_temperature(summeval):
    """Dev values 0.630-0.636 within a dev interval 0.31 wide: T = 0.1 used to be chosen silently."""
    db, run_id = summeval
    res = cli("sweep", run_id, "--format", "json", "--db", str(db), "--out", "-")
    assert res.code == 0, res.err
    s = json.loads(res.out)
    assert s["chosen_temperature"] == 0.5 and s["told_apart"] is False
    assert s["best_temperature"] == 0.1 and s["spec_temperature"] == 0.5
    assert s["dev_range"] == [0.6299, 0.6359]
    d = s["best_minus_spec"]
    assert d["ci_low"] <= 0 < d["value"] < s["dev_at_spec"]["ci_high"] - s["dev_at_spec"]["ci_low"]
    assert s["test"]["value"] == json.loads(report(db, run_id, "json").out)["gate"]["value"]  # measured at T = 0.5
    md = cli("sweep", run_id, "--db", str(db), "--out", "-").out
    assert "Dev values range from 0.630 to 0.636 (0.006) over the temperatures" in md
    assert "the temperatures cannot be told apart on dev, so the spec's T = 0.5 is kept" in md
    assert "| 0.50 | 1.000 | 0.633 (chosen) | 77 |" in md and "| 0.10 | -8.000 | 0.636 (best) | 77 |" in md


def test_sweep_ties_a_clear_winner_is_chosen(tmp_path):
    """When the best temperature beats the spec's with a paired interval above 0, it is chosen."""
    import random

    from import_helpers import import_lines, write_project

    from geval_spec import tcva_score

    rng = random.Random(3)
    levels = ["fully", "mostly", "partially", "minor", "none"]
    rows, lines = [], []
    for i in range(160):
        verdicts = [rng.choice(levels) for _ in range(5)]
        rows.append({"id": f"c{i}", "doc": f"d{i // 2}", "human": round(tcva_score(verdicts, 0.1), 4)})
        lines.append({"case_id": f"c{i}", "verdicts": [{"verdict": v} for v in verdicts]})
    write_project(tmp_path, rows, "aggregation: {temperature: 1.0}\nsplit: {by: group, fractions: {dev: 0.5, "
                  "test: 0.5}, seed: 1}\ncalibration: {split: test}\nbootstrap: {draws: 500, seed: 1}\n",
                  method="verdicts")
    run_id = import_lines(tmp_path, lines, "v")
    s = json.loads(cli("sweep", run_id, "--format", "json", "--out", "-", cwd=tmp_path).out)
    assert s["best_temperature"] == 0.1 and s["told_apart"] is True and s["chosen_temperature"] == 0.1
    assert s["best_minus_spec"]["ci_low"] > 0 and s["test"]["split"] == "test"


def _demo_with(tmp_path, old: str, new: str):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    spec = tmp_path / "specs" / "summeval-consistency.yaml"
    spec.write_text(spec.read_text().replace(old, new))
    db = str(tmp_path / "r.duckdb")
    res = cli("import", "summeval-consistency", "specs/data/tcva/summeval-consistency.verdicts.jsonl", "--db", db,
              cwd=tmp_path)
    assert res.code == 0, res.err
    return db, res.out.strip().splitlines()[-1]


def test_gate_rule_lower_bound_and_how_sure_the_verdict_is(tmp_path):
    """Spearman 0.691 [0.559, 0.788] against 0.6: the point passes, the lower bound fails, and it could flip."""
    db, run_id = _demo_with(tmp_path, "threshold: 0.8", "threshold: 0.6\n  rule: lower_bound")
    res = cli("report", "summeval-consistency", "--format", "json", "--out", "-", "--db", db, cwd=tmp_path)
    g = json.loads(res.out)["gate"]
    assert res.code == 1 and g["passed"] is False and g["rule"] == "lower_bound"
    assert g["reason"] == "spearman's lower bound 0.559 < threshold 0.6" and g["could_flip"] is True
    assert g["unseen_data"] is True
    md = cli("report", "summeval-consistency", "--out", "-", "--db", db, cwd=tmp_path).out
    assert "threshold 0.6, rule lower_bound (the interval's lower end is compared)" in md
    assert "**Could flip with another sample**: the interval [0.559, 0.788] contains the threshold 0.6." in md
    assert "The test split has 92 usable cases: **not enough** to tell 0.6 from 0.5" in md
    line = cli("report", "summeval-consistency", "--db", db, cwd=tmp_path).out.splitlines()[0]
    assert line == ("gate FAILED: spearman's lower bound 0.559 < threshold 0.6; could flip with another sample: "
                    "the interval [0.559, 0.788] contains the threshold 0.6")
    # what run prints at its end (GateBlock.summary): the lower bound needs the interval there too
    from geval_spec.analysis.gate import gate_after_run
    from geval_spec.spec.project import Project
    from geval_spec.store.db import Store

    with Store.open_existing(tmp_path / "r.duckdb") as store:
        after = gate_after_run(store, Project(tmp_path), run_id, None)
    assert after is not None and after.passed is False and after.summary == line


def test_the_gate_after_a_run_reads_no_texts(tmp_path):
    """A run hands its gate the data without the cases' texts (it drops them as it plans): the gate is the same."""
    from geval_spec.analysis.gate import gate_after_run
    from geval_spec.dataset.cases import read_cases
    from geval_spec.spec.load import load_spec
    from geval_spec.spec.project import Project
    from geval_spec.store.db import Store

    db, run_id = _demo_with(tmp_path, "threshold: 0.8", "threshold: 0.6\n  rule: lower_bound")
    full = read_cases(load_spec(Project(tmp_path).resolve("summeval-consistency")))
    slim = full.without_texts()
    assert [(c.id, c.human, c.group, c.split_value) for c in slim.cases] == \
        [(c.id, c.human, c.group, c.split_value) for c in full.cases]
    assert all(len(c.fields) == 0 for c in slim.cases) and all(len(c.fields) == 2 for c in full.cases)
    with Store.open_existing(tmp_path / "r.duckdb") as store:
        gates = [gate_after_run(store, Project(tmp_path), run_id, None, d) for d in (full, slim, None)]
    assert gates[0] is not None and gates[0] == gates[1] == gates[2]
    assert gates[1].summary.startswith("gate FAILED: spearman's lower bound 0.559")


def test_gate_rule_point_passes_and_says_it_could_flip(tmp_path):
    db, run_id = _demo_with(tmp_path, "threshold: 0.8", "threshold: 0.6")
    res = cli("report", "summeval-consistency", "--format", "json", "--out", "-", "--db", db, cwd=tmp_path)
    g = json.loads(res.out)["gate"]
    assert res.code == 0 and g["passed"] is True and g["could_flip"] is True and g["rule"] == "point"
    assert g["notes"] == ["could flip with another sample: the interval [0.559, 0.788] contains the threshold 0.6"]
    fail = json.loads(report(*_demo_with(tmp_path / "b", "", ""), "json").out)["gate"]
    assert fail["could_flip"] is False and fail["notes"] == []


def test_gate_without_split_says_it_was_not_judged_on_unseen_data(tmp_path):
    """With no split the gate is judged on all: the report must say so (Markdown and the JSON gate block)."""
    from import_helpers import import_scores, write_project

    rows = [{"id": f"c{i}", "doc": f"d{i // 2}", "human": 1 + i % 5} for i in range(40)]
    write_project(tmp_path, rows, "calibration: {threshold: 0.5}\nbootstrap: {draws: 200}\n")
    run_id = import_scores(tmp_path, {r["id"]: r["human"] for r in rows}, "s")
    md = cli("report", run_id, "--out", "-", cwd=tmp_path).out
    assert "> warning: not judged on unseen data: the spec defines no splits, so the gate is judged on all cases " \
           "(add split and set calibration.split: test)" in md
    g = json.loads(cli("report", run_id, "--format", "json", "--out", "-", cwd=tmp_path).out)["gate"]
    assert g["split"] == "all" and g["unseen_data"] is False and g["notes"][-1].startswith("not judged on unseen")
    assert "not judged on unseen data" in cli("report", run_id, cwd=tmp_path).out.splitlines()[0]


def test_gate_without_split_hints_name_the_full_key_path(tmp_path):
    from import_helpers import write_project

    write_project(tmp_path, [{"id": "c0", "doc": "d", "human": 1}], "calibration: {split: test}\n")
    res = cli("validate", "p", cwd=tmp_path)
    assert res.code == 2
    assert "hint: add split: {by: group, fractions: {dev: 0.5, test: 0.5}}, or set calibration.split: all" in res.err


def test_bootstrap_unit_case_with_groups_is_warned(tmp_path):
    """Case resampling with clustered groups covered 0.85-0.88 of a nominal 0.95: validate and report warn."""
    from import_helpers import import_scores, write_project

    rows = [{"id": f"c{i}", "doc": f"d{i // 4}", "human": 1 + i % 5} for i in range(40)]
    write_project(tmp_path, rows, "calibration: {threshold: 0.5}\nbootstrap: {draws: 200, unit: case}\n")
    res = cli("validate", "p", cwd=tmp_path)
    assert res.code == 0, res.err
    assert "warning [bootstrap.unit]: bootstrap.unit is case but the data has source groups" in res.err
    run_id = import_scores(tmp_path, {r["id"]: r["human"] for r in rows}, "s")
    r = json.loads(cli("report", run_id, "--format", "json", "--out", "-", cwd=tmp_path).out)
    assert any(w.startswith("bootstrap.unit is case but the data has source groups") and "0.85-0.88" in w
               for w in r["warnings"])
    md = cli("report", run_id, "--out", "-", cwd=tmp_path).out
    assert "> warning: bootstrap.unit is case but the data has source groups" in md
    # resampling groups, or cases without groups, draws no warning
    write_project(tmp_path, rows, "calibration: {threshold: 0.5}\nbootstrap: {draws: 200, unit: group}\n")
    assert "bootstrap.unit" not in cli("validate", "p", cwd=tmp_path).err


def test_gate_without_split_hints_name_the_full_key_path_everywhere(tmp_path):
    from import_helpers import write_project

    write_project(tmp_path, [{"id": "c0", "doc": "d", "human": 1}],
                  "split: {by: group, fractions: {dev: 0.5, test: 0.5}}\n", method="logprobs")
    spec = tmp_path / "specs" / "p.yaml"
    spec.write_text(spec.read_text().replace("  group: doc\n", ""))
    err = cli("validate", "p", cwd=tmp_path).err
    assert "hint: set judge.top_logprobs: 20 (the usual value)" in err and "hint: or set split.by: id" in err


def test_html_of_lines_that_start_like_a_table_but_are_none_ends():
    """A line starting with '|' and not followed by a table's separator is a paragraph. The converter once took
    no line for it and looped forever, growing (a case text with a carriage return got there)."""
    import signal

    from geval_spec.output.html import render

    def stuck(signum, frame):
        raise AssertionError("render did not end")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(10)
    try:
        out = render("| not a table\n| nor this\ntext\n\n| a | b |\n| --- | ---: |\n| 1 | 2 |\nafter")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert out.split("\n") == ["<p>| not a table</p>", "<p>| nor this text</p>",
                               '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr>'
                               '<td style="text-align:left">1</td><td style="text-align:right">2</td></tr>'
                               '</tbody></table>', "<p>after</p>"]


def test_a_report_is_the_same_from_any_folder_of_the_project(tmp_path):
    """report.md/json/html named the spec and the data relative to the current folder: a report written from
    specs/ said data/x.jsonl and one from the root specs/data/x.jsonl, so committed reports changed with the folder
    they were written from. They are named relative to the project root (and a run stores its spec's file so)."""
    root = tmp_path / "p"
    assert cli("init", str(root), "--ci", "none").code == 0
    ran = cli("run", "summary-consistency", "--replay", str(root / "specs" / "cassettes" / "summary-consistency.jsonl"),
              cwd=root / "specs")
    assert ran.code in (0, 1), ran.err
    written = {}
    for where in (root, root / "specs", root / "specs" / "data"):
        res = cli("report", "summary-consistency", "--format", "all", "--exit-zero", cwd=where)
        assert res.code == 0, res.err
        written[where] = {p.name: p.read_bytes() for p in (root / "reports" / "summary-consistency").iterdir()}
    first = written[root]
    assert all(w == first for w in written.values())
    md = first["report.md"].decode()
    assert "`specs/summary-consistency.yaml`" in md and "`specs/data/summaries.jsonl`" in md
    run_id = re.search(r"run_[0-9a-f]{20}", md).group()
    by_id = cli("report", run_id, "--format", "md", "--out", "-", "--exit-zero", cwd=root / "specs" / "data")
    assert by_id.code == 0 and "`specs/summary-consistency.yaml`" in by_id.out and "`specs/data/summaries.jsonl`" in by_id.out
