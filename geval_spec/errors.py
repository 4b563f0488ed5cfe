"""Every error geval-spec raises on purpose, and the exit code each maps to.

    GevalError                   base class; ``exit_code`` says how the CLI exits
    ├── InputError               exit 2: something the user gave us is wrong
    │   ├── SpecError            a spec file (YAML, keys, types, semantics)
    │   ├── DataError            a data or import file (columns, ids, lines)
    │   ├── TemplateError        a prompt template (syntax, undefined variable)
    │   ├── RefError             a REF that names no spec, revision or run
    │   │   └── NoStoredRun      a spec with no stored run to analyse (yet)
    │   └── StoreError           the results database (locked, wrong schema)
    └── JudgeError               exit 3: the judge could not be used
        ├── JudgeUnreachable     connection refused, DNS, auth: nothing works
        ├── RetryBudgetSpent     too many retries: the run stopped early
        ├── MissingLogprobs      the provider returned no logprobs and the
        │                        spec's ``scoring.fallback`` is ``none``
        └── CostCeiling          ``run --max-cost``: the estimate is above it,
                                 or the spend reached it (the run resumes)

A quality gate that fails (exit 1) is not an error: commands return it as a
result. Ctrl-C exits 130. Anything else that escapes is a bug: the CLI prints
a one-line notice, exits 70 and shows the traceback only with ``--debug``.

One more exception exists below this tree and never reaches the CLI:
:class:`geval_spec.judge.clients.base.TransportError`, one failed attempt to
reach a judge, which the runner retries or turns into an invalid judgment or
a :class:`JudgeError`.

Errors of input carry one or more :class:`Problem` values, each pointing at a
file, a line and a column and the key path inside the file, so the CLI can
print them all at once with a numbered excerpt of the file.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Iterable, Literal, Sequence

from geval_spec.redact import redact, secret_values
from geval_spec.values import frozen

EXIT_OK = 0
EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_JUDGE = 3
EXIT_BUG = 70
EXIT_INTERRUPTED = 130

MAX_MESSAGE = 2000  # characters of a message or hint that are kept (a message never quotes a whole file)
EXCERPT_WIDTH = 160  # characters of a quoted source line (a 100 MB JSON line is not printed)

Severity = Literal["error", "warning"]


@frozen
class Problem:
    """One finding about one place in one file."""

    message: str
    file: str | None = None
    line: int | None = None  # 1-based
    col: int | None = None  # 1-based
    key: str | None = None  # dotted key path inside the file, e.g. ``rubric.anchors.3``
    hint: str | None = None
    severity: Severity = "error"
    source: str | None = field(default=None, repr=False, compare=False)  # file text, for excerpts

    def __post_init__(self) -> None:
        # every message is redacted and bounded where it is made: no secret and no huge value is ever printed
        values = secret_values()
        object.__setattr__(self, "message", _clip(redact(self.message, values)))
        if self.hint is not None:
            object.__setattr__(self, "hint", _clip(redact(self.hint, values)))
        if self.file is not None:
            object.__setattr__(self, "file", _clip(redact(self.file, values), 300))
        if self.key is not None:
            object.__setattr__(self, "key", _clip(self.key, 200))

    def where(self) -> str:
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(parts)

    def with_hint(self, hint: str) -> "Problem":
        return replace(self, hint=hint)

    def headline(self) -> str:
        key = f" [{self.key}]" if self.key else ""
        if self.file is None:
            return f"{self.severity}{key}: {self.message}"
        return f"{self.where()}: {self.severity}{key}: {self.message}"

    def excerpt(self, context: int = 2) -> str:
        """A few numbered lines of the file around the problem, with a caret."""
        if self.source is None or self.line is None:
            return ""
        lines = self.source.splitlines()
        if not 1 <= self.line <= len(lines) + 1:
            return ""
        lo = max(1, self.line - context)
        hi = min(len(lines), self.line + context)
        width = len(str(hi))
        out = []
        for n in range(lo, hi + 1):
            mark = ">" if n == self.line else " "
            shown, col = _window(redact(lines[n - 1]), self.col if n == self.line else None)
            out.append(f" {mark} {n:>{width}} | {shown}")
            if n == self.line and col is not None:
                out.append(f"   {' ' * width} | {' ' * (col - 1)}^")
        return "\n".join(out)


def _clip(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _window(text: str, col: int | None) -> tuple[str, int | None]:
    """At most EXCERPT_WIDTH characters of a line, around ``col`` (and the column within them)."""
    if len(text) <= EXCERPT_WIDTH:
        return text, col
    at = (col or 1) - 1
    start = max(0, min(at - EXCERPT_WIDTH // 2, len(text) - EXCERPT_WIDTH))
    shown = text[start:start + EXCERPT_WIDTH]
    prefix = "... " if start else ""
    suffix = " ..." if start + EXCERPT_WIDTH < len(text) else ""
    return prefix + shown + suffix, (None if col is None else at - start + 1 + len(prefix))


class GevalError(Exception):
    """Base of every deliberate error."""

    exit_code = EXIT_INPUT

    def __init__(self, message: str = "", problems: Sequence[Problem] = ()) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        if not message and self.problems:
            message = self.problems[0].headline()
            if len(self.problems) > 1:
                message += f" (and {len(self.problems) - 1} more)"
        super().__init__(_clip(redact(message)))

    @property
    def message(self) -> str:
        return str(self)


class InputError(GevalError):
    exit_code = EXIT_INPUT


class SpecError(InputError):
    pass


class DataError(InputError):
    pass


class TemplateError(InputError):
    pass


class RefError(InputError):
    pass


class NoStoredRun(RefError):
    pass


class StoreError(InputError):
    pass


class JudgeError(GevalError):
    exit_code = EXIT_JUDGE


class JudgeUnreachable(JudgeError):
    pass


class RetryBudgetSpent(JudgeError):
    pass


class MissingLogprobs(JudgeError):
    pass


class CostCeiling(JudgeError):
    pass


def errors_only(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]
