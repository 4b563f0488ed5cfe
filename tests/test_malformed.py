"""Every malformed spec gives one clear message with file and line, exit 2, no traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import TESTS, cli, run_cli

CORPUS = sorted((TESTS / "malformed").glob("*.yaml"))


def expectation(path: Path) -> tuple[str, str, int]:
    lines = path.read_text(encoding="utf-8").splitlines()
    expect = lines[0].split("# expect:", 1)[1].split("  # <- error")[0].strip()
    at = next((ln.split("# expect-at:", 1)[1].strip() for ln in lines[:3] if "# expect-at:" in ln), None)
    if at:
        file, line = at.rsplit(":", 1)
        return expect, f"tests/malformed/{file}", int(line)
    marked = [n for n, ln in enumerate(lines, 1) if "# <- error" in ln]
    assert len(marked) == 1, f"{path.name}: mark exactly one line with '# <- error'"
    return expect, f"tests/malformed/{path.name}", marked[0]


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_malformed_spec(path: Path):
    expect, file, line = expectation(path)
    res = cli("validate", f"tests/malformed/{path.name}")
    assert res.code == 2, res.err
    assert "Traceback" not in res.err + res.out
    headlines = [ln for ln in res.err.splitlines() if re.match(r"^\S+:\d+(:\d+)?: error", ln)]
    assert len(headlines) == 1, res.err
    assert headlines[0].startswith(f"{file}:{line}:"), (headlines[0], file, line)
    assert expect in res.err, res.err


def test_all_errors_of_a_file_in_one_go(tmp_path: Path):
    text = (TESTS / "malformed" / "11-version-type.yaml").read_text()
    text = text.replace("task: Judge a summary.", "task: Judge a summary.\ntemprature: 3")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "good.jsonl").write_text((TESTS / "malformed" / "data" / "good.jsonl").read_text())
    spec = tmp_path / "two.yaml"
    spec.write_text(text)
    res = cli("validate", str(spec))
    assert res.code == 2
    assert "expected a whole number" in res.err and "unknown key 'temprature'" in res.err


def test_subprocess_exit_code_and_no_traceback():
    res = run_cli("validate", "tests/malformed/03-tag-python.yaml")
    assert res.code == 2
    assert "Traceback" not in res.err
    assert "tests/malformed/03-tag-python.yaml:4:7" in res.err


def test_bad_refs():
    res = cli("validate", "no-such-spec")
    assert res.code == 2 and "no spec named 'no-such-spec'" in res.err
    res = cli("validate", "summeval-consistensy")
    assert res.code == 2 and "did you mean 'summeval-consistency'" in res.err
    res = cli("validate", "specs/nothing.yaml")
    assert res.code == 2 and "no such spec file" in res.err
    res = cli("validate", "summeval-consistency@no-such-rev-xyz")
    assert res.code == 2 and "Traceback" not in res.err
