"""Every JSON Lines file geval-spec reads ends a line at a newline only.

A JSON string may hold U+2028, U+2029, NEL, form feed and the other
characters at which ``str.splitlines`` also breaks a line; writers that keep
non-ASCII text as it is (ours too) leave them unescaped. Such a line is one
record. (The data file's reader is tested in test_data.py.)
"""

from __future__ import annotations

import json

import pytest

from conftest import cli
from e2e_helpers import make_project
from geval_spec.store.db import Store

SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r"]


def test_an_import_line_may_hold_a_line_separator(tmp_path):
    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=len(SEPARATORS))
    items = [{"case_id": f"c{i:03d}", "error": f"judge said a{sep}b"} for i, sep in enumerate(SEPARATORS)]
    path = tmp_path / "scores.jsonl"
    path.write_text("\r\n".join(json.dumps(i, ensure_ascii=False) for i in items) + "\r\n", encoding="utf-8")
    res = cli("import", "demo", str(path), cwd=root)
    assert res.code == 0, res.err
    with Store(root / ".geval" / "results.duckdb") as store:
        reasons = {j.case_id: j.reason for j in store.judgments(res.out.strip().splitlines()[-1])}
    assert reasons == {f"c{i:03d}": f"judge said a{sep}b" for i, sep in enumerate(SEPARATORS)}


def test_a_cassette_whose_answers_hold_line_separators_is_read_back(tmp_path):
    from geval_spec.judge.clients.replay import cassette_lines, read_cassette
    from geval_spec.judge.types import Recorded

    rows = [Recorded(request_hash=f"h{i}", response={"choices": [{"message": {"content": f"a{sep}b"}}]},
                     prompt_tokens=1, completion_tokens=1, cost=None, latency_ms=1.0)
            for i, sep in enumerate(SEPARATORS)]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(cassette_lines("run_x", "demo", "fp", rows)) + "\n", encoding="utf-8")
    back = read_cassette(path)
    assert {h: r.response["choices"][0]["message"]["content"] for h, r in back.items()} == \
        {f"h{i}": f"a{sep}b" for i, sep in enumerate(SEPARATORS)}


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_batch_output_line_holding_a_line_separator_is_an_answer_not_skipped(ending):
    from geval_spec.judge.clients.batch_api import read_lines

    lines = [{"custom_id": f"r{i}", "response": {"status_code": 200, "body": {"choices": [
        {"message": {"content": f"a{sep}b"}}]}}} for i, sep in enumerate(SEPARATORS)]
    data = ending.join(json.dumps(line, ensure_ascii=False) for line in lines).encode("utf-8") + b"\n"
    got = read_lines(data)
    assert [(b.custom_id, b.status, b.body["choices"][0]["message"]["content"]) for b in got] == \
        [(f"r{i}", 200, f"a{sep}b") for i, sep in enumerate(SEPARATORS)]


def test_a_cassette_line_that_names_a_key_twice_is_refused_at_its_line(tmp_path):
    """json.loads keeps the last of two values of a key: a recorded answer with two of them is ambiguous (which
    one did the judge say?), so the cassette is refused at that line, as a data or import file is."""
    from geval_spec.errors import DataError
    from geval_spec.judge.clients.replay import cassette_lines, read_cassette
    from geval_spec.judge.types import Recorded

    row = Recorded(request_hash="h0", response={"choices": [{"message": {"content": "score: 4"}}]},
                   prompt_tokens=1, completion_tokens=1, cost=None, latency_ms=1.0)
    header, line = cassette_lines("run_x", "demo", "fp", [row])
    path = tmp_path / "c.jsonl"
    twice = line.replace('"content": "score: 4"', '"content": "score: 4", "content": "score: 1"')
    assert twice != line
    path.write_text(f"{header}\n{twice}\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        read_cassette(path)
    problem = caught.value.problems[0]
    assert (problem.line, problem.message) == (2, "key 'content' is given twice in one object (which one is meant?)")
