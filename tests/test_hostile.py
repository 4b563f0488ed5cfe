"""Hostile input: what an attacker's pull request or a careless user feeds geval-spec.

Specs, templates and data may come from someone else's pull request and run in
CI next to API keys. Each category below is a table of cases; every case
builds a tiny throw-away project in tmp_path (``e2e_helpers.make_project``:
``specs/demo.yaml`` and four cases in ``specs/data/cases.jsonl``), runs one
or more commands and asserts the CLI contract:

- the documented exit code (0 ok, 1 gate failed, 2 invalid input, 3 judge
  unusable; never 70, an internal error);
- a message that names the problem (case-insensitive regexes of key words,
  not exact wording) and, where it matters, the file and line;
- no Python traceback;
- secrets and files outside the project never printed, limits hit quietly
  (small output), and an exit within the case's timeout.

Cases that cannot hang run in-process (``conftest.cli``, under an alarm);
cases that can hang or eat memory run in a process of their own with a
timeout and an address-space cap (``run_bounded``). Larger fixture files live
in ``tests/hostile/``.

Much of this is not implemented yet: failing cases here are the work list of
the hardening, not flaky tests. Run: ``.venv/bin/python -m pytest -q
tests/test_hostile.py`` (``-k outage``, ``-k secrets``, ... for one category).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

from conftest import TESTS, Result, cli, git
from e2e_helpers import make_project
from geval_spec.store.db import Store

FIX = TESTS / "hostile"
TRACEBACK = "Traceback (most recent call last)"

OUTSIDE = r"outside the project|not allowed"
LIMIT = r"limit|too (large|long|big)|exceed|output size|timed? ?out|took (longer|more)|seconds"
BOOL = r"true/false|true or false|boolean|bool"
WHOLE = r"whole number|integer"
NUMBER = r"expected a number|a valid number"
MARKER = "TOP-SECRET-MARKER-7c1e"  # text of the files outside the project
ENV_KEY = "sk-test-hostile-5b9d0a7e1c"  # OPENAI_API_KEY in the secrets cases
URL_SECRET = "sk-secret-in-url-31f7"  # a credential written into judge.api_base
DEAD = "http://127.0.0.1:9/v1"  # nothing listens there
MEMORY_CAP = 4 << 30  # address space of a subprocess case: a missing limit fails the case, not the machine


# -- the case table ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...] = ("validate", "demo")  # placeholders: {tmp} {root} {run} {long}
    code: int = 2
    msg: tuple[str, ...] = ()  # regexes that must all match stdout + stderr (case-insensitive)
    spec: dict[str, str | None] = field(default_factory=dict)  # "key" or "key.child" -> raw YAML (None: delete)
    files: dict[str, str | bytes | Path] = field(default_factory=dict)  # path under the project root -> content
    setup: Callable[[Path, Path], None] | None = None  # (root, tmp): symlinks, FIFOs, sparse files, git
    at: tuple[str, int | str] | None = None  # file, and its line (or a text on that line), the error points at
    leak: tuple[str, ...] = ()  # texts that must appear nowhere in the output
    post: Callable[[Path, Path], str | None] | None = None  # extra check after the command; returns a problem
    timeout: float = 10.0
    proc: bool = False  # run as a subprocess (the case can hang or eat memory)
    method: str = "logprobs"
    client: str = "openai-http"
    api_base: str = DEAD  # {echo} is the local echo server, {refused} a closed port
    env: dict[str, str] = field(default_factory=dict)
    max_out: int = 100_000  # bytes of stdout and of stderr at most
    needs_run: bool = False  # import tests/hostile/imports/scores.jsonl first; {run} is its run id
    skip_root: bool = False  # the check cannot work as root (root writes anywhere)


def line_mentioned(n: int) -> str:
    return rf"(line |row |:){n}\b"


def params(cases: list[Case]) -> list:
    return [pytest.param(c, id=c.id) for c in cases]


# -- building a project ----------------------------------------------------------------------------
def set_key(text: str, dotted: str, value: str | None) -> str:
    """Replace (or add, or delete with None) one key of the spec written by make_project, as raw YAML."""
    lines = text.splitlines()
    top, _, child = dotted.partition(".")
    i = next((n for n, ln in enumerate(lines) if ln.startswith(f"{top}:")), None)
    if not child:
        if i is not None:
            j = i + 1
            while j < len(lines) and lines[j].startswith(" "):
                j += 1
            del lines[i:j]
        else:
            i = len(lines)
        if value is not None:
            lines.insert(i, f"{top}: {value}")
        return "\n".join(lines) + "\n"
    if i is None:
        lines += [f"{top}:", f"  {child}: {value}"]
        return "\n".join(lines) + "\n"
    assert lines[i].rstrip() == f"{top}:", f"{top} is not a block mapping in the base spec"
    j = i + 1
    while j < len(lines) and lines[j].startswith("  "):
        if lines[j].startswith(f"  {child}:"):
            if value is None:
                del lines[j]
            else:
                lines[j] = f"  {child}: {value}"
            return "\n".join(lines) + "\n"
        j += 1
    if value is not None:
        lines.insert(j, f"  {child}: {value}")
    return "\n".join(lines) + "\n"


def cases_jsonl(humans=(1, 3, 5, 2), ids=("c000", "c001", "c002", "c003"), **extra) -> str:
    """Four cases like make_project's, with chosen human scores and ids."""
    rows = []
    for i, (cid, human) in enumerate(zip(ids, humans)):
        row = {"id": cid, "doc": f"d{i // 2}", "src": f"Source text number {i}.",
               "cand": f"Summary {i} [[score={1 + i}]]", "human": human}
        row.update({k: v[i] for k, v in extra.items()})
        rows.append(json.dumps(row, ensure_ascii=False))
    return "\n".join(rows) + "\n"


def build(tmp: Path, case: Case, urls: dict[str, str] | None = None) -> Path:
    """tmp/proj is the project; tmp itself (outside it) holds files an attacker would like to read."""
    (tmp / "secret.txt").write_text(f"{MARKER}\n")
    (tmp / "secret.j2").write_text(f"{MARKER} {{{{ candidate }}}}\n")
    (tmp / "macros.j2").write_text(f"{{% macro leak() %}}{MARKER}{{% endmacro %}}\n")
    (tmp / "outside_dir").mkdir(exist_ok=True)
    (tmp / "outside_dir" / "t.j2").write_text(f"{MARKER} {{{{ candidate }}}}\n")
    root = tmp / "proj"

    def fill(text: str) -> str:
        for k, v in (urls or {}).items():
            text = text.replace("{" + k + "}", v)
        return text

    make_project(root, fill(case.api_base), n=4, method=case.method, client=case.client, timeout=5, max_retries=1)
    spec = root / "specs" / "demo.yaml"
    text = spec.read_text()
    text = set_key(text, "bootstrap", "{draws: 100}")  # four cases: keeps report under a second
    for key, value in case.spec.items():
        text = set_key(text, key, None if value is None else fill(value))
    spec.write_text(text)
    for rel, content in case.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    if case.setup is not None:
        case.setup(root, tmp)
    return root


def argv_of(case: Case, root: Path, tmp: Path, run_id: str = "") -> list[str]:
    subst = {"{tmp}": str(tmp), "{root}": str(root), "{run}": run_id, "{long}": "r" * 5000}
    out = []
    for a in case.argv:
        for k, v in subst.items():
            a = a.replace(k, v)
        out.append(a)
    return out


# -- running a command -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    code: int  # -1: killed after the timeout
    out: str  # at most the first MB of stdout / stderr
    err: str
    elapsed: float
    out_size: int  # bytes written in all
    err_size: int


class _Alarm(KeyboardInterrupt):
    """Raised by the in-process alarm (a KeyboardInterrupt, so asyncio and the CLI let it through)."""


def cli_within(timeout: float, *args: str, cwd: Path) -> Outcome:
    """conftest.cli under an alarm: a hang fails the case after ``timeout`` seconds."""
    fired = []

    def on_alarm(signum, frame):
        fired.append(True)
        raise _Alarm()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    start = time.perf_counter()
    try:
        res = cli(*args, cwd=cwd)
    except _Alarm:
        res = Result(-1, "", "")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    elapsed = time.perf_counter() - start
    err = res.err + (f"\n[no exit within {timeout:g} s]" if fired else "")
    return Outcome(-1 if fired else res.code, res.out, err, elapsed, len(res.out), len(res.err))


# Subprocess cases are the same command as conftest.run_cli (``python -m geval_spec``, OPENAI_API_KEY
# removed from the environment), with three additions: an address-space cap (a missing limit ends in
# MemoryError instead of a swapping machine), output captured in files (a command that prints a
# gigabyte cannot exhaust the test) and a timeout that becomes exit code -1 instead of an exception.
# Where the platform has it they are forked from multiprocessing's fork server, which imports
# geval-spec and litellm once: still a process of its own with a real exit code, but without paying
# one to six seconds of imports per case. GEVAL_HOSTILE_EXEC=1 runs each as a fresh interpreter instead.
FORK = "forkserver" in multiprocessing.get_all_start_methods() and not os.environ.get("GEVAL_HOSTILE_EXEC")
# imported once by the fork server; a name that no longer imports (a restructured package) is skipped
PRELOAD = [__name__, "geval_spec.cli.main", "geval_spec.spec.load", "geval_spec.runner.run",
           "geval_spec.runner.importer", "geval_spec.store.db", "geval_spec.output.report", "duckdb", "ruamel.yaml",
           "litellm", "openai", "aiohttp"]
_fork_ctx = multiprocessing.get_context("forkserver") if FORK else None
_fork_ready: list[bool] = []
_fork_lock = threading.Lock()
# the same cap for a fresh interpreter, set before geval-spec starts (no preexec_fn: callers use threads)
_EXEC = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, ({0}, {0})); "
         "sys.argv[0] = 'geval-spec'; runpy.run_module('geval_spec', run_name='__main__')").format(MEMORY_CAP)


def _fork_child(args: list[str], cwd: str, env: dict[str, str], out_path: str, err_path: str) -> None:
    """Runs in the forked process: become ``geval-spec ARGS`` in CWD with ENV; exits with its code."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out_path), (2, err_path)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    sys.argv = ["geval-spec", *args]
    from geval_spec.cli.main import main

    main()  # flushes and calls os._exit with the command's exit code


def _noop() -> None:
    pass


def _start_fork_server() -> None:
    """Start the fork server once, outside any case's timeout (litellm takes seconds to import)."""
    with _fork_lock:
        if not _fork_ready:
            _start_fork_server_now()
            _fork_ready.append(True)


def _start_fork_server_now() -> None:
    # the server imports litellm without its network cost-map fetch, as geval-spec does
    server_env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    saved = {k: os.environ.get(k) for k in server_env}
    os.environ.update(server_env)
    try:
        _fork_ctx.set_forkserver_preload(PRELOAD)
        warm = _fork_ctx.Process(target=_noop)
        warm.start()
        warm.join(180)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_bounded(*args: str, cwd: Path, env: dict | None = None, timeout: float = 10.0) -> Outcome:
    """Run ``geval-spec ARGS`` in its own process, bounded in time, memory and captured output."""
    full_env = dict(os.environ)
    full_env.pop("OPENAI_API_KEY", None)
    full_env.update(env or {})
    with tempfile.TemporaryDirectory() as box:
        out_path, err_path = os.path.join(box, "out"), os.path.join(box, "err")
        if FORK:
            _start_fork_server()
            start = time.perf_counter()
            proc = _fork_ctx.Process(target=_fork_child, args=(list(args), str(cwd), full_env, out_path, err_path))
            proc.start()
            proc.join(timeout)
            hung = proc.is_alive()
            if hung:
                proc.kill()
                proc.join()
            code = proc.exitcode
        else:
            with open(out_path, "wb") as out_f, open(err_path, "wb") as err_f:
                start = time.perf_counter()
                proc = subprocess.Popen([sys.executable, "-c", _EXEC, *args], cwd=str(cwd), stdout=out_f,
                                        stderr=err_f, stdin=subprocess.DEVNULL, env=full_env)
                try:
                    code, hung = proc.wait(timeout=timeout), False
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code, hung = proc.wait(), True
        elapsed = time.perf_counter() - start

        def read(path: str) -> tuple[str, int]:
            if not os.path.exists(path):  # the process died before it started the command
                return "", 0
            with open(path, "rb") as fh:
                head = fh.read(1 << 20)
                size = fh.seek(0, os.SEEK_END)
            return head.decode("utf-8", errors="replace"), size

        (out, out_size), (err, err_size) = read(out_path), read(err_path)
    if hung:
        code, err = -1, err + f"\n[no exit within {timeout:g} s]"
    return Outcome(code, out, err, elapsed, out_size, err_size)


def run_case(case: Case, args: list[str], root: Path) -> Outcome:
    if case.proc:
        return run_bounded(*args, cwd=root, env=case.env, timeout=case.timeout)
    return cli_within(case.timeout, *args, cwd=root)


def line_of(path: Path, needle: str) -> int:
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if needle in line:
            return n
    raise AssertionError(f"{needle!r} not in {path}")


EXCERPT = re.compile(r"^\s*>?\s*\d+ \| |^\s+\|")  # the numbered source lines under an error


def problems_of(case: Case, res: Outcome, root: Path, tmp: Path, label: str = "") -> list[str]:
    """Everything wrong with one command's outcome, as short lines (empty: the case passes)."""
    text = res.out + "\n" + res.err
    said = "\n".join(ln for ln in text.splitlines() if not EXCERPT.match(ln))  # messages, not quoted source
    found = []
    if res.code != case.code:
        found.append(f"exit {res.code}, expected {case.code}")
    for rx in case.msg:
        if not re.search(rx, said, re.I):
            found.append(f"no message matching /{rx}/")
    if case.at is not None:
        file, where = case.at
        line = where if isinstance(where, int) else line_of(root / file, where)
        if not re.search(rf"{re.escape(file)}:{line}\b", text):
            found.append(f"message does not point at {file}:{line}")
    if TRACEBACK in text:
        found.append("traceback printed")
    for secret in case.leak:
        if secret in text:
            found.append(f"printed {secret[:40]!r}")
    if res.out_size > case.max_out or res.err_size > case.max_out:
        found.append(f"printed {res.out_size:,} + {res.err_size:,} bytes (limit {case.max_out:,})")
    if res.elapsed > case.timeout:
        found.append(f"took {res.elapsed:.1f} s (limit {case.timeout:g} s)")
    if case.post is not None:
        extra = case.post(root, tmp)
        if extra:
            found.append(extra)
    shown = "\n".join(res.err.strip().splitlines()[-12:])[:1500]
    return [f"{label}{p}" for p in found] + ([f"{label}stderr: {shown}"] if found else [])


def check(case: Case, res: Outcome, root: Path, tmp: Path) -> None:
    found = problems_of(case, res, root, tmp)
    assert not found, "\n".join(found)


# =================================================================================================
# 1. Templates reaching outside the project.
# An attacker's spec wants the judge prompt (sent to a server the attacker may control) or the CI log
# to contain files of the machine: /etc/passwd, /proc/self/environ (the API keys), files next to the
# checkout. They try every way Jinja loads another file, symlinks, NUL bytes and '..' in names.
# Expected: validate and render exit 2 naming the reference, "outside the project", the file and line;
# the outside file's text is never printed.
# =================================================================================================
def tpl(text: str, more: dict[str, str] | None = None) -> dict[str, str]:
    """specs/templates/t.j2 with this text (and more files next to it)."""
    files = {"specs/templates/t.j2": text}
    files.update({f"specs/templates/{k}": v for k, v in (more or {}).items()})
    return files


T = {"prompt.template": "templates/t.j2"}
T2 = ("specs/templates/t.j2", 2)  # the hostile line is line 2 of the template
SPEC_T = ("specs/demo.yaml", "template:")


def _symlink(link: str, target: str | Callable[[Path, Path], Path]):
    def make(root: Path, tmp: Path) -> None:
        path = root / link
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        path.symlink_to(target(root, tmp) if callable(target) else target)
    return make


OUTSIDE_CASES = [
    # a generated-steps lock file that cannot be read is not "missing" (render said the steps were not generated)
    Case("lock-links-to-etc-passwd", spec={"steps": "{generate: true}"},
         setup=_symlink("specs/demo.lock.yaml", "/etc/passwd"), msg=(r"lock file", OUTSIDE), leak=("root:x:0:0",),
         at=("specs/demo.yaml", "steps:")),
    Case("lock-is-a-folder", spec={"steps": "{generate: true}"}, setup=lambda root, tmp: (
        root / "specs" / "demo.lock.yaml").mkdir(), msg=(r"cannot read the lock file", r"demo\.lock\.yaml")),
    Case("spec-nul-byte", files={"specs/demo.yaml": "name: demo\nversion: 1\ntask: a\x00b\n"},
         msg=(r"cannot read YAML", r"#x0000"), at=("specs/demo.yaml", 3)),
    # .git/config holds a CI job's token (actions/checkout's extraheader): inside the project, never read
    Case("include-git-config", spec=T, files={**tpl("{{ candidate }}\n{% include '../../.git/config' %}\n"),
                                              ".git/config": f"[http]\n\textraheader = x {MARKER}\n"},
         msg=(r"\.git", r"not allowed"), at=T2, leak=(MARKER,)),
    Case("data-in-git", spec={"data.path": "../.git/cases.jsonl"},
         files={".git/cases.jsonl": '{"id": "c000", "doc": "d", "src": "s", "cand": "c", "human": 3}\n'},
         msg=(r"\.git", r"not allowed")),
    Case("include-etc-passwd", spec=T, files=tpl("{{ candidate }}\n{% include '/etc/passwd' %}\n"),
         msg=(OUTSIDE, r"/etc/passwd"), at=T2, leak=("root:x:0:0",)),
    Case("include-proc-environ", spec=T, files=tpl("{{ candidate }}\n{% include '/proc/self/environ' %}\n"),
         msg=(OUTSIDE, r"/proc/self/environ"), at=T2, leak=("PATH=",)),
    Case("include-dotdot", spec=T, files=tpl("{{ candidate }}\n{% include '../../../secret.txt' %}\n"),
         msg=(OUTSIDE, r"secret\.txt"), at=T2, leak=(MARKER,)),
    Case("import-dotdot-etc", spec=T,
         files=tpl("{{ candidate }}\n{% import '../../../../../../../../../etc/passwd' as x %}\n"),
         msg=(OUTSIDE, r"etc/passwd"), at=T2, leak=("root:x:0:0",)),
    Case("extends-etc-passwd", spec=T, files=tpl("{{ candidate }}\n{% extends '/etc/passwd' %}\n"),
         msg=(OUTSIDE, r"/etc/passwd"), at=T2, leak=("root:x:0:0",)),
    Case("extends-outside-template", spec=T, files=tpl("{{ candidate }}\n{% extends '../../../secret.j2' %}\n"),
         msg=(OUTSIDE, r"secret\.j2"), at=T2, leak=(MARKER,)),
    Case("from-import-outside-macro", spec=T,
         files=tpl("{{ candidate }}\n{% from '../../../macros.j2' import leak %}{{ leak() }}\n"),
         msg=(OUTSIDE, r"macros\.j2"), at=T2, leak=(MARKER,)),
    Case("include-list-fallback", spec=T,
         files=tpl("{{ candidate }}\n{% include ['missing.j2', '../../../secret.txt'] %}\n"),
         msg=(OUTSIDE, r"secret\.txt"), at=T2, leak=(MARKER,)),
    Case("include-ignore-missing", spec=T,
         files=tpl("{{ candidate }}\n{% include '../../../secret.txt' ignore missing %}\n"),
         msg=(OUTSIDE, r"secret\.txt"), at=T2, leak=(MARKER,)),
    Case("include-name-from-data", spec=T,  # the data, not the template, names the file
         files={**tpl("{{ source }}\n{% include candidate %}\n"),
                "specs/data/cases.jsonl": cases_jsonl(cand=["../../../secret.txt"] * 4)},
         msg=(OUTSIDE, r"secret\.txt"), at=T2, leak=(MARKER,)),
    # a template that is not there says so (Jinja's words were the name alone), and a long name is cut
    Case("include-missing", spec=T, files=tpl("{{ candidate }}\n{% include 'missing.j2' %}\n"),
         msg=(r"no template 'missing\.j2' in the project",), at=T2),
    Case("include-long-missing-name", spec=T, files=tpl("{{ candidate }}\n{% include 'x' * 3000 %}\n"),
         msg=(r"no template 'x{77}\.\.\.' in the project",), at=T2, leak=("x" * 100,)),
    Case("include-through-allowed-template", spec=T,
         files=tpl("{{ candidate }}\n{% include 'inner.j2' %}\n",
                   {"inner.j2": "{% include '../../../secret.txt' %}\n"}),
         msg=(OUTSIDE, r"secret\.txt"), at=("specs/templates/inner.j2", 1), leak=(MARKER,)),
    Case("include-symlink-to-outside", spec=T, files=tpl("{{ candidate }}\n{% include 'part.j2' %}\n"),
         setup=_symlink("specs/templates/part.j2", lambda r, t: t / "secret.txt"),
         msg=(OUTSIDE, r"part\.j2"), at=T2, leak=(MARKER,)),
    Case("include-nul-byte", spec=T,
         files=tpl("{{ candidate }}\n{% include 'inner.j2\\x00/../../../../secret.txt' %}\n"),
         msg=(r"NUL|null byte|\\x00|\\0|" + OUTSIDE,), at=T2, leak=(MARKER,)),
    Case("template-key-etc-passwd", spec={"prompt.template": "/etc/passwd"},
         msg=(OUTSIDE, r"/etc/passwd"), at=SPEC_T, leak=("root:x:0:0",)),
    Case("template-key-dotdot", spec={"prompt.template": "../../secret.j2"},
         msg=(OUTSIDE, r"secret\.j2"), at=SPEC_T, leak=(MARKER,)),
    Case("template-key-dotdot-in-middle", spec={"prompt.template": "templates/../../../secret.j2"},
         files=tpl("{{ candidate }}\n"), msg=(OUTSIDE, r"secret\.j2"), at=SPEC_T, leak=(MARKER,)),
    Case("template-key-nul-byte", spec={"prompt.template": '"templates/t.j2\\0/../../../secret.j2"'},
         files=tpl("{{ candidate }}\n"), msg=(r"NUL|null byte|\\x00|\\0|" + OUTSIDE,), at=SPEC_T,
         leak=(MARKER,)),
    Case("template-symlink-absolute", spec=T, setup=_symlink("specs/templates/t.j2", lambda r, t: t / "secret.j2"),
         msg=(OUTSIDE, r"t\.j2"), at=SPEC_T, leak=(MARKER,)),
    Case("template-symlink-relative", spec=T, setup=_symlink("specs/templates/t.j2", "../../../secret.j2"),
         msg=(OUTSIDE, r"t\.j2"), at=SPEC_T, leak=(MARKER,)),
    Case("templates-folder-symlink", spec=T, setup=_symlink("specs/templates", lambda r, t: t / "outside_dir"),
         msg=(OUTSIDE, r"t\.j2"), at=SPEC_T, leak=(MARKER,)),
]


@pytest.mark.parametrize("case", params(OUTSIDE_CASES))
def test_template_outside_project(case: Case, tmp_path: Path):
    root = build(tmp_path, case)
    found = []
    for command in ("validate", "render"):
        found += problems_of(case, run_case(case, [command, "demo"], root), root, tmp_path, label=f"{command}: ")
    assert not found, "\n".join(found)


def test_templates_inside_the_project_still_work(tmp_path: Path):
    """Control: includes and '..' that stay inside specs/ are fine."""
    case = Case("control", spec={"prompt.template": "templates/sub/../t.j2"},
                files=tpl("{{ candidate }}\n{% include 'part.j2' %}\n", {"part.j2": "Judge {{ source }}.\n",
                                                                        "sub/keep.txt": "a folder for '..'\n"}))
    root = build(tmp_path, case)
    for command in ("validate", "render"):
        res = cli(command, "demo", cwd=root)
        assert res.code == 0, res.err


# =================================================================================================
# 2. Template resource limits.
# A spec whose template makes gigabytes of text or loops for hours: the CI job (and the judge bill)
# pays. Jinja's sandbox blocks range() above 100,000 but not string repetition, huge format widths
# ('{:>999999999}'.format(1) builds a 1 GB string in about a second), replace chains, lipsum, nested
# loops, exponential macros or big-integer powers.
# Expected: validate, render and run --dry-run exit 2 within 10 s naming the template and the limit
# (output size, time, recursion), and print almost nothing.
# =================================================================================================
def bomb(body: str, msg: str = LIMIT) -> dict:
    """specs/templates/bomb.j2: the candidate, then BODY; each command in a process of its own."""
    return dict(spec={"prompt.template": "templates/bomb.j2"},
                files={"specs/templates/bomb.j2": "{{ candidate }}\n" + body + "\n"},
                msg=(r"bomb\.j2", msg), proc=True, max_out=20_000)


LIMIT_CASES = [
    Case("nested-range-loops", **bomb("{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}"
                                      "{% endfor %}")),
    Case("nested-loops-silent", **bomb("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}"
                                       "{% endfor %}")),
    Case("string-times-power", **bomb("{{ 'x' * 10**9 }}")),
    Case("percent-tuple-expansion", **bomb("{{ ('%s' * 99999) % (('x' * 99999,) * 99999) }}")),
    Case("range-join-1e9", **bomb("{{ range(10**9)|join }}")),
    Case("replace-chain-doubling", **bomb("{{ 'x'" + "|replace('x', 'xx')" * 30 + " }}")),
    Case("replace-chain-explosive", **bomb("{% set s = 'x' * 1000 %}{{ s|replace('x', s)|replace('x', s)"
                                           "|replace('x', s) }}")),
    Case("center-2e9", **bomb("[{{ 'x'|center(2000000000) }}]")),
    # tojson puts every value on a line of its own, indented once per level (12 GB and a minute before)
    Case("tojson-indent-nested", **bomb("{{ [[[[[[[[[[1]]]]]]]]]]|tojson(indent=999999999) }}")),
    Case("tojson-indent-flat", **bomb("{{ {'a': 1}|tojson(indent=999999999) }}")),
    Case("tojson-indent-text", **bomb("{{ [[[1]]]|tojson(indent='x' * 400000) }}")),
    Case("format-method-width", **bomb("{{ '{:>999999999}'.format(1) }}|")),
    Case("cycler-loop-huge", **bomb("{% set c = cycler('a', 'b') %}{% for i in range(100000) %}"
                                    "{% for j in range(100000) %}{{ c.next() }}{{ loop.index }}{% endfor %}"
                                    "{% endfor %}")),
    Case("macro-recursion", **bomb("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                                   msg=LIMIT + r"|recursion|depth")),
    Case("macro-exponential", **bomb("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% else %}x{% endif %}"
                                     "{% endmacro %}{{ f(40) }}")),
    Case("namespace-doubling-tiny-output", **bomb("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                                                  "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}")),
    Case("lipsum-huge", **bomb("{{ lipsum(100000, html=False, min=99999, max=100000) }}")),
    Case("big-integer-power", **bomb("{{ 10 ** (10 ** 10) }}")),  # Jinja's ** is left-associative
]


@pytest.mark.parametrize("case", params(LIMIT_CASES))
def test_template_resource_limit(case: Case, tmp_path: Path):
    root = build(tmp_path, case)
    commands = {"validate": ["validate", "demo"], "render": ["render", "demo"],
                "run": ["run", "demo", "--dry-run"]}
    with ThreadPoolExecutor(len(commands)) as pool:  # the three at once: a hang costs 10 s, not 30
        futures = {name: pool.submit(run_case, case, args, root) for name, args in commands.items()}
    found = []
    for name, fut in futures.items():
        found += problems_of(case, fut.result(), root, tmp_path, label=f"{name}: ")
    assert not found, "\n".join(found)


# =================================================================================================
# 3. Secrets.
# A careless user pastes credentials into judge.api_base (committed, printed in error excerpts); an
# attacker's server echoes the Authorization header back in its error body hoping the CI log or the
# results database keeps it.
# Expected: credentials in the URL are refused (exit 2) without printing them; a judge refusing the key
# is exit 3 with the key in no output and in no file of the project (DuckDB store, journal).
# =================================================================================================
class _Echo(BaseHTTPRequestHandler):
    """POST /s<status>/v1/chat/completions answers <status>, echoing the Authorization header."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        m = re.match(r"^/s(\d{3})/", self.path)
        status = int(m.group(1)) if m else 404
        auth = self.headers.get("Authorization", "")
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {auth}", "type": "echo",
                                     "code": str(status)}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Echo-Authorization", auth)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def urls():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        refused = s.getsockname()[1]
    yield {"echo": f"http://127.0.0.1:{server.server_address[1]}", "refused": f"http://127.0.0.1:{refused}"}
    server.shutdown()
    server.server_close()


def no_file_contains(secret: str, skip: tuple[str, ...] = ()):
    def post(root: Path, tmp: Path) -> str | None:
        for path in root.rglob("*"):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and rel not in skip and secret.encode() in path.read_bytes():
                return f"{rel} contains the secret"
        return None
    return post


URL_CRED = {"judge.api_base": f"http://user:{URL_SECRET}@127.0.0.1:9/v1"}
CRED_MSG = (r"credential|password|user ?info|secret|api[_ ]key", r"api_base")
SPEC_FILE = ("specs/demo.yaml",)
RUN_OPTS = ("--retry-budget", "20", "--backoff", "0")

SECRET_CASES = [
    Case("url-credentials-validate", spec=URL_CRED, msg=CRED_MSG, at=("specs/demo.yaml", "api_base:"),
         leak=(URL_SECRET,)),
    Case("url-credentials-render", argv=("render", "demo"), spec=URL_CRED, msg=CRED_MSG, leak=(URL_SECRET,)),
    Case("url-credentials-list", argv=("list",), spec=URL_CRED, msg=CRED_MSG, leak=(URL_SECRET,)),
    Case("url-credentials-run-http", argv=("run", "demo", *RUN_OPTS), spec=URL_CRED, msg=CRED_MSG,
         leak=(URL_SECRET,), post=no_file_contains(URL_SECRET, skip=SPEC_FILE), proc=True),
    Case("url-credentials-run-litellm", argv=("run", "demo", *RUN_OPTS), spec=URL_CRED, client="litellm",
         msg=CRED_MSG, leak=(URL_SECRET,), post=no_file_contains(URL_SECRET, skip=SPEC_FILE), proc=True),
    Case("url-token-as-user", spec={"judge.api_base": f"https://{URL_SECRET}@judge.example.org/v1"},
         msg=CRED_MSG, at=("specs/demo.yaml", "api_base:"), leak=(URL_SECRET,)),
    Case("url-key-in-query", spec={"judge.api_base": f"https://judge.example.org/v1?api_key={URL_SECRET}"},
         msg=CRED_MSG, at=("specs/demo.yaml", "api_base:"), leak=(URL_SECRET,)),
    Case("url-credentials-in-panel", spec={"judge": None, "judges": (
        "\n  - {model: openai/judge-a, api_base: 'http://127.0.0.1:9/v1', top_logprobs: 5}"
        f"\n  - {{model: openai/judge-b, api_base: 'http://bot:{URL_SECRET}@127.0.0.1:9/v1', top_logprobs: 5}}")},
         msg=CRED_MSG, leak=(URL_SECRET,)),
    Case("key-echoed-by-401-http", argv=("run", "demo", *RUN_OPTS), api_base="{echo}/s401/v1", code=3,
         env={"OPENAI_API_KEY": ENV_KEY}, msg=(r"401|auth|unauthori[sz]ed|api key",), leak=(ENV_KEY,),
         post=no_file_contains(ENV_KEY), proc=True),
    Case("key-echoed-by-401-litellm", argv=("run", "demo", *RUN_OPTS), api_base="{echo}/s401/v1", code=3,
         client="litellm", env={"OPENAI_API_KEY": ENV_KEY}, msg=(r"401|auth|unauthori[sz]ed|api key",),
         leak=(ENV_KEY,), post=no_file_contains(ENV_KEY), proc=True),
    Case("key-echoed-by-403-http", argv=("run", "demo", *RUN_OPTS), api_base="{echo}/s403/v1", code=3,
         env={"OPENAI_API_KEY": ENV_KEY}, msg=(r"403|auth|forbidden|permission",), leak=(ENV_KEY,),
         post=no_file_contains(ENV_KEY), proc=True),
    Case("key-echoed-by-500-http", argv=("run", "demo", *RUN_OPTS), api_base="{echo}/s500/v1", code=3,
         env={"OPENAI_API_KEY": ENV_KEY}, msg=(r"500|server error",), leak=(ENV_KEY,),
         post=no_file_contains(ENV_KEY), proc=True),
    Case("key-echoed-by-500-litellm", argv=("run", "demo", *RUN_OPTS), api_base="{echo}/s500/v1", code=3,
         client="litellm", env={"OPENAI_API_KEY": ENV_KEY}, msg=(r"500|server error",), leak=(ENV_KEY,),
         post=no_file_contains(ENV_KEY), proc=True),
]


@pytest.mark.parametrize("case", params(SECRET_CASES))
def test_secrets(case: Case, tmp_path: Path, urls):
    root = build(tmp_path, case, urls)
    check(case, run_case(case, argv_of(case, root, tmp_path), root), root, tmp_path)


# =================================================================================================
# 4. Bounded reads and writes.
# A data file, import file or cassette that never ends (/dev/zero, /dev/urandom), blocks (a FIFO), is a
# folder, is 5 GB, nests 100,000 deep, is not UTF-8, or a path longer than the OS allows; output paths
# that are folders, unwritable or under a regular file.
# Expected: exit 2 within 10 s naming the file, no traceback. A missing output folder is created
# (reports/, test-results/ in a fresh CI checkout are normal): exit 0 and the file is there. With
# --format all nothing is written unless every file can be.
# =================================================================================================
def _fifo(rel: str):
    def make(root: Path, tmp: Path) -> None:
        if not hasattr(os, "mkfifo"):
            pytest.skip("mkfifo is not supported on this platform")
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.unlink()
        os.mkfifo(path)
    return make


def _folder(rel: str):
    def make(root: Path, tmp: Path) -> None:
        path = root / rel
        if path.is_file():
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)
        (path / "x.txt").write_text("x")
    return make


def _sparse(rel: str, size: int = 5 << 30):
    def make(root: Path, tmp: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            fh.truncate(size)
    return make


def _parquet_bomb(rel: str, rows: int = 2_000, width: int = 50_000):
    """A Parquet data file of a few hundred KB whose one long text (dictionary-encoded) decodes to rows x width."""
    def make(root: Path, tmp: Path) -> None:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        text = "y" * width
        table = pa.table({"id": [f"c{i:05d}" for i in range(rows)], "doc": ["d"] * rows, "src": [text] * rows,
                          "cand": [text] * rows, "human": [3.0] * rows})
        pq.write_table(table, root / rel, use_dictionary=True, compression="zstd")
        assert (root / rel).stat().st_size < 1 << 20
    return make


def _foreign_db(rel: str, kind: str):
    """A database that is not a geval-spec store: DuckDB with tables of its own, DuckDB with another meta table,
    or SQLite (which DuckDB would read through an extension it fetches from the network)."""
    def make(root: Path, tmp: Path) -> None:
        path = root / rel
        if kind == "sqlite":
            import sqlite3

            con = sqlite3.connect(path)
            con.execute("CREATE TABLE runs (x)")
            con.commit()
            con.close()
            return
        import duckdb

        con = duckdb.connect(str(path))
        con.execute("CREATE TABLE meta (k VARCHAR)" if kind == "meta" else "CREATE TABLE t (k VARCHAR)")
        con.close()
    return make


def _readonly_folder(rel: str):
    def make(root: Path, tmp: Path) -> None:
        path = root / rel
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o500)
    return make


def _regular_file(rel: str):
    def make(root: Path, tmp: Path) -> None:
        (root / rel).write_text("a regular file\n")
    return make


DEEP = 100_000
DEEP_JSON = '{"id": "c000", "doc": "d0", "src": ' + "[" * DEEP + "]" * DEEP + ', "cand": "x", "human": 1}\n'
DEEP_IMPORT = '{"case_id": "c000", "raw": ' + "[" * DEEP + "]" * DEEP + ', "score": 3}\n'
READ = r"not a regular file|special file|device|fifo|pipe|directory|too (large|big|long)|size|limit|outside"


def exists(rel: str):
    def post(root: Path, tmp: Path) -> str | None:
        return None if (root / rel).is_file() else f"{rel} is missing"
    return post


def unchanged(rel: str, text: str):
    def post(root: Path, tmp: Path) -> str | None:
        return None if (root / rel).read_text() == text else f"{rel} was changed"
    return post


def none_written(*rels: str):
    def post(root: Path, tmp: Path) -> str | None:
        written = [rel for rel in rels if (root / rel).exists()]
        return f"written anyway: {', '.join(written)}" if written else None
    return post


def no_file(path_in_tmp: str):
    def post(root: Path, tmp: Path) -> str | None:
        return f"{path_in_tmp} was created" if (tmp / path_in_tmp).exists() else None
    return post


IMPORT = ("import", "demo")
REPLAY = ("run", "demo", "--replay")
WRITE = r"directory|not a directory|permission|cannot write|not writable|read-only|exists"

READ_CASES = [
    # data.path
    Case("data-parquet-decodes-to-200mb", spec={"data.path": "data/bomb.parquet"}, proc=True,
         setup=_parquet_bomb("specs/data/bomb.parquet"), env={"GEVAL_MAX_READ_BYTES": "16M"},
         msg=(r"bomb\.parquet", r"decodes to more than 16 MB", r"GEVAL_MAX_READ_BYTES")),
    Case("data-dev-zero", spec={"data.path": "/dev/zero", "data.format": "jsonl"}, msg=(r"/dev/zero", READ),
         proc=True),
    Case("data-dev-urandom", spec={"data.path": "/dev/urandom", "data.format": "csv"},
         msg=(r"/dev/urandom", READ), proc=True),
    # an escape from \ud800 to \udfff alone is half of a character: no text to send, hash or store (not an
    # internal error)
    Case("data-lone-surrogate", files={"specs/data/cases.jsonl": cases_jsonl().replace("number 2.", "\\ud800")},
         msg=(r"cases\.jsonl", r"line 3", r"surrogate")),
    # an id or a group is text or a number: true, an object or a list was read as its Python text
    Case("data-id-true", files={"specs/data/cases.jsonl": cases_jsonl(ids=("c000", True, "c002", "c003"))},
         msg=(r"cases\.jsonl", r"line 2", r"id", r"true")),
    Case("data-id-object", files={"specs/data/cases.jsonl": cases_jsonl(ids=("c000", "c001", {"a": 1}, "c003"))},
         msg=(r"cases\.jsonl", r"line 3", r"id", r"an object")),
    Case("data-id-list", files={"specs/data/cases.jsonl": cases_jsonl(ids=(["c0"], "c001", "c002", "c003"))},
         msg=(r"cases\.jsonl", r"line 1", r"id", r"a list")),
    Case("data-group-object", files={"specs/data/cases.jsonl": cases_jsonl(doc=["d0", {"g": 1}, "d1", "d1"])},
         msg=(r"cases\.jsonl", r"line 2", r"doc", r"an object")),
    Case("data-lone-surrogate-render", argv=("render", "demo"),
         files={"specs/data/cases.jsonl": cases_jsonl().replace("number 2.", "\\udfff")},
         msg=(r"cases\.jsonl", r"line 3", r"surrogate")),
    Case("template-lone-surrogate", argv=("render", "demo"), spec={"prompt.template": "templates/s.j2"},
         files={"specs/templates/s.j2": '{{ candidate }} {{ "\\ud800" }}\n'}, msg=(r"s\.j2", r"surrogate")),
    Case("cassette-lone-surrogate", argv=(*REPLAY, "c.jsonl"), files={"c.jsonl": '{"format": "x\\ud800"}\n'},
         msg=(r"c\.jsonl", r"surrogate")),
    *[Case(f"cassette-{key}-{name}", argv=(*REPLAY, "c.jsonl"),
           files={"c.jsonl": '{"format": "geval-spec cassette", "version": 1}\n'
                  '{"hash": "h", "response": {"choices": []}, "' + key + '": ' + value + '}\n'},
           msg=(r"c\.jsonl:2", key, r"at least 0"))
      for key in ("cost", "latency_ms")
      for name, value in (("negative", "-1e308"), ("nan", "NaN"), ("infinite", "Infinity"), ("text", '"1"'))],
    Case("template-over-1mb", argv=("render", "demo"), spec={"prompt.template": "templates/big.j2"},
         files={"specs/templates/big.j2": "{{ candidate }}\n" + "x" * (1 << 20)},
         msg=(r"too large: 1,048,5\d\d bytes, more than the limit of 1,048,576 bytes \(a fixed limit\)",),
         at=("specs/demo.yaml", "template:"), leak=("GEVAL_MAX_READ_BYTES",)),
    Case("data-fifo", setup=_fifo("specs/data/cases.jsonl"), msg=(r"cases\.jsonl", READ), proc=True),
    Case("data-directory", setup=_folder("specs/data/cases.jsonl"), msg=(r"cases\.jsonl", READ), proc=True),
    Case("data-sparse-5gb", setup=_sparse("specs/data/cases.jsonl"), msg=(r"cases\.jsonl", READ), proc=True),
    Case("data-nested-100k", files={"specs/data/cases.jsonl": DEEP_JSON}, proc=True,
         msg=(r"cases\.jsonl", r"deep|nest|depth", line_mentioned(1))),
    # import FILE
    Case("import-dev-zero", argv=(*IMPORT, "/dev/zero"), msg=(r"/dev/zero", READ), proc=True),
    Case("import-dev-urandom", argv=(*IMPORT, "/dev/urandom"), msg=(r"/dev/urandom", READ), proc=True),
    Case("import-fifo", argv=(*IMPORT, "judgments.jsonl"), setup=_fifo("judgments.jsonl"),
         msg=(r"judgments\.jsonl", READ), proc=True),
    Case("import-directory", argv=(*IMPORT, "judgments.jsonl"), setup=_folder("judgments.jsonl"),
         msg=(r"judgments\.jsonl", READ), proc=True),
    Case("import-sparse-5gb", argv=(*IMPORT, "judgments.jsonl"), setup=_sparse("judgments.jsonl"),
         msg=(r"judgments\.jsonl", READ), proc=True),
    Case("import-nested-100k", argv=(*IMPORT, "judgments.jsonl"), files={"judgments.jsonl": DEEP_IMPORT},
         msg=(r"judgments\.jsonl", r"deep|nest|depth", line_mentioned(1)), proc=True),
    # run --replay CASSETTE
    Case("cassette-dev-zero", argv=(*REPLAY, "/dev/zero"), msg=(r"/dev/zero", READ), proc=True),
    Case("cassette-fifo", argv=(*REPLAY, "c.jsonl"), setup=_fifo("c.jsonl"), msg=(r"c\.jsonl", READ), proc=True),
    Case("cassette-directory", argv=(*REPLAY, "c.jsonl"), setup=_folder("c.jsonl"), msg=(r"c\.jsonl", READ),
         proc=True),
    Case("cassette-sparse-5gb", argv=(*REPLAY, "c.jsonl"), setup=_sparse("c.jsonl"), msg=(r"c\.jsonl", READ),
         proc=True),
    Case("cassette-not-utf8", argv=(*REPLAY, "c.jsonl"), files={"c.jsonl": FIX / "cassette-not-utf8.jsonl"},
         msg=(r"c\.jsonl", r"utf-?8|encoding|decode"), proc=True),
    # paths longer than the OS allows
    Case("ref-5000-chars", argv=("validate", "{long}"), msg=(r"too long|no spec|no such",), proc=True),
    Case("ref-is-a-device", argv=("render", "/dev/zero"), msg=(r"/dev/zero", r"not a spec file"), proc=True),
    Case("ref-is-a-fifo", argv=("validate", "specs/ff.yaml"), setup=_fifo("specs/ff.yaml"),
         msg=(r"ff\.yaml", r"not a spec file"), proc=True),
    Case("ref-path-5000-chars", argv=("validate", "specs/{long}.yaml"), msg=(r"too long|no such",), proc=True),
    Case("import-path-5000-chars", argv=(*IMPORT, "{long}.jsonl"), msg=(r"too long|no such|cannot read",),
         proc=True),
    Case("cassette-path-5000-chars", argv=(*REPLAY, "{long}.jsonl"), msg=(r"too long|no such",), proc=True),
    # output paths (a run imported first; these cannot hang: in-process)
    Case("report-out-is-directory", argv=("report", "demo", "--out", "outdir"), needs_run=True,
         setup=_folder("outdir"), msg=(r"outdir", WRITE)),
    Case("report-out-unwritable", argv=("report", "demo", "--out", "ro/report.md"), needs_run=True,
         setup=_readonly_folder("ro"), msg=(r"ro/report\.md", WRITE), skip_root=True),
    Case("report-out-under-file", argv=("report", "demo", "--out", "afile/sub/report.md"), needs_run=True,
         setup=_regular_file("afile"), msg=(r"afile", WRITE)),
    Case("report-junit-is-directory", argv=("report", "demo", "--junit", "outdir"), needs_run=True,
         setup=_folder("outdir"), msg=(r"outdir", WRITE)),
    Case("report-junit-under-file", argv=("report", "demo", "--junit", "afile/sub/junit.xml"), needs_run=True,
         setup=_regular_file("afile"), msg=(r"afile", WRITE)),
    Case("export-cassette-is-directory", argv=("export", "{run}", "--cassette", "outdir"), needs_run=True,
         setup=_folder("outdir"), msg=(r"outdir", WRITE)),
    Case("export-cassette-unwritable", argv=("export", "{run}", "--cassette", "ro/c.jsonl"), needs_run=True,
         setup=_readonly_folder("ro"), msg=(r"ro/c\.jsonl", WRITE), skip_root=True),
    Case("export-cassette-under-file", argv=("export", "{run}", "--cassette", "afile/sub/c.jsonl"),
         needs_run=True, setup=_regular_file("afile"), msg=(r"afile", WRITE)),
    Case("db-under-file", argv=(*IMPORT, "judgments.jsonl", "--db", "afile/sub/results.duckdb"),
         files={"judgments.jsonl": FIX / "imports" / "scores.jsonl"}, setup=_regular_file("afile"),
         msg=(r"afile", WRITE)),
    Case("db-is-directory", argv=(*IMPORT, "judgments.jsonl", "--db", "outdir"),
         files={"judgments.jsonl": FIX / "imports" / "scores.jsonl"}, setup=_folder("outdir"),
         msg=(r"outdir", WRITE)),
    *(Case(f"db-fifo-{argv[0]}", argv=(*argv, "--db", "ff"), setup=_fifo("ff"), proc=True,
           msg=(r"ff", r"not a regular file")) for argv in (("report", "demo", "--exit-zero"), ("sweep", "demo"),
                                                           ("batches",), ("export", "run_x", "--cassette", "c.jsonl"))),
    Case("merge-a-fifo", argv=("merge", "ff", "--db", "m.duckdb"), setup=_fifo("ff"), proc=True,
         msg=(r"ff", r"not a regular file")),
    Case("db-duckdb-not-ours", argv=("report", "demo", "--db", "o.duckdb", "--exit-zero"),
         setup=_foreign_db("o.duckdb", "tables"), msg=(r"o\.duckdb", r"not a geval-spec results database", r"\(t\)")),
    Case("db-duckdb-other-meta", argv=(*IMPORT, "judgments.jsonl", "--db", "o.duckdb"),
         files={"judgments.jsonl": FIX / "imports" / "scores.jsonl"}, setup=_foreign_db("o.duckdb", "meta"),
         msg=(r"o\.duckdb", r"not a geval-spec results database", r"meta")),
    Case("merge-duckdb-not-ours", argv=("merge", "o.duckdb", "--db", "m.duckdb"),
         setup=_foreign_db("o.duckdb", "tables"), msg=(r"o\.duckdb", r"not a geval-spec results database")),
    Case("db-sqlite", argv=("report", "demo", "--db", "s.db", "--exit-zero"), setup=_foreign_db("s.db", "sqlite"),
         msg=(r"s\.db", r"not a DuckDB file")),
    # DuckDB opens a CSV or JSON Lines file as a database in memory: a run's writes would vanish (exit 0 before)
    *(Case(f"db-{name}-{argv[0]}", argv=(*argv, "--db", name), files={
        name: text, "judgments.jsonl": FIX / "imports" / "scores.jsonl"}, msg=(name.replace(".", r"\."),
                                                                             r"not a DuckDB file"),
           post=unchanged(name, text))
      for name, text in (("y.jsonl", '{"a": 1}\n'), ("y.csv", "a,b\n1,2\n"), ("y.json", '[{"a": 1}]'))
      for argv in ((*IMPORT, "judgments.jsonl"), ("report", "demo", "--exit-zero"), ("merge", "judgments.jsonl"))),
    # a folder that takes no new file (/proc): refused before the work, in one message (not after the report)
    *(Case(f"out-in-proc-{n}", argv=("report", "demo", *argv, "--exit-zero"), needs_run=True,
           setup=lambda root, tmp: None if os.path.isdir("/proc/self") else pytest.skip("no /proc"),
           msg=(r"/proc", r"no file can be created"), post=none_written("reports/demo/report.md"))
      for n, argv in enumerate([("--format", "md", "--out", "/proc/version"), ("--junit", "/proc/x.xml")])),
    Case("report-all-json-blocked", argv=("report", "demo", "--format", "all", "--exit-zero"), needs_run=True,
         setup=_folder("reports/demo/report.json"), msg=(r"report\.json", WRITE),
         post=none_written("reports/demo/report.md")),
    Case("report-all-html-blocked", argv=("report", "demo", "--format", "all", "--exit-zero"), needs_run=True,
         setup=_folder("reports/demo/report.html"), msg=(r"report\.html", WRITE),
         post=none_written("reports/demo/report.md", "reports/demo/report.json")),
    # missing folders are created: what CI does with a fresh checkout
    Case("report-out-missing-folder", argv=("report", "demo", "--out", "new/deep/report.md", "--exit-zero"),
         needs_run=True, code=0, msg=(r"wrote",), post=exists("new/deep/report.md")),
    Case("export-cassette-missing-folder", argv=("export", "{run}", "--cassette", "new/deep/c.jsonl"),
         needs_run=True, code=0, msg=(r"wrote",), post=exists("new/deep/c.jsonl")),
]


@pytest.mark.parametrize("case", params(READ_CASES))
def test_bounded_reads_and_writes(case: Case, tmp_path: Path):
    if case.skip_root and os.geteuid() == 0:
        pytest.skip("root writes into a chmod 0o500 folder; the under-a-file cases cover root")
    root = build(tmp_path, case)
    run_id = ""
    if case.needs_run:
        shutil.copyfile(FIX / "imports" / "scores.jsonl", root / "scores.jsonl")
        setup = cli("import", "demo", "scores.jsonl", cwd=root)
        assert setup.code == 0, setup.err
        run_id = setup.out.strip().splitlines()[-1]
    check(case, run_case(case, argv_of(case, root, tmp_path, run_id), root), root, tmp_path)


# =================================================================================================
# 5. Values out of range at validate.
# Numbers no one meant (a version beyond 32 bits, human scores outside their scale, inf, 1e300),
# broken CSV, YAML nested 10,000 deep or an alias bomb, ids that differ only in case, whitespace or
# Unicode normalisation, seeds and thresholds outside their domain.
# Expected: exit 2 naming the key or the data line; NaN human scores are missing (a warning, exit 0).
# =================================================================================================
SCALE_0_5 = {"data.human_scale": "{min: 0, max: 5}"}
HUMAN = r"human"
OUT_OF_SCALE = r"outside|out of range|range|scale|between"
NOT_FINITE = r"finite|\binf\b|infinit|out of range|outside|too large"
DATA = "specs/data/cases.jsonl"
CSV = {"data.path": "data/cases.csv"}


def humans(*values) -> dict[str, str]:
    return {DATA: cases_jsonl(humans=values)}


# a billion laughs: nine levels of nine aliases, 9**9 items once expanded, in one flow sequence
ALIAS_BOMB = "[&l0 [" + ", ".join(["lol"] * 9) + "], " + ", ".join(
    f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)) + "]"

RANGE_CASES = [
    Case("version-beyond-32-bits", spec={"version": "99999999999"},
         msg=(r"version", r"too (large|big)|range|at most|<="),
         at=("specs/demo.yaml", "version:")),
    Case("version-5000-digits", spec={"version": "1" + "0" * 5000}, msg=(r"version", r"too long to be a value"),
         at=("specs/demo.yaml", "version:"), leak=("set_int_max_str_digits",)),
    Case("seed-5000-digits", spec={"bootstrap": "{draws: 100, seed: " + "9" * 5000 + "}"},
         msg=(r"seed", r"too long to be a value"), at=("specs/demo.yaml", "bootstrap:")),
    Case("version-negative", spec={"version": "-3"}, msg=(r"version", r"positive|>=|at least|range|negative"),
         at=("specs/demo.yaml", "version:")),
    Case("human-above-human-scale", spec=SCALE_0_5, files=humans(1, 2, 7, 3),
         msg=(HUMAN, OUT_OF_SCALE, line_mentioned(3))),
    Case("human-below-human-scale", spec=SCALE_0_5, files=humans(-1, 2, 4, 3),
         msg=(HUMAN, OUT_OF_SCALE, line_mentioned(1))),
    Case("human-inf", files=humans(1, "inf", 3, 2), msg=(HUMAN, NOT_FINITE, line_mentioned(2))),
    Case("human-minus-inf", files=humans(1, 2, "-inf", 2), msg=(HUMAN, NOT_FINITE, line_mentioned(3))),
    Case("human-1e300-no-scale", files=humans(1, 2, 1e300, 2), msg=(HUMAN, NOT_FINITE, line_mentioned(3))),
    Case("human-1e300-with-scale", spec=SCALE_0_5, files=humans(1, 2, 1e300, 2),
         msg=(HUMAN, OUT_OF_SCALE, line_mentioned(3))),
    Case("human-scale-1e200", spec={"data.human_scale": "{min: -1e200, max: 1e200}"},
         msg=(r"human_scale", r"within \+-1e\+100"), at=("specs/demo.yaml", "human_scale:")),
    Case("human-underscore-digits", files=humans(1, "1_0", 3, 2), msg=(HUMAN, r"not a number", r"1_0")),
    Case("human-arabic-indic-digit", files=humans(1, "\u0663", 3, 2), msg=(HUMAN, r"not a number")),
    Case("human-fullwidth-digit", files=humans(1, "\uff11", 3, 2), msg=(HUMAN, r"not a number")),
    Case("human-inf-csv", spec=CSV, files={"specs/data/cases.csv": FIX / "data" / "human-inf.csv"},
         msg=(HUMAN, NOT_FINITE, line_mentioned(3))),
    Case("human-nan-is-missing", files=humans(1, "nan", 3, 2), code=0, msg=(r"warning", r"no human score|missing|nan")),
    Case("csv-unterminated-quote", spec=CSV, files={"specs/data/cases.csv": FIX / "data" / "unterminated-quote.csv"},
         msg=(r"cases\.csv", r"quot|unterminated", line_mentioned(3))),
    Case("csv-ragged-rows", spec=CSV, files={"specs/data/cases.csv": FIX / "data" / "ragged.csv"},
         msg=(r"cases\.csv", r"ragged|too (many|few)|\bcolumns\b|number of (fields|values)|expected \d+",
              line_mentioned(3))),
    Case("yaml-nested-sequences-10k", spec={"task": "[" * 10_000 + "]" * 10_000}, timeout=1.0,
         msg=(r"nest|deep|depth",), at=("specs/demo.yaml", "task:")),
    Case("yaml-nested-mappings-10k", spec={"task": "{a: " * 10_000 + "b" + "}" * 10_000}, timeout=1.0,
         msg=(r"nest|deep|depth",), at=("specs/demo.yaml", "task:")),
    Case("yaml-alias-bomb", spec={"description": ALIAS_BOMB}, proc=True, timeout=5.0,
         msg=(r"alias|anchor|too (large|big|many)|limit|nest|expected|text|string",),
         at=("specs/demo.yaml", "description: [&l0")),
    Case("duplicate-ids-casing", files={DATA: cases_jsonl(ids=("a1", "A1", "b2", "c3"))},
         msg=(r"duplicate|differ only|same id", r"A1")),
    Case("duplicate-ids-whitespace", files={DATA: cases_jsonl(ids=("a1", "a1 ", "b2", "c3"))},
         msg=(r"duplicate|differ only|whitespace|same id", r"a1")),
    Case("duplicate-ids-unicode-normalisation", files={DATA: cases_jsonl(
        ids=(unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café"), "b2", "c3"))},
         msg=(r"duplicate|differ only|normali[sz]|same id",)),
    Case("bootstrap-seed-negative", spec={"bootstrap": "{seed: -1}"}, msg=(r"seed", r">=|negative|at least|range"),
         at=("specs/demo.yaml", "bootstrap:")),
    Case("bootstrap-draws-huge", spec={"bootstrap": "{draws: 10000000000}"},
         msg=(r"draws", r"<=|at most|too (large|many)|range"), at=("specs/demo.yaml", "bootstrap:")),
    Case("bootstrap-level-above-1", spec={"bootstrap": "{level: 1.5}"}, msg=(r"level", r"<|at most|range|between"),
         at=("specs/demo.yaml", "bootstrap:")),
    Case("threshold-1.5", spec={"calibration": "{split: all, level: dataset, threshold: 1.5, min_validity: 0}"},
         msg=(r"threshold", r"<=|at most|range|between"), at=("specs/demo.yaml", "calibration:")),
    Case("min-validity-above-1", spec={"calibration": "{split: all, threshold: 0.5, min_validity: 1.5}"},
         msg=(r"min_validity", r"<=|at most|range|between"), at=("specs/demo.yaml", "calibration:")),
    Case("judge-timeout-inf", spec={"judge.timeout": ".inf"}, msg=(r"timeout", r"finite|inf|<=|at most|range"),
         at=("specs/demo.yaml", "timeout:")),
    Case("judge-temperature-nan", spec={"judge.temperature": ".nan"}, msg=(r"temperature", r"nan|finite|number"),
         at=("specs/demo.yaml", "temperature:")),
    # a blank model passed validate (the dry run listed "judge(s)    "), and so did no steps or a blank one
    Case("spec-model-blank", spec={"judge.model": '"   "'}, msg=(r"judge\.model", r"not a model string"),
         at=("specs/demo.yaml", "model:")),
    Case("model-provider-only", spec={"judge.model": "openai/"}, msg=(r"judge\.model", r"not a model string"),
         at=("specs/demo.yaml", "model:")),
    Case("cli-model-provider-only", argv=("run", "demo", "--dry-run", "--model", "openai/"),
         msg=(r"--model 'openai/' is not a model string",)),
    Case("cli-model-with-space-no-spec-judge", argv=("run", "demo", "--dry-run", "--model", "openai/x y"),
         spec={"judge": None}, msg=(r"--model 'openai/x y' is not a model string",)),  # (was exit 70)
    Case("params-key-not-identifier", spec={"judge.params": "{bad key: 1}"},
         msg=(r"judge\.params\.bad key\]: key 'bad key'",), at=("specs/demo.yaml", "params:")),
    Case("steps-empty", spec={"steps": "[]"}, msg=(r"\[steps\]", r"at least 1"), at=("specs/demo.yaml", "steps:")),
    Case("step-blank", spec={"steps": '["Read it.", "  "]'}, msg=(r"steps\.1", r"must not be blank"),
         at=("specs/demo.yaml", "steps:")),
    # .nan and .inf in keys checked only for their type (the fingerprint's JSON refused them first: exit 70)
    Case("params-nan", spec={"judge.params": "{top_p: .nan}"}, msg=(r"judge\.params\.top_p", r"finite"),
         at=("specs/demo.yaml", "params:")),
    Case("params-inf-inside", spec={"judge.params": "{extra_body: {x: [1, -.inf]}}"},
         msg=(r"judge\.params\.extra_body\.x\.1\]", r"finite"), at=("specs/demo.yaml", "params:")),
    Case("split-fraction-nan", spec={"split": "{by: group, fractions: {dev: 0.5, test: .nan}, seed: 1}"},
         msg=(r"split\.fractions\.test", r"finite"), at=("specs/demo.yaml", "split:")),
    Case("estimate-halfwidth-inf", spec={"estimate": "{target_halfwidth: .inf}"},
         msg=(r"target_halfwidth", r"finite"), at=("specs/demo.yaml", "estimate:")),
    Case("max-tokens-beyond-32-bits", spec={"judge.max_tokens": "99999999999"},
         msg=(r"max_tokens", r"too (large|big)|range|at most|<="), at=("specs/demo.yaml", "max_tokens:")),
]


@pytest.mark.parametrize("case", params(RANGE_CASES))
def test_values_out_of_range(case: Case, tmp_path: Path):
    root = build(tmp_path, case)
    cli("schema")  # warm up imports so the 1 s cases time the command, not the first import
    check(case, run_case(case, argv_of(case, root, tmp_path), root), root, tmp_path)


# =================================================================================================
# 6. Imports that do not fit the spec.
# Judgments made elsewhere, for another method, scale or spec: verdicts into a score spec, forms mixed
# in one file, distributions and scores off the scale, case ids of the wrong type, a 100 MB line.
# Expected: exit 2 naming the file and listing the offending lines; nothing stored.
# =================================================================================================
J = "judgments.jsonl"


def imp(fixture: str, *lines: int, method: str = "logprobs", what: str = r".") -> dict:
    return dict(argv=(*IMPORT, J), files={J: FIX / "imports" / fixture}, method=method,
                msg=(r"judgments\.jsonl", what, *(line_mentioned(n) for n in lines)),
                post=no_store)


def no_store(root: Path, tmp: Path) -> str | None:
    """A refused import stores nothing: there is no run to report on."""
    res = cli("report", "demo", "--out", "-", "--exit-zero", cwd=root)
    return None if res.code == 2 else "the import was stored as a run anyway"


def reported_without(secret: str):
    """What was imported is reported (in every format) and stored with the secret masked."""
    def post(root: Path, tmp: Path) -> str | None:
        out = "".join(cli("report", "demo", "--format", fmt, "--out", "-", "--exit-zero", cwd=root).out
                      for fmt in ("md", "json", "html"))
        with Store(root / ".geval" / "results.duckdb") as store:
            out += " ".join(str(r) for r in store.con.execute("SELECT reason FROM judgments").fetchall())
        if secret in out:
            return "the secret is in a report or the store"
        return None if "key [redacted] refused" in out else "the imported error is not reported (masked)"
    return post


def _huge_line(root: Path, tmp: Path) -> None:
    with open(root / J, "w") as fh:
        fh.write('{"case_id": "c000", "score": 3, "raw": "')
        chunk = "x" * (1 << 20)
        for _ in range(100):
            fh.write(chunk)
        fh.write('"}\n')


METHOD = r"method|form"
CASE_ID_TYPE = r"case_id.*(text|string|type|must be)|(text|string|type).*case_id"
IMPORT_CASES = [
    Case("verdicts-into-direct-spec", spec={"scoring.method": "direct"},
         **imp("verdicts.jsonl", 1, 2, 3, 4, what=METHOD)),
    Case("verdicts-into-logprobs-spec", **imp("verdicts.jsonl", 1, 2, 3, 4, what=METHOD)),
    Case("samples-into-verdicts-spec", **imp("samples.jsonl", 1, 2, 3, 4, method="verdicts", what=METHOD)),
    Case("distributions-into-verdicts-spec", **imp("distributions.jsonl", 1, 2, 3, 4, method="verdicts",
                                                   what=METHOD)),
    Case("score-samples-distribution-mixed", **imp("mixed-forms.jsonl", 2, 3, what=r"mix|form|one of|same")),
    Case("distribution-keys-off-scale", **imp("distribution-off-scale.jsonl", 2, 4, what=OUT_OF_SCALE)),
    Case("distribution-keys-not-scores", **imp("distribution-bad-keys.jsonl", 2, 3, what=r"score|key|scale")),
    Case("distribution-not-probabilities", **imp("distribution-not-probabilities.jsonl", 2, 4,
                                                 what=r"probabilit|sum|between|>= 0")),
    Case("scores-off-scale", **imp("score-off-scale.jsonl", 3, 4, what=OUT_OF_SCALE)),
    Case("scores-not-finite", **imp("score-not-finite.jsonl", 1, 2, 3, 4, what=NOT_FINITE + r"|number")),
    Case("samples-off-scale", **imp("samples-off-scale.jsonl", 2, 4, what=OUT_OF_SCALE)),
    Case("case-id-list", **imp("case-id-list.jsonl", 2, 4, what=CASE_ID_TYPE)),
    Case("case-id-object", **imp("case-id-object.jsonl", 2, 4, what=CASE_ID_TYPE)),
    Case("case-id-bool-and-null", **imp("case-id-bool-null.jsonl", 2, 4, what=CASE_ID_TYPE)),
    Case("case-ids-not-in-spec", **imp("unknown-cases.jsonl", 2, 3, what=r"not in|unknown")),
    Case("case-id-twice", **imp("duplicate-cases.jsonl", 3, what=r"twice|duplicate")),
    Case("verdict-level-unknown", **imp("verdict-unknown-level.jsonl", 2, 4, method="verdicts",
                                        what=r"verdict")),
    Case("key-twice-in-a-line", argv=(*IMPORT, J), post=no_store,
         files={J: '{"case_id": "c000", "score": 3}\n{"case_id": "c001", "case_id": "c002", "score": 2}\n'
                   '{"case_id": "c003", "distribution": {"3": 0.5, "3": 0.5}}\n'},
         msg=(r"judgments\.jsonl", r"'case_id' is given twice", r"'3' is given twice", line_mentioned(2),
              line_mentioned(3))),
    Case("error-lone-surrogate", argv=(*IMPORT, J), post=no_store,
         files={J: '{"case_id": "c001", "score": 3}\n{"case_id": "c000", "error": "bad \\ud800 thing"}\n'},
         msg=(r"judgments\.jsonl", r"surrogate", line_mentioned(2))),
    Case("error-quotes-the-key", argv=(*IMPORT, J), code=0, env={"OPENAI_API_KEY": ENV_KEY}, leak=(ENV_KEY,),
         files={J: f'{{"case_id": "c000", "error": "key {ENV_KEY} refused"}}\n{{"case_id": "c001", "score": 3}}\n'},
         msg=(r"imported",), post=reported_without(ENV_KEY)),
    Case("single-line-100mb", argv=(*IMPORT, J), setup=_huge_line, proc=True, post=no_store,
         msg=(r"judgments\.jsonl", r"too (long|large|big)|limit|size", line_mentioned(1))),
]


@pytest.mark.parametrize("case", params(IMPORT_CASES))
def test_imports_that_do_not_fit(case: Case, tmp_path: Path):
    root = build(tmp_path, case)
    check(case, run_case(case, argv_of(case, root, tmp_path), root), root, tmp_path)


# =================================================================================================
# 7. An outage is not a quality verdict.
# The judge answers 401, 404, 429 or 500 to every request, nothing listens, the host does not resolve,
# or litellm has no API key. A run that judged nothing must not end as "gate failed" (exit 1, as if the
# judge were bad): it is exit 3 with a one-line diagnosis, for both clients. The retry budget is large
# enough here not to be spent: the point is that no request ever succeeded.
# =================================================================================================
OUTAGE_OPTS = ("run", "demo", "--retry-budget", "50", "--backoff", "0")
OUTAGES = [
    ("401", "{echo}/s401/v1", r"401|auth|unauthori[sz]ed|api key"),
    ("404", "{echo}/s404/v1", r"404|not found"),
    ("429-always", "{echo}/s429/v1", r"429|rate.?limit"),
    ("500-always", "{echo}/s500/v1", r"500|server error"),
    ("connection-refused", "{refused}/v1", r"connect|refused|reach"),
    ("unresolvable-host", "http://judge.invalid/v1", r"resolve|name|dns|host|reach|connect"),
]
OUTAGE_CASES = [Case(f"{what}-{client}", argv=OUTAGE_OPTS, api_base=base, client=client, code=3, msg=(rx,),
                     proc=True) for what, base, rx in OUTAGES for client in ("openai-http", "litellm")] + [
    Case("no-api-key-litellm-openai", argv=OUTAGE_OPTS, client="litellm", spec={"judge.api_base": None}, code=3,
         msg=(r"api[ _-]?key|OPENAI_API_KEY|credential|auth",), proc=True),
    Case("no-api-key-litellm-anthropic", argv=OUTAGE_OPTS, client="litellm", code=3, proc=True,
         spec={"judge.api_base": None, "judge.model": "anthropic/claude-3-5-haiku-latest", "judge.seed": None,
               "scoring.method": "direct", "judge.top_logprobs": None},
         msg=(r"api[ _-]?key|ANTHROPIC_API_KEY|credential|auth",)),
]


@pytest.mark.parametrize("case", params(OUTAGE_CASES))
def test_outage_is_not_a_quality_verdict(case: Case, tmp_path: Path, urls, monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    root = build(tmp_path, case, urls)
    res = run_case(case, argv_of(case, root, tmp_path), root)
    found = problems_of(case, res, root, tmp_path)
    errors = [ln for ln in res.err.splitlines() if re.search(case.msg[0], ln, re.I)]
    if res.code == 3 and not errors:
        found.append("no single stderr line gives the diagnosis")
    assert not found, "\n".join(found)


# =================================================================================================
# 8. Loose values.
# YAML 1.2 reads `yes` as text; empty or blank --model; a language no plugin checks (the rules would
# silently not run); field names a template cannot use; zero or negative counts; unknown --format and
# --split values; REFs with shell metacharacters or git option injection after '@'.
# Expected: exit 2 with the reason; nothing executed (no file appears).
# =================================================================================================
def git_project(root: Path, tmp: Path) -> None:
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "spec")


DRY = ("run", "demo", "--dry-run")
OPT = r"invalid value|must be|not .*allowed|range|>=|<=|at least|at most"
FIELDS = "{source: src, candidate: cand, %s: src}"
NO_REF = r"no spec|not a git revision|no such|invalid|revision"
EMPTY_MODEL = r"--model|model.*(empty|blank)|(empty|blank).*model"


def mistyped(case_id: str, key: str, value: str, expected: str, named: str | None = None) -> Case:
    """Spec ``key`` (dotted) set to raw YAML ``value`` of the wrong type: the error names the key (or ``named``,
    a key inside a flow mapping) and the ``expected`` type, at the line where ``key`` is written."""
    leaf = key.rsplit(".", 1)[-1]
    return Case(case_id, spec={key: value}, msg=(named or leaf, expected), at=("specs/demo.yaml", f"{leaf}:"))


CALIBRATION = "{split: all, level: dataset, threshold: %s, min_validity: 0}"
LOOSE_CASES = [
    mistyped("json-mode-yes", "judge.json_mode", "yes", BOOL),
    mistyped("json-mode-quoted-true", "judge.json_mode", '"true"', BOOL),
    mistyped("json-mode-one", "judge.json_mode", "1", BOOL),
    mistyped("supports-n-on", "judge.supports_n", "on", BOOL),
    mistyped("compounds-no", "language", "{code: nl-NL, compounds: no}", BOOL, named="compounds"),
    # a number is a number: YAML's true, a quoted number, a float where a count goes are not coerced
    mistyped("version-true", "version", "true", WHOLE),
    mistyped("version-quoted", "version", '"2"', WHOLE),
    mistyped("version-float", "version", "1.0", WHOLE),
    mistyped("max-tokens-true", "judge.max_tokens", "true", WHOLE),
    mistyped("max-tokens-float", "judge.max_tokens", "200.0", WHOLE),
    mistyped("seed-quoted", "judge.seed", '"7"', WHOLE),
    mistyped("top-logprobs-true", "judge.top_logprobs", "true", WHOLE),
    mistyped("temperature-quoted", "judge.temperature", '"0.5"', NUMBER),
    mistyped("temperature-false", "judge.temperature", "false", NUMBER),
    mistyped("threshold-true", "calibration", CALIBRATION % "true", NUMBER, named="threshold"),
    mistyped("threshold-quoted", "calibration", CALIBRATION % '"0.8"', NUMBER, named="threshold"),
    mistyped("fraction-quoted", "split", '{by: group, fractions: {dev: "0.5", test: 0.5}, seed: 1}', NUMBER,
             named="fractions"),
    mistyped("draws-float", "bootstrap", "{draws: 2000.5, seed: 1}", WHOLE, named="draws"),
    mistyped("scale-max-true", "rubric", "{scale: {min: 1, max: true}, anchors: {1: {description: a}}}",
             WHOLE + "|" + NUMBER, named="max"),
    mistyped("anchor-score-float", "rubric", "{scale: {min: 1, max: 2}, anchors: {1: {description: a}, "
             "2.0: {description: b}}}", WHOLE, named="anchors"),
    Case("model-empty", argv=(*DRY, "--model", ""), msg=(EMPTY_MODEL,)),
    Case("model-blank", argv=(*DRY, "--model", "   "), msg=(EMPTY_MODEL,)),
    *(Case(f"import-judge-{n}", argv=(*IMPORT, "judgments.jsonl", "--judge", label),
           files={"judgments.jsonl": FIX / "imports" / "scores.jsonl"}, msg=(r"--judge is empty",))
      for n, label in (("empty", ""), ("blank", "  \t"))),
    Case("language-code-unchecked", spec={"language": "{code: xx-YY}"},
         msg=(r"xx-YY", r"plugin|not (supported|checked)|no .*check|unknown"), at=("specs/demo.yaml", "language:")),
    Case("language-code-english", spec={"language": "{code: en-US}"},
         msg=(r"en-US", r"plugin|not (supported|checked)|no .*check|unknown"), at=("specs/demo.yaml", "language:")),
    Case("field-name-with-space", spec={"data.fields": FIELDS % '"my field"'}, msg=(r"my field", r"identifier"),
         at=("specs/demo.yaml", "fields:")),
    Case("field-name-leading-digit", spec={"data.fields": FIELDS % '"1abc"'}, msg=(r"1abc", r"identifier"),
         at=("specs/demo.yaml", "fields:")),
    Case("field-name-dash", spec={"data.fields": FIELDS % '"a-b"'}, msg=(r"a-b", r"identifier"),
         at=("specs/demo.yaml", "fields:")),
    Case("field-name-empty", spec={"data.fields": FIELDS % '""'}, msg=(r"fields", r"identifier|empty"),
         at=("specs/demo.yaml", "fields:")),
    Case("limit-zero", argv=(*DRY, "--limit", "0"), msg=(r"--limit", OPT)),
    Case("limit-negative", argv=(*DRY, "--limit", "-3"), msg=(r"--limit", OPT)),
    Case("concurrency-zero", argv=(*DRY, "--concurrency", "0"), msg=(r"--concurrency", OPT)),
    Case("concurrency-huge", argv=(*DRY, "--concurrency", "100000"), msg=(r"--concurrency", OPT)),
    Case("retry-budget-negative", argv=(*DRY, "--retry-budget", "-1"), msg=(r"--retry-budget", OPT)),
    Case("backoff-nan", argv=(*DRY, "--backoff", "nan"), msg=(r"--backoff", OPT + r"|nan|finite")),
    Case("render-format-unknown", argv=("render", "demo", "--format", "yaml"), msg=(r"--format", r"yaml")),
    Case("report-format-unknown", argv=("report", "demo", "--format", "pdf"), msg=(r"--format", r"pdf")),
    Case("audit-format-unknown", argv=("audit", "demo", "--format", "xml"), msg=(r"--format", r"xml")),
    Case("schema-format-unknown", argv=("schema", "--format", "toml"), msg=(r"--format", r"toml")),
    Case("split-bogus", argv=(*DRY, "--split", "bogus"), msg=(r"--split", r"bogus")),
    Case("report-temperature-zero", argv=("report", "demo", "--temperature", "0"), msg=(r"--temperature", OPT)),
    Case("ref-semicolon", argv=("validate", "demo; touch {tmp}/pwned"), msg=(NO_REF,), post=no_file("pwned")),
    Case("ref-command-substitution", argv=("validate", "$(touch {tmp}/pwned)"), msg=(NO_REF,),
         post=no_file("pwned")),
    Case("ref-at-git-option-injection", argv=("validate", "demo@--output={tmp}/pwned"), setup=git_project,
         msg=(NO_REF,), post=no_file("pwned")),
    Case("ref-at-command-substitution", argv=("validate", "demo@$(touch {tmp}/pwned)"), setup=git_project,
         msg=(NO_REF,), post=no_file("pwned")),
    Case("ref-at-backticks", argv=("validate", "demo@`touch {tmp}/pwned`"), setup=git_project, msg=(NO_REF,),
         post=no_file("pwned")),
    Case("ref-at-dash-option", argv=("validate", "demo@-p"), setup=git_project, msg=(NO_REF,)),
    Case("ref-at-version-huge", argv=("validate", "demo@v99999999999999999999"), setup=git_project,
         msg=(r"version|no commit",)),
    Case("case-id-command-substitution", argv=("render", "demo", "--case", "$(touch {tmp}/pwned)"),
         msg=(r"no case",), post=no_file("pwned")),
]


@pytest.mark.parametrize("case", params(LOOSE_CASES))
def test_loose_values(case: Case, tmp_path: Path):
    root = build(tmp_path, case)
    check(case, run_case(case, argv_of(case, root, tmp_path), root), root, tmp_path)


# -- the corpus as a whole ------------------------------------------------------------------------------
CATEGORIES = {"templates outside the project": OUTSIDE_CASES, "template resource limits": LIMIT_CASES,
              "secrets": SECRET_CASES, "bounded reads and writes": READ_CASES, "values out of range": RANGE_CASES,
              "imports that do not fit": IMPORT_CASES, "outage is not a verdict": OUTAGE_CASES,
              "loose values": LOOSE_CASES}


def test_corpus_size():
    ids = [c.id for cases in CATEGORIES.values() for c in cases]
    assert len(ids) >= 100 and len(set(ids)) == len(ids)
    assert all(len(cases) >= 8 for cases in CATEGORIES.values()), {k: len(v) for k, v in CATEGORIES.items()}
