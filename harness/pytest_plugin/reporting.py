"""What the controller adds to the reports: plain node ids under loadgroup, the time breakdown at the end."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

TRAINED = "harness.trained_s"  # an item's user property: the seconds its setup spent in trainings
INCONCLUSIVE = ("harness.verdict", "inconclusive")  # an item's user property: its failure is an INCONCLUSIVE one


class PlainNodeIds:
    """On the xdist controller: loadgroup appends ``@<group>`` to node ids; reports and JUnit keep the plain id."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        base, sep, group = report.nodeid.rpartition("@")
        if sep and group == Path(base.split("::")[0]).stem:
            report.nodeid = base


class TimeBreakdown:
    """Where a run's time went: inside training processes vs. the harness around them (printed at the end).

    Harness overhead = the scenario items' own time (setup, call, teardown) minus time inside trainings:
    launching, waiting, locking, checks, results. Unit tests in the same test run are not counted.
    """

    def __init__(self, workers: int) -> None:
        self.start = time.monotonic()
        self.workers = workers
        self.trained: dict[str, float] = defaultdict(float)
        self.checks: dict[str, float] = defaultdict(float)
        self.items: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = Path(report.nodeid.split("::")[0])
        if path.suffix not in (".yaml", ".yml"):
            return
        self.items[path.stem] += report.duration
        for key, value in report.user_properties if report.when == "setup" else ():
            if key == TRAINED and isinstance(value, int | float):
                self.trained[path.stem] += value
        if report.when == "call":
            self.checks[path.stem] += report.duration

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.trained:
            return
        tr = terminalreporter
        tr.section("harness time breakdown")
        tr.write_line(f"{'scenario':<28}{'trainings (off+on)':>20}{'checks':>10}{'harness':>10}")
        for name in sorted(self.trained):
            rest = self.items[name] - self.trained[name]
            tr.write_line(f"{name:<28}{self.trained[name]:>19.1f}s{self.checks[name]:>9.1f}s{rest:>9.1f}s")
        items = sum(self.items[n] for n in self.trained)
        trained = sum(self.trained.values())
        workers = f", summed over {self.workers} xdist workers" if self.workers > 1 else ""
        tr.write_line(
            f"scenarios {items:.1f}s{workers}: inside training processes {trained:.1f}s, harness overhead "
            f"{items - trained:.1f}s ({100 * (items - trained) / max(items, 1e-9):.1f}%); "
            f"session wall {time.monotonic() - self.start:.1f}s"
        )
