"""Progress of a run on stderr: a rich bar with an ETA on a terminal, one plain line now and then otherwise.

On a terminal the bar shows cases judged, the rate, cached answers, failures
and cost. Anywhere else (CI logs, a file) a plain line is printed every 10%
of the cases or every 30 s, whichever comes first, and once at the end:
``demo: 5000/20000 cases (25%), 4800 sent, 200 cached, 3 failed, 41.2/s, ETA 6m05s``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from geval_spec.cli.common import console, echo_err

if TYPE_CHECKING:  # the runner is imported by the commands that run, when they run
    from geval_spec.runner.execute import Progress

PLAIN_EVERY = 30.0  # seconds
PLAIN_STEP = 0.1  # share of the cases


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def plain_line(label: str, p: Progress) -> str:
    share = p.cases_done / p.cases if p.cases else 1.0
    line = (f"{label}: {p.cases_done}/{p.cases} cases ({share:.0%}), {p.done} sent, {p.cached} cached, "
            f"{p.failed} failed, {p.rate:.1f}/s")
    elapsed = time.monotonic() - p.started
    if 0 < share < 1 and elapsed > 0:
        line += f", ETA {_duration(elapsed * (1 - share) / share)}"
    if p.cost:
        line += f", ${p.cost:.4f}"
    return line


class ProgressView:
    """Shows a run's progress on stderr (see the module docstring)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.console = console(stderr=True)
        self.live = self.console.is_terminal
        self.bar: Any = None
        self.task: Any = None
        self.last: Progress | None = None
        self._printed_at = time.monotonic()
        self._printed_share = 0.0

    def __enter__(self) -> "ProgressView":
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                           console=self.console, transient=False)
            self.bar.__enter__()
            self.task = self.bar.add_task(self.label, total=None, info="")
        return self

    def update(self, p: Progress) -> None:
        self.last = p
        if self.bar is not None:
            cost = f" ${p.cost:.4f}" if p.cost else ""
            info = (f"{p.rate:.1f}/s  sent {p.done}  cached {p.cached}  failed {p.failed}  retries {p.retries}"
                    f"{cost}")
            self.bar.update(self.task, total=p.cases or None, completed=p.cases_done, info=info)
            return
        share = p.cases_done / p.cases if p.cases else 0.0
        now = time.monotonic()
        if share >= self._printed_share + PLAIN_STEP or now - self._printed_at >= PLAIN_EVERY:
            self._printed_at, self._printed_share = now, share
            echo_err(plain_line(self.label, p))

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
        elif self.last is not None and self.last.cases and self._printed_share < 1.0:
            echo_err(plain_line(self.label, self.last))
