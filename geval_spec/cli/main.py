"""The console entry point: every command registered on one typer app."""

from __future__ import annotations

import os
import sys

# in the order `geval-spec --help` lists the commands
from geval_spec.cli import init_command, spec_commands, run_commands, batch_commands, analysis_commands  # noqa: F401,I001,E501  (they register)
from geval_spec.cli.common import EXIT_BROKEN_PIPE, app, stdout_gone


def main() -> None:
    """Run the CLI.

    pydantic's plugin scan is switched off (geval-spec's own models need
    none), and the interpreter's teardown is skipped once output is flushed:
    every command has closed its store and files by the time ``app`` returns,
    and a normal exit spends 20-30 ms tearing down modules (see BENCHMARKS.md).

    Shell completion takes the shell by name: ``--show-completion bash``.

    A closed stdout (``geval-spec schema | head -1``) ends the command quietly
    with exit 141 (see :mod:`geval_spec.cli.common`), also when the pipe is
    found closed only by the last flush.
    """
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # --show-completion/--install-completion take the shell by name (bash, zsh, fish, powershell, pwsh):
    # typer's own detection walks the parent processes and fails outside an interactive shell (CI, containers,
    # an IDE), printing "Shell  not supported". The switch is typer's own (made for its tests); typer 0.29 reads it when the app is built.
    os.environ.setdefault("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    try:
        app(prog_name="geval-spec")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()
        code = EXIT_BROKEN_PIPE
    try:
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)
