"""The terminal of ``run``, ``compare``, ``duet`` and ``bisect``: live bars (or periodic lines in a CI log) and the
settings they watch runs with, the verdict colours, and the sweep of what dead harnesses left."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, TaskID, TextColumn
from rich.progress import Progress as Bars

from harness.errors import HarnessError
from harness.scenario.model import Scenario
from harness.training.monitor import PeriodicLines, Progress, Show, WatchSettings
from harness.training.registry import EXECUTORS

console = Console(highlight=False)

COLOURS = {
    "pass": "green",
    "fail": "red",
    "inconclusive": "magenta",
    "not checked": "yellow",
    "not gated": "yellow",
    "xfail": "yellow",
    "xpass": "red",
}


class LiveBars:
    """The live line in a terminal: a bar per running training, left behind as its last line when it ends."""

    def __init__(self, console: Console) -> None:
        self.bars = Bars(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[detail]}"),
            console=console,
            transient=True,
        )
        self.tasks: dict[tuple[str, str], TaskID] = {}

    def __call__(self, p: Progress) -> None:
        key = (p.scenario, p.mode)
        if key not in self.tasks:
            if not self.tasks:
                self.bars.start()
            self.tasks[key] = self.bars.add_task(escape(p.label), total=p.steps, detail="")
        self.bars.update(self.tasks[key], completed=p.done, detail=escape(p.detail()))
        if p.outcome:
            self.bars.remove_task(self.tasks.pop(key))
            self.bars.console.print(escape(p.line()), soft_wrap=True, highlight=False)
            if not self.tasks:
                self.bars.stop()


def watching(show: Show | None = None) -> WatchSettings:
    """The runner's dump cap and free-space floor from the environment (``HARNESS_MAX_DUMP``, ``HARNESS_MIN_FREE``)
    with ``show`` as the live line: a value that is no size is one line (``HarnessError``), said before any run."""
    try:
        return WatchSettings.configure(show=show)
    except ValueError as exc:
        raise HarnessError(str(exc)) from None


def live_line(every_s: float) -> Show:
    """Bars in a terminal; plain lines every ``every_s`` elsewhere (a CI log)."""
    if console.is_terminal:
        return LiveBars(console)
    return PeriodicLines(lambda line: console.print(escape(line), soft_wrap=True), every_s)


def sweep(scenarios: Sequence[Scenario] = ()) -> None:
    """Remove what dead harnesses left (containers of a SIGKILLed harness, jobs on the clusters the command and
    ``scenarios`` name), one line each."""
    settings = [s.executor for s in scenarios]
    for executor in EXECUTORS.values():
        for line in executor.sweep(settings):
            console.print(f"harness: {escape(line)}", soft_wrap=True)
