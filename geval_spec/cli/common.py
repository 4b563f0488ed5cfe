"""What every command shares: the typer app, output (only the CLI prints), errors -> exit codes, the project.

Exit codes: 0 success; 1 a quality gate failed; 2 invalid input (spec, data,
arguments, template); 3 the judge could not be reached or failed beyond the
retry budget; 130 interrupted (Ctrl-C); 141 the reader of standard output
went away (``geval-spec schema | head -1``: 128 + SIGPIPE, what a shell
reports for a command that a closed pipe ends; the command did not finish,
so a gate it would have judged is not reported as passed); 70 an internal
error (a bug: please report it with --debug).
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import typer

from geval_spec.errors import EXIT_BUG, EXIT_INTERRUPTED, EXIT_OK, GevalError, InputError, Problem
from geval_spec.redact import redact, unseen_escaped

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE

HELP = """LLM-as-a-judge evaluation as versioned, reviewable specs.

\b
Start:
  geval-spec init my-evals        an example project with a CI workflow
  geval-spec validate             check every spec in specs/
  geval-spec --install-completion bash   shell completion (bash, zsh, fish, powershell, pwsh)

\b
Exit codes:
  0    success
  1    a quality gate failed, or compare found a significant regression
  2    invalid input (spec, data, arguments, template), with file:line:col
  3    the judge could not be reached or failed beyond the retry budget
  70   an internal error (a bug; --debug shows the traceback)
  130  interrupted (Ctrl-C)
  141  standard output was closed before the command finished (| head)
"""

app = typer.Typer(add_completion=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  no_args_is_help=True, help=HELP)


class State:
    root: Optional[Path] = None
    debug: bool = False
    # set by main(): the process ends with the command (os._exit), so what a command loaded can be frozen out of
    # the garbage collector's scans (freeze_for_good); a command run in-process (typer's test runner) is not
    process_ends: bool = False


STATE = State()


def freeze_for_good() -> None:
    """Move every object alive now out of the garbage collector's scans, when the process ends with the command
    (:data:`State.process_ends`): modules, the spec's models and values live until then. A cycle among them is
    never collected; within one command that is nothing."""
    if STATE.process_ends:
        import gc

        gc.freeze()


DB_HELP = "Results database (default .geval/results.duckdb)."


def safe(text: str) -> str:
    """Text for a terminal or a CI log, where a case id or a judge's text could otherwise move the cursor, erase a
    line or recolour what follows (:func:`geval_spec.redact.unseen_escaped`)."""
    return unseen_escaped(text)


def echo(text: str = "") -> None:
    sys.stdout.write(safe(text) + "\n")


def echo_err(text: str = "") -> None:
    sys.stderr.write(safe(text) + "\n")


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    class PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:  # rich exits 1 (a failed gate's code); let handled() exit 141
            self.quiet = True
            raise BrokenPipeError

    c = PipeAwareConsole(stderr=stderr, highlight=False, soft_wrap=True)
    if not c.is_terminal:  # piped or captured: never truncate columns
        c = PipeAwareConsole(stderr=stderr, highlight=False, soft_wrap=True, width=400)
    return c


def print_problems(problems: Sequence[Problem]) -> None:
    for p in problems:
        echo_err(p.headline())
        if p.hint:
            echo_err(f"  hint: {p.hint}")
        excerpt = p.excerpt()
        if excerpt:
            echo_err(excerpt)
        echo_err()


def handled(fn: Callable[..., int]) -> Callable[..., None]:
    """Turn deliberate errors into messages and exit codes; bugs into one line unless --debug."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except GevalError as exc:
            def show() -> None:
                if STATE.debug:
                    traceback.print_exc()
                if exc.problems:
                    print_problems(exc.problems)
                else:
                    echo_err(f"error: {exc}")
            _to_stderr(show)
            raise typer.Exit(exc.exit_code)
        except KeyboardInterrupt:
            _to_stderr(lambda: echo_err("interrupted"))
            raise typer.Exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            stdout_gone()
            raise typer.Exit(EXIT_BROKEN_PIPE)
        except typer.Exit:
            raise
        except Exception as exc:  # a bug
            if _interrupted(exc):
                _to_stderr(lambda: echo_err("interrupted"))
                raise typer.Exit(EXIT_INTERRUPTED)

            def show_bug() -> None:
                if STATE.debug:
                    traceback.print_exc()
                else:
                    echo_err(redact(f"internal error: {type(exc).__name__}: {exc}"))
                    echo_err("this is a bug in geval-spec; run again with --debug for the traceback and report it")
            _to_stderr(show_bug)
            raise typer.Exit(EXIT_BUG)
        raise typer.Exit(code or EXIT_OK)

    return wrapper


def _to_stderr(show: Callable[[], None]) -> None:
    """Print an error with ``show``; a stderr whose reader went away (``2>&1 | head -1``) is let go quietly, and the
    command keeps the error's own exit code (a closed pipe made it 1, a failed gate's, for invalid input)."""
    try:
        show()
    except BrokenPipeError:
        _gone(sys.stderr)


def _interrupted(exc: Exception) -> bool:
    """A Ctrl-C that landed inside a DuckDB statement, which DuckDB raises as its own error (an interrupt, or a
    RuntimeError 'Query interrupted'), not as KeyboardInterrupt: exit 130 like any Ctrl-C, not 70."""
    return type(exc).__name__ == "InterruptException" or (
        isinstance(exc, RuntimeError) and "query interrupted" in str(exc).lower())


def write_stdout(text: str) -> None:
    """Write ``text`` to stdout to the last byte, or raise BrokenPipeError. (Python's buffered stdout took a pipe's
    short write, when the reader went away in the middle of a large write, for the whole: ``label-sample --out -
    | head -1`` wrote 73,728 of 330,909 bytes and exited 0, as if all was written.)"""
    try:
        fd = sys.stdout.fileno() if os.name == "posix" else -1  # (elsewhere the text layer turns \n into \r\n)
    except (OSError, ValueError, AttributeError):  # (a test runner's buffer: no descriptor)
        fd = -1
    if fd < 0:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    data = memoryview(text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))
    while data:
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:  # (a stdout some runners leave non-blocking: wait until it takes more)
            import select

            select.select([], [fd], [])


def stdout_gone() -> None:
    """The reader of stdout went away: point stdout at /dev/null so that nothing (not the final flush) fails again.

    Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError; the command ends quietly with
    EXIT_BROKEN_PIPE, like a command that SIGPIPE ends in a shell.
    """
    _gone(sys.stdout)


def _gone(stream: Any) -> None:
    """Point ``stream``'s descriptor at /dev/null (its reader went away)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a stream without a file descriptor (a test runner's buffer)
        pass


def project() -> Any:
    from geval_spec.spec.project import Project, find_root

    return Project(STATE.root.resolve() if STATE.root else find_root())


def follow_ref(ref: str) -> None:
    """A REF that is the path of a spec file in a project (a folder above it holds specs/) makes that project the
    command's: its database, reports and data, as when the command runs in it (spec-format.md: the database is
    next to specs/). It made the current folder's before. ``--root``, when given, stays."""
    from geval_spec.spec.project import find_root

    if STATE.root is not None:
        return
    try:
        path = Path(ref)
        if not path.is_file():
            return
        root = find_root(path.resolve().parent)
    except (OSError, ValueError):  # not a path this system can have: the command says so
        return
    if (root / "specs").is_dir():
        STATE.root = root


def db_path(db: Optional[Path]) -> Path:
    """``--db``, or the project's default database (which must not lead outside the project through a link)."""
    from geval_spec.files import leads_outside

    if db is not None:
        path: Path = db.resolve()
        return path
    proj = project()
    default: Path = proj.default_db
    if leads_outside(default, proj.root):
        raise InputError(problems=[Problem(
            f"cannot use the results database {default}: .geval (or a folder on its way) is a symbolic link that "
            "leads outside the project", hint="give --db PATH to use a database elsewhere")])
    return default


def default_output(path: Path, what: str) -> Path:
    """Check a default output (``reports/<spec>/...``) as :func:`prepare_output` does, inside the project."""
    from geval_spec.files import prepare_output

    return prepare_output(path, what, within=project().root)


def kept(db: Optional[Path]) -> dict[Path, str]:
    """What a user's ``--out`` or ``--junit`` never replaces: the project's specs and data (``specs/``) and the
    results database with its write-ahead log and journals."""
    from geval_spec.store.journal import journal_dir

    store = db_path(db)
    return {project().root / "specs": "a file of the project's specs and data (specs/)",
            store: "the results database", store.with_name(store.name + ".wal"): "the results database's log",
            journal_dir(store): "a journal of the results database"}


def shown(path: Path) -> str:
    from geval_spec.spec.project import display_path

    return display_path(path)


def write_out(text: str, out: Optional[Path], default: Path) -> str | None:
    """Print ``text`` (``--out -``) or write it atomically to ``out`` or ``default``; the path written, if any."""
    from geval_spec.files import write_atomic

    if out is not None and str(out) == "-":
        write_stdout(safe(text))
        return None
    path = out or default
    write_atomic(path, text)
    return shown(path)


def _print_version(value: bool) -> None:
    if value:
        from geval_spec import __version__

        echo(f"geval-spec {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _global(
    root: Optional[Path] = typer.Option(None, "--root", help="Project directory (default: the nearest one with "
                                        "specs/ above the current folder, or above a REF's spec file)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    STATE.root = root
    STATE.debug = debug
