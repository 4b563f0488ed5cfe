"""Specs by name, by path, at a git revision and at a version."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import ROOT, cli, git
from geval_spec.errors import RefError, SpecError
from geval_spec.spec.load import load_spec
from geval_spec.spec.project import Project


@pytest.fixture(params=["top", "subfolder"])
def repo(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A git repository with three commits of one spec: v1, v2 (steps edited), v2 again (threshold).

    The project is the repository itself, or a folder inside it (a monorepo): revisions are read relative
    to the project either way.
    """
    top = tmp_path
    if request.param == "subfolder":
        tmp_path = tmp_path / "ml" / "evals"
    (tmp_path / "specs" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "malformed" / "data" / "good.jsonl", tmp_path / "specs" / "data" / "good.jsonl")
    base = (ROOT / "tests" / "malformed" / "11-version-type.yaml").read_text().split("\n", 1)[1]
    spec = tmp_path / "specs" / "demo.yaml"
    spec.write_text(base.replace("name: m11", "name: demo").replace("version: three  # <- error", "version: 1"))
    (top / "README.md").write_text("a repository\n")
    git(top, "init", "-q")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "v1")
    spec.write_text(spec.read_text().replace("version: 1", "version: 2").replace("Judge the summary.",
                                                                                 "Judge the summary strictly."))
    git(tmp_path, "commit", "-qam", "v2")
    spec.write_text(spec.read_text().replace("calibration: {split: all}",
                                             "calibration: {split: all, threshold: 0.7}"))
    git(tmp_path, "commit", "-qam", "v2 threshold")
    return tmp_path


def test_head_and_version_refs(repo: Path):
    proj = Project(repo)
    work = load_spec(proj.resolve("demo"))
    head1 = load_spec(proj.resolve("demo@HEAD~1"))
    v1 = load_spec(proj.resolve("demo@v1"))
    v2 = load_spec(proj.resolve("demo@v2"))
    assert v1.spec.version == 1 and "strictly" not in " ".join(v1.steps)
    assert v2.spec.version == 2 and v2.spec.calibration.threshold == 0.7  # newest commit with version 2
    assert head1.spec.calibration.threshold == 0.8
    assert head1.judging_fp == v2.judging_fp and head1.analysis_fp != v2.analysis_fp
    assert v1.judging_fp != v2.judging_fp
    assert work.judging_fp == v2.judging_fp and work.analysis_fp == v2.analysis_fp
    assert v1.source.display.startswith("specs/demo.yaml@")


def test_ref_errors(repo: Path):
    proj = Project(repo)
    with pytest.raises(RefError, match="no commit of specs/demo.yaml has version 9"):
        proj.resolve("demo@v9")
    with pytest.raises(RefError, match="not a git revision"):
        proj.resolve("demo@nope")
    with pytest.raises(RefError, match="no spec named 'other'"):
        proj.resolve("other")


def test_version_ref_cli(repo: Path):
    res = cli("validate", "demo@v1", "demo@HEAD~1", cwd=repo)
    assert res.code == 0, res.err
    assert "specs/demo.yaml@" in res.out


def test_duplicate_names_name_both_files(repo: Path):
    shutil.copy(repo / "specs" / "demo.yaml", repo / "specs" / "copy.yaml")
    with pytest.raises(SpecError) as info:
        Project(repo).path_of("demo")
    msg = str(info.value.problems[0].message)
    assert "specs/copy.yaml" in msg and "specs/demo.yaml" in msg
    res = cli("validate", cwd=repo)
    assert res.code == 2 and "declared by" in res.err
    res = cli("list", cwd=repo)
    assert res.code == 2 and "declared by" in res.err


def test_not_a_git_repo(tmp_path: Path):
    (tmp_path / "specs").mkdir()
    with pytest.raises(RefError, match="not a git repository"):
        Project(tmp_path).resolve("x@HEAD")
