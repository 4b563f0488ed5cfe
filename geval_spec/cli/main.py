"""The console entry point: every command registered on one typer app."""

from __future__ import annotations

import os
import sys

from geval_spec.cli import analysis_commands, run_commands, spec_commands  # noqa: F401  (they register commands)
from geval_spec.cli.common import app


def main() -> None:
    """Run the CLI.

    pydantic's plugin scan is switched off (geval-spec's own models need
    none), and the interpreter's teardown is skipped once output is flushed:
    every command has closed its store and files by the time ``app`` returns,
    and a normal exit spends 20-30 ms tearing down modules (see BENCHMARKS.md).
    """
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
