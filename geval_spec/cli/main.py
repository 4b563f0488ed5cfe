"""The console entry point: every command registered on one typer app."""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any

# in the order `geval-spec --help` lists the commands
from geval_spec.cli import init_command, spec_commands, run_commands, batch_commands, analysis_commands  # noqa: F401,I001,E501  (they register)
from geval_spec.cli.common import EXIT_BROKEN_PIPE, STATE, app, stdout_gone


PLUGINS_OFF = ("__all__", "1", "true")  # the values with which pydantic's get_plugins() returns () at once
LOADER = "pydantic.plugin._loader"


class _NoPydanticPlugins(types.ModuleType):
    """Stands in for pydantic's plugin loader while its plugins are switched off.

    With ``PYDANTIC_DISABLE_PLUGINS`` at one of PLUGINS_OFF the loader's
    ``get_plugins()`` returns ``()`` before it looks at anything, but importing
    the loader imports importlib.metadata and, through it, the email package:
    about 25 ms, a tenth of ``validate`` (BENCHMARKS.md). This module answers
    ``get_plugins()`` with ``()`` while the switch is off, and hands anything
    else (or a switch turned on later) to the real loader.
    """

    def get_plugins(self) -> Any:
        if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in PLUGINS_OFF:
            return ()
        return self._real().get_plugins()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # what the import system asks of any module (__path__, ...): a plain module's answer
            raise AttributeError(name)
        return getattr(self._real(), name)

    def _real(self) -> types.ModuleType:
        if sys.modules.get(LOADER) is self:
            sys.modules.pop(LOADER, None)  # (another thread may be handing over at the same moment)
        return importlib.import_module(LOADER)


def skip_plugin_scan() -> None:
    """Put :class:`_NoPydanticPlugins` in place of pydantic's loader, if its plugins are off and it is not loaded."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in PLUGINS_OFF and LOADER not in sys.modules:
        stand_in = _NoPydanticPlugins(LOADER)
        sys.modules[LOADER] = stand_in
        parent = sys.modules.get(LOADER.rpartition(".")[0])
        if parent is not None:  # as an import would: pydantic.plugin._loader reaches it too
            setattr(parent, "_loader", stand_in)


def main() -> None:
    """Run the CLI.

    pydantic's plugin scan is switched off (geval-spec's own models need
    none; :func:`skip_plugin_scan`), and the interpreter's teardown is skipped once output is flushed:
    every command has closed its store and files by the time ``app`` returns,
    and a normal exit spends 20-30 ms tearing down modules (see BENCHMARKS.md).

    Shell completion takes the shell by name: ``--show-completion bash``.

    A closed stdout (``geval-spec schema | head -1``) ends the command quietly
    with exit 141 (see :mod:`geval_spec.cli.common`), also when the pipe is
    found closed only by the last flush.
    """
    STATE.process_ends = True
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    skip_plugin_scan()
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
