"""Command-line basics: imports stay light, errors stay readable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, cli, run_cli


@pytest.mark.parametrize("command", [["validate"], ["list"]])
def test_validate_and_list_do_not_import_litellm(command):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "geval_spec", *command], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    imported = {m.split(".")[0] for m in modules}
    assert "geval_spec" in imported
    assert "litellm" not in imported and "openai" not in imported
    assert "duckdb" not in imported and "numpy" not in imported
    if command == ["validate"]:  # what it renders is messages; requests and judgments are for run (BENCHMARKS.md)
        assert "geval_spec.judge.messages" in modules
        assert "geval_spec.judge.types" not in modules and "geval_spec.judge.requests" not in modules


def test_list_shows_both_fingerprints():
    res = cli("list")
    assert res.code == 0
    line = next(ln for ln in res.out.splitlines() if ln.startswith("summeval-consistency"))
    parts = line.split()
    assert parts[1] == "1" and len(parts[4]) == 10 and len(parts[5]) == 10 and parts[4] != parts[5]


def test_unknown_option_is_exit_2():
    res = run_cli("validate", "--bogus")
    assert res.code == 2 and "Traceback" not in res.err


def test_debug_shows_traceback_for_input_errors():
    res = run_cli("--debug", "render", "tests/malformed/03-tag-python.yaml")
    assert res.code == 2 and "Traceback" in res.err
