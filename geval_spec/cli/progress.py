"""Progress of a run on stderr: a rich bar with an ETA on a terminal, one plain line now and then otherwise.

On a terminal the bar shows cases judged, the current rate (answers and
tokens per minute over the last 10 s), the pace of each judge model
(paced to its limits, or adapting), cached answers, failures and cost.
Anywhere else (CI logs, a file) a plain line is printed every 10% of the
cases or every 30 s, whichever comes first, and once at the end:
``demo: 5000/20000 cases (25%), 4800 sent, 200 cached, 3 failed, 2,472/min (paced to 2,500 rpm), ETA 6m05s``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

from geval_spec.cli.common import console, echo_err

if TYPE_CHECKING:  # the runner is imported by the commands that run, when they run
    from geval_spec.runner.execute import Progress
    from geval_spec.runner.pacing import PaceState

PLAIN_EVERY = 30.0  # seconds
PLAIN_STEP = 0.1  # share of the cases


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def _per_minute(value: float) -> str:
    return f"{value / 1000:,.1f}k" if value >= 100_000 else f"{value:,.0f}"


def pace_text(state: PaceState) -> str:
    """One judge model's pace: "paced to 500 rpm, 200.0k tpm", "adapting: 12 in flight, 500 rpm learned"."""
    limits = ", ".join(f"{_per_minute(v)} {unit}" for v, unit in ((state.rpm, "rpm"), (state.tpm, "tpm")) if v)
    if state.mode == "declared":
        text = f"paced to {limits}" if limits else ""
    else:
        how = "learned" if state.learned else "estimated from 429s"
        text = f"adapting: {state.window} in flight" + (f", {limits} {how}" if limits else "")
    if state.held >= 0.5:
        text += f"{', ' if text else ''}holding {state.held:.0f}s (429)"
    return text


def _counts(p: Progress) -> tuple[int, ...]:
    """What a plain line says apart from its rate and ETA (which change with the clock alone)."""
    return (p.cases_done, p.cases, p.done, p.cached, p.failed)


def may_be_terminal(stream: Any) -> bool:
    """False only where rich's Console would also find no terminal: the stream is no tty and neither
    TTY_COMPATIBLE nor FORCE_COLOR asks for one. Otherwise rich decides."""
    if os.environ.get("TTY_COMPATIBLE", "") in ("0", "1") or "FORCE_COLOR" in os.environ:
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream: let rich decide
        return True


def rate_text(p: Progress) -> str:
    """The current rate, and each judge model's pace where there is one."""
    answers, tokens = p.recent()
    text = f"{_per_minute(answers)}/min"
    if tokens:
        text += f", {_per_minute(tokens)} tokens/min"
    paces = [t for t in (pace_text(s) for s in p.pace) if t]
    return text + (f" ({'; '.join(paces)})" if paces else "")


def plain_line(label: str, p: Progress, sent: str = "sent") -> str:
    """``sent``: what the answers are (``replayed`` from a cassette)."""
    share = p.cases_done / p.cases if p.cases else 1.0
    line = (f"{label}: {p.cases_done}/{p.cases} cases ({share:.0%}), {p.done} {sent}, {p.cached} cached, "
            f"{p.failed} failed, {rate_text(p)}")
    elapsed = time.monotonic() - p.started
    if 0 < share < 1 and elapsed > 0:
        line += f", ETA {_duration(elapsed * (1 - share) / share)}"
    if p.cost:
        line += f", ${p.cost:.4f}"
    return line


class ProgressView:
    """Shows a run's progress on stderr (see the module docstring)."""

    def __init__(self, label: str, sent: str = "sent") -> None:
        """``sent``: what the answers are called (``replayed`` from a cassette: nothing is sent)."""
        self.label = label
        self.sent = sent
        # rich (about 30 ms to import) only where it may draw: a plain stderr that is no terminal gets plain lines
        self.console: Any = console(stderr=True) if may_be_terminal(sys.stderr) else None
        self.live = self.console is not None and self.console.is_terminal
        self.bar: Any = None
        self.task: Any = None
        self.last: Progress | None = None
        self._printed_at = time.monotonic()
        self._printed: tuple[int, ...] | None = None  # the counts of the last plain line (the engine updates one
        # Progress in place, so the object itself cannot tell)
        self._printed_step = 0  # the last tenth of the cases a plain line was printed for

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
            info = (f"{rate_text(p)}  {self.sent} {p.done}  cached {p.cached}  failed {p.failed}  retries {p.retries}"
                    f"{cost}")
            self.bar.update(self.task, total=p.cases or None, completed=p.cases_done, info=info)
            return
        share = p.cases_done / p.cases if p.cases else 0.0
        step = int(share / PLAIN_STEP + 1e-9)  # whole tenths (1e-9: 3/10 is one float below 0.3 * 10)
        now = time.monotonic()
        if step > self._printed_step or now - self._printed_at >= PLAIN_EVERY:
            self._printed_at, self._printed_step, self._printed = now, max(step, self._printed_step), _counts(p)
            echo_err(plain_line(self.label, p, self.sent))

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
        elif self.last is not None and self.last.cases and _counts(self.last) != self._printed:  # where it ended
            echo_err(plain_line(self.label, self.last, self.sent))
