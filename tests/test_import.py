"""`import`: every line form of the contract, errors with file and line, missing cases, idempotence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cli
from e2e_helpers import make_project
from geval_spec.store.db import Store


def write_lines(path: Path, items) -> Path:
    path.write_text("\n".join(json.dumps(i) for i in items) + "\n")
    return path


def stored(root: Path, run_id: str):
    with Store(root / ".geval" / "results.duckdb") as store:
        return {j.case_id: j for j in store.judgments(run_id)}, store.get_run(run_id)


def test_all_line_forms(tmp_path):
    """Every form of a score spec, one form per file (a file that mixes them is refused: see test_hostile)."""
    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=6)

    def imported(name, items):
        res = cli("import", "demo", str(write_lines(tmp_path / name, items)), cwd=root)
        assert res.code == 0, res.err
        run_id = res.out.strip().splitlines()[-1]
        return res, run_id, stored(root, run_id)

    res, run_id, (js, info) = imported("scores.jsonl", [
        {"case_id": "c000", "score": 3.5},
        {"case_id": "c003", "error": "judge returned invalid JSON"},
    ])
    assert "missing: c001, c002, c004, c005" in res.out and "2 judgments imported" in res.out
    assert info.kind == "import" and info.status == "completed"
    assert js["c000"].score == 3.5 and js["c000"].method == "direct"
    assert js["c003"].valid is False and js["c003"].reason == "judge returned invalid JSON"
    _, _, (js, _) = imported("samples.jsonl", [
        {"case_id": "c001", "samples": ["4", "3", 4, "x"]},
        {"case_id": "c004", "samples": ["nope"]},
    ])
    assert js["c001"].method == "samples" and js["c001"].score == pytest.approx(11 / 3)
    assert js["c001"].samples == (4.0, 3.0, 4.0, None) and js["c001"].details.invalid_samples == 1
    assert js["c004"].valid is False
    _, _, (js, _) = imported("distribution.jsonl", [
        {"case_id": "c002", "distribution": {"1": 0.05, "2": 0.1, "3": 0.2, "4": 0.4, "5": 0.25}},
    ])
    assert js["c002"].method == "logprobs" and js["c002"].score == pytest.approx(3.7)
    # the same file again: the same run
    res2 = cli("import", "demo", str(tmp_path / "scores.jsonl"), cwd=root)
    assert res2.out.strip().splitlines()[-1] == run_id and "already imported" in res2.out


def test_an_imported_score_of_minus_zero_is_zero(tmp_path):
    """-0.0 is on a 0..1 scale: it was stored and reported as -0.000 (disagreements, compare's movers)."""
    res = cli("import", "usr-faithfulness", str(write_lines(tmp_path / "z.jsonl", [
        {"case_id": "usr_topicalchat_165", "score": -0.0}])), "--db", str(tmp_path / "r.duckdb"))
    assert res.code == 0, res.err
    with Store(tmp_path / "r.duckdb") as store:
        (judgment,) = store.judgments(res.out.strip().splitlines()[-1])
    assert judgment.score == 0.0 and str(judgment.score) == "0.0"


def test_verdicts_form_and_on_empty(tmp_path):
    res = cli("import", "usr-faithfulness", "specs/data/tcva/usr-faithfulness.verdicts.jsonl", "--db",
              str(tmp_path / "r.duckdb"))
    assert res.code == 0, res.err
    with Store(tmp_path / "r.duckdb") as store:
        js = {j.case_id: j for j in store.judgments(res.out.strip().splitlines()[-1])}
    empty = js["usr_topicalchat_65"]
    assert empty.valid and empty.score == 0.0 and empty.verdicts == ()  # on_empty: zero
    full = js["usr_topicalchat_165"]
    assert full.method == "verdicts" and len(full.verdicts) >= 1


@pytest.mark.parametrize("line, message", [
    ({"case_id": "nope", "score": 3}, "case 'nope' is not in"),
    ({"case_id": "c000", "scor": 3}, "did you mean 'score'?"),
    ({"case_id": "c000", "score": 3, "error": "x"}, "give exactly one of"),
    ({"case_id": "c000", "score": 9}, "score 9 is outside 1..5"),
    ({"case_id": "c000", "distribution": {"1": -1}}, "must be a number >= 0"),
    ({"score": 3}, "missing 'case_id'"),
    ({"case_id": "c000", "verdicts": [{"verdict": "maybe"}]}, "does not fit scoring.method logprobs"),
    ("not json", "not JSON"),
    ('{"case_id": "c000", "samples": [NaN, 3]}', "sample(s) NaN: a sample is a whole number of the scale"),
    ('{"case_id": "c000", "samples": [3, Infinity]}', "sample(s) Infinity: a sample is"),
    ({"case_id": "c000", "samples": [True, 3]}, "sample(s) true: a sample is"),
    ({"case_id": "c000", "samples": [3.7, 3, {"a": 1}]}, 'sample(s) 3.7, {"a": 1}: a sample is'),
    ('{"case_id": "c000", "score": 3, "score": 4}', "key 'score' is given twice"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=3)
    f = tmp_path / "bad.jsonl"
    text = json.dumps({"case_id": "c001", "score": 2}) + "\n" + (line if isinstance(line, str) else json.dumps(line))
    f.write_text(text + "\n")
    res = cli("import", "demo", str(f), cwd=root)
    assert res.code == 2
    assert f"{f}:2: error" in res.err and message in res.err


def test_duplicate_case_lines(tmp_path):
    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=3)
    f = write_lines(tmp_path / "d.jsonl", [{"case_id": "c001", "score": 2}, {"case_id": "c001", "score": 3}])
    res = cli("import", "demo", str(f), cwd=root)
    assert res.code == 2 and "appears twice (first on line 1)" in res.err


def test_importing_into_a_second_spec_alike_keeps_the_first_spec_s_run(tmp_path):
    """Two specs that judge and analyse alike (a copy under another name, or a version that changed nothing
    judged) once shared the import's run id, and importing into the second deleted the first one's run."""
    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=6)
    spec = (root / "specs" / "demo.yaml").read_text()
    (root / "specs" / "copy.yaml").write_text(spec.replace("name: demo", "name: copy", 1))
    lines = write_lines(tmp_path / "j.jsonl", [{"case_id": f"c{i:03d}", "score": 1 + i % 5} for i in range(6)])
    first = cli("import", "demo", str(lines), cwd=root)
    second = cli("import", "copy", str(lines), cwd=root)
    assert first.code == 0 and second.code == 0, first.err + second.err
    a, b = first.out.strip().splitlines()[-1], second.out.strip().splitlines()[-1]
    assert a != b
    assert stored(root, a)[1].spec_name == "demo" and stored(root, b)[1].spec_name == "copy"
    assert cli("report", "demo", "--exit-zero", "--out", "-", cwd=root).code == 0


def test_an_imported_run_stores_each_case_s_split(tmp_path):
    """docs/results.md's case_results view gives each case's split; an import stored none (NULL for all)."""
    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=20)
    lines = write_lines(tmp_path / "j.jsonl", [{"case_id": f"c{i:03d}", "score": 1 + i % 5} for i in range(20)])
    run_id = cli("import", "demo", str(lines), cwd=root).out.strip().splitlines()[-1]
    with Store(root / ".geval" / "results.duckdb") as store:
        splits = dict(store.con.execute("SELECT split, count(*) FROM case_results WHERE run_id = ? GROUP BY 1",
                                        [run_id]).fetchall())
    assert None not in splits and sum(splits.values()) == 20


def test_scores_imported_for_a_verdicts_spec_say_that_temperature_and_sweep_cannot_reaggregate(tmp_path):
    """A verdicts spec takes score lines in 0..1; --temperature then changed nothing without a word, and sweep showed
    'dev n 0' at every temperature with exit 0."""
    from import_helpers import import_scores, write_project

    rows = [{"id": f"c{i}", "doc": f"d{i}", "human": (i % 5) / 4, "split": "dev" if i % 2 else "test"}
            for i in range(20)]
    write_project(tmp_path, rows, "split: {field: split}\nbootstrap: {draws: 100, seed: 1}\n",
                  method="verdicts")
    import_scores(tmp_path, {f"c{i}": ((i * 3) % 5) / 4 for i in range(20)}, "j")
    res = cli("report", "p", "--temperature", "0.1", "--out", "-", "--exit-zero", cwd=tmp_path)
    assert res.code == 0 and "--temperature 0.1 changes nothing here" in res.out
    assert "changes nothing" not in cli("report", "p", "--out", "-", "--exit-zero", cwd=tmp_path).out
    sweep = cli("sweep", "p", "--out", "-", cwd=tmp_path)
    assert sweep.code == 2 and "stores no verdicts" in sweep.err


def test_an_id_that_differs_only_in_unicode_normalisation_is_named_as_such(tmp_path):
    import unicodedata

    from import_helpers import write_project

    nfc = unicodedata.normalize("NFC", "caf\u00e9")
    write_project(tmp_path, [{"id": nfc, "doc": "d", "human": 3}, {"id": "b", "doc": "e", "human": 4}], "")
    nfd = unicodedata.normalize("NFD", nfc)
    res = cli("import", "p", str(write_lines(tmp_path / "j.jsonl", [{"case_id": nfd, "score": 3}])), cwd=tmp_path)
    assert res.code == 2 and "Unicode normalisation" in res.err
