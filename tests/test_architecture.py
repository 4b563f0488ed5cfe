"""The tree is the architecture: the public API, the layer contract, and no module or function too long to read."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

import geval_spec

PACKAGE = ROOT / "geval_spec"


def test_public_api_is_exactly_the_contract():
    assert geval_spec.__all__ == sorted(["audit_eval_split", "expected_score", "paired_bootstrap", "power_mean",
                                         "summarize_eval", "tcva_score", "temperature_to_p"]) + ["__version__"]
    for name in geval_spec.__all__:
        assert getattr(geval_spec, name) is not None
    assert geval_spec.expected_score({4: -0.2, 5: -0.9}, range(1, 6)) == __import__("pytest").approx(4.3318, abs=1e-4)


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


def test_layer_contract_holds_and_refuses_an_upward_import(tmp_path):
    assert _lint_imports(ROOT).returncode == 0
    copy = tmp_path / "proj"
    shutil.copytree(PACKAGE, copy / "geval_spec", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    scoring = copy / "geval_spec" / "judge" / "scoring.py"
    scoring.write_text(scoring.read_text() + "\nfrom geval_spec.analysis import frame  # noqa: E402  (upward)\n")
    res = _lint_imports(copy)
    assert res.returncode != 0, res.stdout
    assert "geval_spec.judge.scoring -> geval_spec.analysis.frame" in res.stdout


def test_no_module_over_500_lines_and_no_function_over_80_without_a_reason():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 500, path
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                doc = ast.get_docstring(node) or ""
                assert length <= 80 or "long because" in doc, f"{path}:{node.lineno} {node.name} ({length} lines)"
