"""The README starts with the two commands, and .ci/run runs the second."""

from __future__ import annotations

from conftest import ROOT


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_starts_with_demo_and_test_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.index("```sh") < 40, "the two commands come first"
    demo, tests = readme_commands()
    assert "geval-spec" in demo and "pytest" in tests


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert readme_commands()[1] in ci
