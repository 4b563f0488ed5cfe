"""Command-line basics: imports stay light, errors stay readable."""

from __future__ import annotations

import os
import re
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
    # neither pydantic's plugin loader nor the plugin scan imports importlib.metadata (and email) when plugins are off
    assert "importlib.metadata" not in modules and "email" not in imported
    if command == ["validate"]:  # what it renders is messages; requests and judgments are for run (BENCHMARKS.md)
        assert "geval_spec.judge.messages" in modules
        assert "geval_spec.judge.types" not in modules and "geval_spec.judge.requests" not in modules


def test_the_stand_in_for_pydantics_plugin_loader_hands_over_when_plugins_are_on(monkeypatch):
    from geval_spec.cli import main as cli_main

    import pydantic.plugin

    monkeypatch.setattr(pydantic.plugin, "_loader", getattr(pydantic.plugin, "_loader", None), raising=False)
    monkeypatch.delitem(sys.modules, cli_main.LOADER, raising=False)
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "some_plugin")  # only some off: pydantic must look
    cli_main.skip_plugin_scan()
    assert cli_main.LOADER not in sys.modules
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    cli_main.skip_plugin_scan()
    stand_in = sys.modules[cli_main.LOADER]
    assert isinstance(stand_in, cli_main._NoPydanticPlugins) and stand_in.get_plugins() == ()
    assert pydantic.plugin._loader is stand_in  # reached as an attribute of its package too
    # pydantic's own call site takes it as its loader
    from pydantic import TypeAdapter

    assert TypeAdapter(int).validate_python("3") == 3
    assert sys.modules[cli_main.LOADER] is stand_in
    # switched on later, or asked for anything else: the real loader answers
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "some_plugin")
    assert list(stand_in.get_plugins()) == []
    real = sys.modules[cli_main.LOADER]
    assert real is not stand_in and real.PYDANTIC_ENTRY_POINT_GROUP == "pydantic"
    monkeypatch.setitem(sys.modules, cli_main.LOADER, stand_in)
    assert stand_in.PYDANTIC_ENTRY_POINT_GROUP == "pydantic"
    with pytest.raises(AttributeError):
        stand_in.__path__


_BLAS_PROBE = ("import os, geval_spec.cli, numpy; print(os.environ.get('OPENBLAS_NUM_THREADS'), "
               "len(os.listdir('/proc/self/task')) if os.path.isdir('/proc/self/task') else 1)")


@pytest.mark.parametrize(("given", "expected"), [
    ({}, "1 1"),  # OpenBLAS starts no thread of its own (they spun 0.1-0.2 s of CPU at every command)
    ({"OPENBLAS_NUM_THREADS": "3"}, "3"),  # the user's choice stands
    ({"OMP_NUM_THREADS": "2"}, "None"),  # which OpenBLAS also reads: not overridden
])
def test_the_command_line_runs_blas_on_one_thread_unless_the_user_chose(given, expected):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                                            "OMP_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", _BLAS_PROBE], env={**env, **given}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(expected), proc.stdout


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


class _Stream:
    """A stderr stand-in: text written, and whether it calls itself a tty."""

    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("env, tty, live", [
    ({}, False, False),  # CI logs, a file, a pipe: plain lines, and rich is not even asked
    ({}, True, True),
    ({"TTY_COMPATIBLE": "1"}, False, True),  # rich's own switches still decide where they are set
    ({"TTY_COMPATIBLE": "0"}, True, False),
    ({"FORCE_COLOR": "1"}, False, True),
    ({"FORCE_COLOR": ""}, True, False),
])
def test_progress_draws_a_bar_where_rich_would_and_plain_lines_elsewhere(monkeypatch, env, tty, live):
    from geval_spec.cli.progress import ProgressView, may_be_terminal
    from geval_spec.runner.execute import Progress

    for var in ("TTY_COMPATIBLE", "FORCE_COLOR", "TTY_INTERACTIVE", "NO_COLOR", "TERM"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    stream = _Stream(tty)
    monkeypatch.setattr(sys, "stderr", stream)
    view = ProgressView("probe")
    assert view.live is live
    if not may_be_terminal(stream):
        assert view.console is None and not live
    with view:
        for n in range(0, 21):
            view.update(Progress(cases=20, cases_done=n, done=n))
    if live:
        assert "probe" in stream.text and "\u2501" in stream.text  # rich's bar
    else:  # one line per tenth of the cases, the last at 100%, no escape codes
        shares = re.findall(r"^probe: \d+/20 cases \((\d+)%\)", stream.text, re.M)
        assert shares == [str(10 * k) for k in range(1, 11)]
        assert "\x1b" not in stream.text


def test_plain_progress_prints_a_line_every_30_seconds_between_tenths(monkeypatch):
    from geval_spec.cli import progress
    from geval_spec.runner.execute import Progress

    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    stream = _Stream(False)
    monkeypatch.setattr(sys, "stderr", stream)
    with progress.ProgressView("slow") as view:
        for n, seconds in ((1, 10), (2, 25), (3, 31), (4, 10), (5, 31)):
            clock[0] += seconds
            view.update(Progress(cases=1000, cases_done=n, done=n))
    counts = re.findall(r"^slow: (\d+)/1000 cases", stream.text, re.M)
    assert counts == ["2", "3", "5"]  # 35 s, 31 s and 41 s after the line before; the last state is not repeated


def test_plain_progress_ends_with_where_the_run_stopped():
    from geval_spec.cli.progress import ProgressView
    from geval_spec.runner.execute import Progress

    stream = _Stream(False)
    old, sys.stderr = sys.stderr, stream
    try:
        with ProgressView("cut") as view:
            p = Progress(cases=100)  # one object, updated in place, as the engine does
            for n in range(1, 56):
                p.cases_done = p.done = n
                view.update(p)
    finally:
        sys.stderr = old
    assert re.findall(r"^cut: (\d+)/100 cases", stream.text, re.M) == ["10", "20", "30", "40", "50", "55"]


def test_only_a_command_that_ends_its_process_freezes_what_it_loaded(monkeypatch):
    """run freezes the objects it loaded out of the garbage collector's scans (freeze_for_good) only when the
    process ends with the command (main() sets STATE.process_ends): a command run in-process, as typer's test
    runner does, must leave the collector as it was (or the test process would never collect its cycles)."""
    import gc

    from geval_spec.cli import common, main as cli_main

    monkeypatch.setattr(common.STATE, "process_ends", False)
    before = gc.get_freeze_count()
    common.freeze_for_good()
    assert gc.get_freeze_count() == before

    seen = []

    class _Exit(Exception):
        pass

    def fake_exit(code):
        raise _Exit(code)

    monkeypatch.setattr(cli_main, "app", lambda **kw: seen.append(common.STATE.process_ends))
    monkeypatch.setattr(cli_main, "skip_plugin_scan", lambda: None)  # (main's other settings: kept from this
    for name in ("PYDANTIC_DISABLE_PLUGINS", "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"):  # test process)
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.setattr(cli_main.os, "_exit", fake_exit)
    with pytest.raises(_Exit):
        cli_main.main()
    assert seen == [True]
    try:
        common.freeze_for_good()
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
