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


def test_no_text_file_holds_an_unresolved_merge_conflict():
    """A merge once left its conflict markers in README.md's command table."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    found = []
    for name in tracked.splitlines():
        path = ROOT / name
        if path.suffix not in {".md", ".py", ".yaml", ".yml", ".toml", ".txt", ".j2", ".jinja", ".cfg"}:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")):
                found.append(f"{name}:{number}")
    assert not found
