"""``init``: scaffold a working project (an example spec with data and a cassette, the JSON Schema, a CI job).

The scaffold's files are package data in ``geval_spec/cli/scaffold/``. The cassette there was recorded once
by ``tests/make_scaffold_cassette.py`` (the example spec run against the local test server with a scripted
word-overlap judge, then ``export --cassette``); ``tests/test_init.py`` fails when it no longer answers every
request of the example spec, or when recording it again would give other answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Optional

import typer

from geval_spec.cli.common import app, echo, echo_err, handled, shown
from geval_spec.errors import EXIT_OK, InputError, Problem
from geval_spec.values import frozen

SPEC_NAME = "summary-consistency"
CASSETTE = f"specs/cassettes/{SPEC_NAME}.jsonl"
GITIGNORE = ("# geval-spec: the results store is a cache of judge answers (CI restores it); reports are\n"
             "# deterministic and meant to be reviewed in pull requests, so they are committed.\n.geval/\n")
INSTALL_MARK = "@GEVAL_SPEC_INSTALL@"
CI_FILES = {"github": (".github/workflows/geval.yml", "github-workflow.yml"),
            "gitlab": (".gitlab-ci.yml", "gitlab-ci.yml")}


@frozen
class Planned:
    rel: str  # path inside the project, with forward slashes
    text: str
    merge: bool = False  # .gitignore: add the missing lines to an existing file instead of replacing it


def _packaged(name: str) -> str:
    from importlib import resources  # here: 8 ms of imports that only init needs

    return (resources.files("geval_spec.cli") / "scaffold" / name).read_text(encoding="utf-8")


def default_install() -> tuple[str, str | None]:
    """What the CI job installs when init is given no --install, and a note when that may not be installable.

    geval-spec==<this version> from the package index, unless this geval-spec was installed from a git
    repository that CI can reach (an https URL, PEP 610's direct_url.json): then that commit. Installed from a
    folder or a file (a clone, a wheel), CI cannot get it from there, and the note says to give --install.
    """
    from geval_spec import __version__
    from geval_spec.redact import redact, url_credentials

    pinned = f"geval-spec=={__version__}"
    origin = _direct_url()
    if origin is None:
        return pinned, None
    url, vcs = origin
    commit = vcs.get("commit_id") if vcs is not None else None
    if vcs is not None and vcs.get("vcs") == "git" and url.startswith("https://") and isinstance(commit, str) \
            and url_credentials(url) is None:
        return f"geval-spec @ git+{url}@{commit}", None
    return pinned, (f"this geval-spec was installed from {redact(url)}, which the CI job cannot reach; it installs {pinned} "
                    "from the package index instead: if that is not published there, run init again with --install "
                    "and a git URL or a wheel in the repository (docs/ci.md)")


def _direct_url() -> tuple[str, dict[str, Any] | None] | None:
    """(URL, vcs_info) of this geval-spec when it was installed from a URL rather than an index; None otherwise."""
    from importlib.metadata import distributions

    for dist in distributions(name="geval-spec"):
        text = dist.read_text("direct_url.json")
        try:
            info = json.loads(text) if text else None
        except ValueError:
            continue
        if isinstance(info, dict) and isinstance(info.get("url"), str):
            vcs = info.get("vcs_info")
            return info["url"], vcs if isinstance(vcs, dict) else None
    return None


def scaffold_files(ci: str, install: str) -> list[Planned]:
    """Every file ``init`` writes, with its text."""
    from geval_spec.spec.jsonschema import schema_text

    files = [Planned(f"specs/{SPEC_NAME}.yaml", _packaged("spec.yaml")),
             Planned("specs/data/summaries.jsonl", _packaged("summaries.jsonl")),
             Planned(CASSETTE, _packaged("cassette.jsonl")),
             Planned("schemas/geval-spec.schema.json", schema_text()),
             Planned(".gitignore", GITIGNORE, merge=True)]
    if ci in CI_FILES:
        rel, packaged = CI_FILES[ci]
        # a JSON string is a YAML double-quoted scalar: a quote or a backslash in the value stays in the value (put in
        # as it was, one made the workflow fail to parse, or could add keys of its own)
        files.append(Planned(rel, _packaged(packaged).replace(f'"{INSTALL_MARK}"', json.dumps(install))))
    return files


def _merged(existing: str, wanted: str) -> str:
    """``existing`` with the lines of ``wanted`` it lacks appended (comments only when something is added)."""
    def pattern(line: str) -> str:  # ".geval", "/.geval" and ".geval/" all ignore the store
        return line.strip().strip("/")

    have = {pattern(line) for line in existing.splitlines()}
    missing = [line for line in wanted.splitlines() if line.strip() and not line.startswith("#")
               and pattern(line) not in have]
    if not missing:
        return existing
    comments = [line for line in wanted.splitlines() if line.startswith("#")]
    sep = "" if not existing or existing.endswith("\n") else "\n"
    return existing + sep + ("\n" if existing else "") + "\n".join(comments + missing) + "\n"


def plan_writes(root: Path, files: list[Planned], force: bool) -> list[tuple[Planned, str, str]]:
    """(file, new text, what happens) for every file; raises InputError naming each file that differs."""
    out: list[tuple[Planned, str, str]] = []
    clashes: list[Problem] = []
    for f in files:
        path = root / f.rel
        if path.is_dir():
            clashes.append(Problem("is a folder; init would write a file here", file=shown(path)))
            continue
        existing = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
        text = _merged(existing or "", f.text) if f.merge else f.text
        if existing is None:
            out.append((f, text, "created"))
        elif existing == text:
            out.append((f, text, "unchanged"))
        elif f.merge or force:
            out.append((f, text, "updated" if f.merge else "overwritten"))
        else:
            clashes.append(Problem("exists and differs from what init writes; left as it is",
                                   file=shown(path), hint="move it away, or run init again with --force"))
    if clashes:
        raise InputError(problems=clashes)
    return out


@app.command(short_help="Scaffold a project: example spec, data, cassette, schema, CI workflow.")
@handled
def init(
    directory: Path = typer.Argument(Path("."), metavar="DIR", help="Project folder (default: here); created "
                                     "when missing."),
    ci: Literal["github", "gitlab", "none"] = typer.Option(
        "github", "--ci", help="CI job to write: github (.github/workflows/geval.yml), gitlab (.gitlab-ci.yml) "
                               "or none."),
    install: Optional[str] = typer.Option(None, "--install", show_default=False,
                                help="What the CI job pip-installs (default: geval-spec==<this version>); a "
                                     "git URL or a wheel's path works too."),
    force: bool = typer.Option(False, "--force", help="Overwrite files that exist and differ."),
) -> int:
    """Scaffold a project: an example spec with data and a recorded cassette, the JSON Schema, .gitignore and a CI job.

    The example works offline at once (its cassette holds a scripted stand-in
    judge's answers, not a model's). Nothing is written when a file exists
    and differs, unless --force; .gitignore only gains the lines it lacks.

    \b
    Examples:
      geval-spec init                  scaffold here, with a GitHub Actions workflow
      geval-spec init my-evals --ci gitlab
      cd my-evals && geval-spec validate
      geval-spec run summary-consistency --replay specs/cassettes/summary-consistency.jsonl
      geval-spec report summary-consistency

    \b
    Exit codes:
      0  the project was written (or was already up to date)
      2  a file exists and differs (nothing was written), DIR is not a folder, or --install is blank or
         holds a control character (a newline)
    """
    root = directory
    if install is not None and (not install.strip() or any(ord(c) < 32 or ord(c) == 127 for c in install)):
        raise InputError(problems=[Problem(f"--install {install!r} is not a requirement pip can install: give one "
                                           "line, e.g. geval-spec==1.2.0 or a git URL")])
    if root.exists() and not root.is_dir():
        raise InputError(problems=[Problem("is not a folder", file=str(root))])
    note = None
    if install is None:
        install, note = default_install()
    writes = plan_writes(root, scaffold_files(ci, install), force)
    from geval_spec.files import write_atomic

    for f, text, what in writes:
        if what != "unchanged":
            write_atomic(root / f.rel, text)
        echo(f"{what:<11} {shown(root / f.rel)}")
    cd = "" if root.resolve() == Path.cwd().resolve() else f"cd {shown(root)} && "
    echo()
    echo("next (offline, with the example's recorded answers):")
    echo(f"  {cd}geval-spec validate")
    echo(f"  geval-spec run {SPEC_NAME} --replay {CASSETTE}")
    echo(f"  geval-spec report {SPEC_NAME}")
    echo("then edit specs/ into your own evaluation, and judge it with OPENAI_API_KEY set: "
         f"geval-spec run {SPEC_NAME} --dry-run")
    if note is not None and ci != "none":
        echo_err(f"note: {note}")
    return EXIT_OK
