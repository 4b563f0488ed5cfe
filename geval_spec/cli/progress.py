"""Progress of a run on stderr: a rich progress bar on a terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from geval_spec.cli.common import console

if TYPE_CHECKING:  # the runner is imported by the commands that run, when they run
    from geval_spec.runner.execute import Progress


class ProgressView:
    """A rich progress bar on stderr when it is a terminal; nothing otherwise (the summary follows the run)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.console = console(stderr=True)
        self.live = self.console.is_terminal
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> "ProgressView":
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=self.console,
                           transient=False)
            self.bar.__enter__()
            self.task = self.bar.add_task(self.label, total=None, info="")
        return self

    def update(self, p: Progress) -> None:
        if self.bar is None:
            return
        cost = f" ${p.cost:.4f}" if p.cost else ""
        info = (f"cached {p.cached}  failed {p.failed}  retries {p.retries}  "
                f"tokens {p.prompt_tokens + p.completion_tokens:,}{cost}")
        self.bar.update(self.task, total=p.total or None, completed=p.cached + p.done + p.failed, info=info)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
