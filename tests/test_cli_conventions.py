"""Command-line conventions: --version, list --format json, shell completion, help with examples and exit
codes, and a closed stdout pipe (`| head -1`) that ends a command quietly with exit 141."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, cli, git, run_cli

import geval_spec

CONSOLE_SCRIPT = Path(sys.executable).with_name("geval-spec")


def test_version():
    res = run_cli("--version")
    assert res.code == 0 and res.out == f"geval-spec {geval_spec.__version__}\n" and res.err == ""


def test_list_json_has_full_fingerprints_and_data_hashes():
    res = cli("list", "--format", "json")
    assert res.code == 0, res.err
    entries = json.loads(res.out)
    table = cli("list").out
    assert {e["name"] for e in entries} == {line.split()[0] for line in table.splitlines()[1:] if line.strip()}
    demo = next(e for e in entries if e["name"] == "summeval-consistency")
    assert demo["file"] == "specs/summeval-consistency.yaml" and demo["valid"] is True and demo["version"] == 1
    assert len(demo["judging"]) == 64 and len(demo["analysis"]) == 64 and demo["judging"][:10] in table
    assert demo["data_sha256"] == hashlib.sha256((ROOT / demo["data"]).read_bytes()).hexdigest()


def test_list_json_names_an_invalid_spec_and_exits_2(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "bad.yaml").write_text("name: bad\nversion: 1\nstpes: []\n")
    res = run_cli("list", "--format", "json", cwd=tmp_path)
    assert res.code == 2
    [entry] = json.loads(res.out)
    assert entry["valid"] is False and entry["file"] == "specs/bad.yaml"
    assert any("stpes" in p for p in entry["problems"]) and "stpes" in res.err


def test_changed_since_follows_data_files_and_new_specs(tmp_path):
    (tmp_path / "specs" / "data").mkdir(parents=True)
    from e2e_helpers import make_project

    make_project(tmp_path, "http://127.0.0.1:9/v1")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "one")
    res = run_cli("list", "--format", "json", "--changed-since", "HEAD", cwd=tmp_path)
    assert res.code == 0 and json.loads(res.out) == []
    data = tmp_path / "specs" / "data" / "cases.jsonl"
    data.write_text(data.read_text().replace("Source text number 3.", "Source text number three."))
    (tmp_path / "specs" / "other.yaml").write_text((tmp_path / "specs" / "demo.yaml").read_text()
                                                   .replace("name: demo", "name: other"))
    res = run_cli("list", "--changed-since", "HEAD", cwd=tmp_path)
    assert res.code == 0 and "change" in res.out.splitlines()[0]
    res = run_cli("list", "--format", "json", "--changed-since", "HEAD", cwd=tmp_path)
    assert [(e["name"], e["change"]) for e in json.loads(res.out)] == [("demo", "modified"), ("other", "added")]
    res = run_cli("list", "--changed-since", "no-such-rev", cwd=tmp_path)
    assert res.code == 2 and "not a git revision" in res.err and "Traceback" not in res.err


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="needs the installed console script")
def test_shell_completion():
    shown = subprocess.run([str(CONSOLE_SCRIPT), "--show-completion", "bash"], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0 and "_GEVAL_SPEC_COMPLETE=complete_bash" in shown.stdout, shown.stderr
    # the shell is named, never detected from the parent processes (that fails in CI and containers)
    unnamed = subprocess.run([str(CONSOLE_SCRIPT), "--show-completion"], capture_output=True, text=True, timeout=60)
    assert unnamed.returncode == 2 and "requires an argument" in unnamed.stderr
    env = dict(os.environ, _GEVAL_SPEC_COMPLETE="complete_bash", COMP_WORDS="geval-spec val", COMP_CWORD="1")
    done = subprocess.run([str(CONSOLE_SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.split() == ["validate"]


@pytest.mark.parametrize("command", ["init", "list", "validate", "schema", "render", "run", "batches", "import",
                                     "export", "merge", "report", "sweep", "audit", "compare", "label-sample"])
def test_help_has_examples_and_exit_codes(command):
    res = cli(command, "--help")
    assert res.code == 0 and "Examples:" in res.out and "Exit codes:" in res.out
    assert f"  geval-spec {command}" in res.out


def test_top_level_help_lists_every_exit_code():
    res = cli("--help")
    for code in ("0", "1", "2", "3", "70", "130", "141"):
        assert f"\n    {code} " in res.out, code


# -- a closed stdout ----------------------------------------------------------------------------------------

def _to_closed_pipe(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe whose reader has already gone: every write fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        return subprocess.run([sys.executable, "-m", "geval_spec", *args], cwd=cwd, stdout=write,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    finally:
        os.close(write)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[Path, str]:
    project = tmp_path_factory.mktemp("pipe")
    assert run_cli("init", str(project), "--ci", "none").code == 0
    res = run_cli("run", "summary-consistency", "--replay", "specs/cassettes/summary-consistency.jsonl", cwd=project)
    return project, res.out.strip().splitlines()[-1]


@pytest.mark.parametrize("args", [("schema",), ("list",), ("list", "--format", "json"), ("validate",),
                                  ("render", "summeval-consistency", "--format", "json")])
def test_closed_pipe_ends_quietly_with_141(args):
    res = _to_closed_pipe(*args)
    assert res.returncode == 141, res.stderr
    assert res.stderr == "" or ("Traceback" not in res.stderr and "internal error" not in res.stderr), res.stderr


def test_report_to_a_closed_pipe(replayed):
    project, run_id = replayed
    res = _to_closed_pipe("report", run_id, "--out", "-", cwd=project)
    assert res.returncode == 141 and "Traceback" not in res.stderr and "internal error" not in res.stderr


@pytest.mark.parametrize("command", ["geval-spec schema", "geval-spec report {run} --out -"])
def test_pipe_into_head(replayed, command):
    project, run_id = replayed
    script = f"{command.format(run=run_id)} | head -1; echo \"status ${{PIPESTATUS[0]}}\""
    env = dict(os.environ, PATH=f"{CONSOLE_SCRIPT.parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["bash", "-c", script], cwd=project, capture_output=True, text=True, env=env, timeout=300)
    first, status = proc.stdout.splitlines()
    assert first in ("{", "# summary-consistency v1: calibration report")
    # 141 when the pipe was found closed; the whole output may also fit in the pipe before head exits (report's
    # gate then fails: 1). Never a traceback.
    assert status in ("status 141", "status 0", "status 1") and proc.stderr == "", proc.stderr


def test_output_larger_than_the_pipe_whose_reader_leaves_early_ends_with_141():
    """label-sample's 330 KB into `head -1`: the pipe took 73,728 bytes before head left, and Python's buffered
    stdout took that short write for the whole: exit 0, as if all was written, where pipefail needs 141."""
    env = dict(os.environ, PATH=f"{CONSOLE_SCRIPT.parent}{os.pathsep}{os.environ['PATH']}")
    script = ("geval-spec label-sample summeval-consistency-40-labels --n 132 --out - | head -c 100 > /dev/null; "
              "echo \"status ${PIPESTATUS[0]}\"")
    for _ in range(3):
        proc = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
        assert proc.stdout.strip() == "status 141" and proc.stderr == "", proc.stdout + proc.stderr


def test_an_error_reported_into_a_closed_stderr_keeps_its_own_exit_code(tmp_path):
    """`run bad-spec 2>&1 | head -1`: stderr's reader gone while the problems were printed made the exit 1, a
    failed gate's code, for invalid input (2)."""
    spec = ROOT / "specs" / "summeval-consistency.yaml"
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "bad.yaml").write_text(spec.read_text().replace("version:", "verzion:", 1))
    read, write = os.pipe()
    os.close(read)
    try:
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        proc = subprocess.run([sys.executable, "-m", "geval_spec", "validate", "bad"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=write, text=True, env=env, timeout=300)
    finally:
        os.close(write)
    assert proc.returncode == 2, proc.stdout


def test_model_supplies_the_judge_of_a_spec_that_has_none(tmp_path):
    from e2e_helpers import make_project
    from openai_server import FakeOpenAI, ServerConfig

    with FakeOpenAI(ServerConfig()) as srv:
        root = make_project(tmp_path, srv.base_url, n=6, client="openai-http")
        spec = root / "specs" / "demo.yaml"
        text = spec.read_text()
        start = text.index("judge:\n")
        end = text.index("data:\n")
        spec.write_text(text[:start] + text[end:])
        res = cli("validate", cwd=root)
        assert res.code == 0 and "warning: no judge: run needs --model" in res.out + res.err
        res = cli("run", "demo", cwd=root)
        assert res.code == 2 and "names no judge: give --model" in res.err and srv.state.total == 0
        # the model string reaches the local server through litellm's openai/ convention and OPENAI_API_BASE
        os.environ["OPENAI_API_BASE"] = srv.base_url
        try:
            res = cli("run", "demo", "--model", "openai/judge-small", cwd=root)
        finally:
            del os.environ["OPENAI_API_BASE"]
        assert res.code in (0, 1), res.err
        assert srv.state.total == 6 and all(b["top_logprobs"] == 20 for b in srv.state.bodies)
        assert "judge(s) openai/judge-small" in cli("run", "demo", "--model", "openai/judge-small", "--dry-run",
                                                    cwd=root).out


def test_writes_that_fail_exit_2_naming_the_file_and_the_rest_write(tmp_path):
    """A report written through a fixed `<name>.tmp` failed with exit 70 for a name near the file system's limit
    (253 characters and `.tmp`), or a folder of that name; a target that cannot take a rename (/proc) did too."""
    from geval_spec.errors import InputError
    from geval_spec.files import write_atomic

    long_name = tmp_path / ("r" * 250 + ".md")
    write_atomic(long_name, "# report\n")
    assert long_name.read_text() == "# report\n"
    assert oct(long_name.stat().st_mode & 0o777) != oct(0o600)  # the mode of a new file, not mkstemp's
    (tmp_path / "report.md.tmp").mkdir()
    write_atomic(tmp_path / "report.md", "x\n")
    assert (tmp_path / "report.md").read_text() == "x\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([long_name.name, "report.md", "report.md.tmp"])
    with pytest.raises(InputError) as caught:
        write_atomic(Path("/proc/version"), "x\n")
    assert "cannot write /proc/version" in str(caught.value.problems[0].message)
    res = run_cli("audit", "summeval-consistency", "--out", "/proc/version")
    assert res.code == 2 and "/proc/version" in res.err and "Traceback" not in res.err


def test_an_output_never_replaces_a_spec_a_data_file_or_the_store(tmp_path):
    """``--out``, ``--junit`` and export's ``--cassette`` and ``--parquet`` that name a file of specs/ (a spec, its
    data) or the results database, directly or through a link, are refused before anything is read or written; a
    new file anywhere is written. (An export over the data file or the store once replaced it.)"""
    from e2e_helpers import make_project

    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=4)
    (root / ".geval").mkdir()
    (root / ".geval" / "results.duckdb").write_bytes(b"not touched")
    (root / "reports").mkdir()
    (root / "reports" / "link.md").symlink_to(root / "specs" / "demo.yaml")
    (root / "specs" / "data" / "cases.parquet").write_bytes(b"a Parquet data file")
    before = {p: p.read_bytes() for p in (root / "specs").rglob("*") if p.is_file()}
    for args in (["report", "demo", "--out", "specs/demo.yaml"], ["report", "demo", "--out", "reports/link.md"],
                 ["report", "demo", "--junit", "specs/data/cases.jsonl"], ["sweep", "demo", "--out", "specs/demo.yaml"],
                 ["compare", "demo", "demo", "--out", ".geval/results.duckdb"],
                 ["audit", "demo", "--out", "specs/data/cases.jsonl"],
                 ["label-sample", "demo", "--n", "2", "--out", "specs/demo.yaml"],
                 ["run", "demo", "--junit", "specs/demo.yaml", "--dry-run"],
                 ["export", "run_x", "--cassette", "specs/data/cases.jsonl"],
                 ["export", "run_x", "--cassette", ".geval/results.duckdb"],
                 ["export", "run_x", "--cassette", "reports/link.md"],
                 ["export", "run_x", "--parquet", "specs/data"],
                 ["export", "run_x", "--cassette", "c.jsonl", "--parquet", "specs/data"]):
        res = cli(*args, cwd=root)
        assert res.code == 2 and "which an output never replaces" in res.err, (args, res.err)
        assert "Traceback" not in res.err
    assert {p: p.read_bytes() for p in (root / "specs").rglob("*") if p.is_file()} == before
    assert (root / ".geval" / "results.duckdb").read_bytes() == b"not touched"
    assert not (root / "c.jsonl").exists()  # the cassette waits for every output to be checked
    res = cli("audit", "demo", "--out", "specs/audit.md", cwd=root)  # a new file, even in specs/
    assert res.code == 0 and (root / "specs" / "audit.md").is_file(), res.err


@pytest.mark.parametrize("error", ["RuntimeError", "InterruptException"])
def test_a_ctrl_c_inside_a_store_statement_exits_130(error, monkeypatch):
    """DuckDB raises a Ctrl-C during a statement as its own error (a run interrupted while it created its cases
    exited 70, 'internal error: RuntimeError: Query interrupted')."""
    from geval_spec.cli import common

    kind = RuntimeError if error == "RuntimeError" else type("InterruptException", (Exception,), {})

    @common.handled
    def command() -> int:
        raise kind("Query interrupted")

    with pytest.raises(common.typer.Exit) as exited:
        command()
    assert exited.value.exit_code == 130


def test_a_mistyped_run_id_is_not_called_a_spec(tmp_path):
    from e2e_helpers import make_project
    from geval_spec.store.db import Store

    root = make_project(tmp_path, "http://127.0.0.1:9/v1", n=2)
    Store(root / ".geval" / "results.duckdb").close()  # a store, so that the name is what is looked up
    res = cli("report", "run_nope", cwd=root)
    assert res.code == 2 and "neither a run id nor a spec name" in res.err and "run_ and 20 characters" in res.err
    # a well-formed run id given to a command that takes a spec: it was called "neither a run id nor a spec name",
    # with the hint that a run id looks exactly as it did
    for command in (("audit",), ("render",), ("label-sample", "--n", "2")):
        res = cli(*command, "run_25d0c12b9f6b2dafc160", cwd=root)
        assert res.code == 2 and "is a run id; this command takes a spec REF" in res.err, (command, res.err)
        assert "neither" not in res.err


def test_default_outputs_stay_in_the_project_when_a_folder_is_a_link(tmp_path):
    """A committed `reports` (or `.geval`) that is a symbolic link sent `report --format all` (or the store and its
    journals) outside the project while saying "wrote <project>/reports/..."; such a default is refused, and an
    explicit path still goes where it says."""
    import json as json_lib

    from e2e_helpers import make_project

    root = make_project(tmp_path / "p", "http://127.0.0.1:9/v1", n=6)
    outside = tmp_path / "outside"
    outside.mkdir()
    lines = tmp_path / "j.jsonl"
    lines.write_text("".join(json_lib.dumps({"case_id": f"c{i:03d}", "score": 1 + i % 5}) + "\n" for i in range(6)))
    (root / ".geval").symlink_to(outside, target_is_directory=True)
    res = cli("import", "demo", str(lines), cwd=root)
    assert res.code == 2 and ".geval" in res.err and "give --db" in res.err, res.err
    assert list(outside.iterdir()) == []
    (root / ".geval").unlink()
    assert cli("import", "demo", str(lines), cwd=root).code == 0
    (root / "reports").symlink_to(outside, target_is_directory=True)
    for args in (["report", "demo", "--format", "all"], ["audit", "demo"], ["sweep", "demo"],
                 ["label-sample", "demo", "--n", "2"], ["compare", "demo", "demo"]):
        res = cli(*args, cwd=root)
        assert res.code == 2 and "symbolic link that leads outside" in res.err, (args, res.err)
    assert list(outside.rglob("*")) == []
    res = cli("report", "demo", "--out", str(outside / "r.md"), "--exit-zero", cwd=root)  # explicit: written
    assert res.code == 0 and (outside / "r.md").is_file(), res.err


def test_a_spec_file_of_another_project_uses_that_projects_store_and_reports(tmp_path):
    """``run /elsewhere/specs/x.yaml`` made .geval/ in the current folder, and ``report`` of the same path wrote
    reports/ there (or found no database): the project of a spec file is the one its path is in."""
    project, here = tmp_path / "p1", tmp_path / "elsewhere"
    assert cli("init", str(project), "--ci", "none").code == 0
    here.mkdir()
    spec = str(project / "specs" / "summary-consistency.yaml")
    ran = cli("run", spec, "--replay", str(project / "specs" / "cassettes" / "summary-consistency.jsonl"), cwd=here)
    assert ran.code in (0, 1), ran.err
    assert (project / ".geval" / "results.duckdb").is_file() and not (here / ".geval").exists()
    res = cli("report", spec, "--exit-zero", cwd=here)
    assert res.code == 0, res.err
    hint = ran.out.split("next: ")[1].split("  (or:")[0]  # the command the run prints works from here
    assert "--db" in hint, ran.out
    again = cli(*shlex.split(hint)[1:], "--exit-zero", "--out", "-", cwd=here)
    assert again.code == 0, again.err
    assert (project / "reports" / "summary-consistency" / "report.md").is_file() and not (here / "reports").exists()
    run_id = ran.out.strip().splitlines()[-1]
    for args in (("render", spec), ("audit", spec), ("compare", run_id, spec, "--out", "-")):
        assert cli(*args, cwd=here).code == 0
    assert sorted(p.name for p in here.iterdir()) == []
    other = tmp_path / "other"
    assert cli("init", str(other), "--ci", "none").code == 0
    res = cli("--root", str(other), "report", spec, "--exit-zero", cwd=here)  # --root stays the project
    assert res.code == 2 and "no results database" in res.err, res.err


def test_output_to_a_non_blocking_pipe_is_written_whole(tmp_path):
    """Some CI runners leave stdout non-blocking: a large --out - met EAGAIN half-way (an internal error)."""
    script = ("import os, sys, fcntl; fd = sys.stdout.fileno(); "
              "fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK); "
              "from geval_spec.cli.common import write_stdout; write_stdout('x' * 1_000_000)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    import time

    time.sleep(0.5)  # (the pipe fills: the writer meets EAGAIN before anything is read)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and len(out) == 1_000_000, err
