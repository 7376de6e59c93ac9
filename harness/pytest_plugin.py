"""pytest plugin: each scenario file becomes one test item per check (``pytest scenarios/ -k NAME``).

A scenario's trainings run in the setup of its first item (errors there are infrastructure ERRORs, not
check FAILUREs) and are reused by its other items; under pytest-xdist all items of a scenario go to
one worker (``--dist loadgroup``), and the file lock in ``harness.runs`` keeps it to one run anyway.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, NoReturn

import pytest

from harness.checks import CHECKS, Check, CheckContext, CheckResult
from harness.checks.known_gap import check_gap, gap_name
from harness.devices import skip_reason
from harness.errors import HarnessError, ScenarioError, one_line
from harness.gate.baseline import Baseline
from harness.gate.observe import observe_results
from harness.gate.verdicts import compare_scenario
from harness.loader import load_scenario
from harness.registry import EXECUTORS
from harness.results import record_check
from harness.runs import ensure_runs
from harness.scenario import Scenario
from harness.settings import KnownGap

TRAINED = "harness.trained_s"


class CheckFailed(pytest.fail.Exception):  # type: ignore[name-defined]  # public pytest API; mypy sees a function attribute
    """A check's verdict: its problems, one per line, without a traceback (what a known gap's xfail expects)."""

    def __init__(self, scenario: str, result: CheckResult) -> None:
        lines = [f"{scenario}: {result.check} check failed:"] + [f"  - {p}" for p in result.problems]
        super().__init__("\n".join(lines), pytrace=False)


def _fail(exc: HarnessError) -> NoReturn:
    """A run that could not be prepared or did not finish: an ERROR in setup, shown without a traceback."""
    raise pytest.fail.Exception(one_line(exc), pytrace=False) from None


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("harness", "verl precision_debugger regression harness")
    g.addoption("--harness-results", default="results", help="results directory (default: ./results)")
    g.addoption("--executor", choices=list(EXECUTORS), default=None, help="override every scenario's executor")
    g.addoption(
        "--harness-reuse",
        action="store_true",
        help="reuse successful trainings of an earlier session when the scenario's run settings are unchanged",
    )
    g.addoption(
        "--harness-heavy",
        action="store_true",
        default=os.environ.get("HARNESS_HEAVY") == "1",
        help="also run the scenarios marked heavy: true (or set HARNESS_HEAVY=1); otherwise they are skipped",
    )
    g.addoption(
        "--harness-baseline",
        default=None,
        metavar="BASELINE",
        help="add a 'regression' item per scenario: overhead, disk and dump structure against this baseline file",
    )


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"  # keep a scenario's items (and so its trainings) on one worker
    if workerinput and workerinput.get("harness_loadgroup"):
        config.option.loadgroup = True  # xdist set this from the worker's own args, before our change above
    config.stash[_SESSION] = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
    if path := config.getoption("harness_baseline", None):
        try:
            config.stash[_BASELINE] = Baseline.read(Path(path))
        except HarnessError as exc:
            raise pytest.UsageError(f"--harness-baseline: {exc}") from None
    if workerinput is None:
        config.pluginmanager.register(PlainNodeIds(), "harness-plain-nodeids")
        workers = config.getoption("numprocesses", None) or 1
        config.pluginmanager.register(TimeBreakdown(int(workers) if str(workers).isdigit() else 2), "harness-times")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: tell each worker to tag items with their xdist_group, as loadgroup needs."""
    node.workerinput["harness_loadgroup"] = node.config.getoption("dist") == "loadgroup"


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix in (".yaml", ".yml") and file_path.parent.name == "scenarios":
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self) -> list[pytest.Item]:
        try:
            scenario = load_scenario(self.path)
        except ScenarioError as exc:
            raise self.CollectError(f"invalid scenario file ({len(exc.problems)} problems):\n{exc}") from None
        items: list[pytest.Item] = [
            CheckItem.from_parent(self, name=name, scenario=scenario, check=check) for name, check in CHECKS.items()
        ]
        if _BASELINE in self.config.stash:
            items.append(RegressionItem.from_parent(self, name="regression", scenario=scenario))
        for gap in scenario.expect.known_gaps:
            gap_item = GapItem.from_parent(self, name=gap_name(gap), scenario=scenario, gap=gap)
            gap_item.add_marker(pytest.mark.xfail(reason=gap.reason, strict=True, raises=CheckFailed))
            items.append(gap_item)
        for item in items:
            item.add_marker(pytest.mark.xdist_group(scenario.name))
        return items


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, **kw: Any) -> None:
        super().__init__(**kw)
        self.scenario = scenario

    def setup(self) -> None:
        config = self.config
        if reason := skip_reason(self.scenario, os.path.relpath(self.path)):
            pytest.skip(reason)
        if self.scenario.heavy and not config.getoption("harness_heavy"):
            name = self.scenario.name
            pytest.skip(
                f"{name} is heavy (heavy: true, minutes of training): run it with `pytest scenarios/ -k {name} "
                "--harness-heavy` (or HARNESS_HEAVY=1)"
            )
        try:
            self.runs = ensure_runs(
                self.scenario,
                Path(config.getoption("harness_results")).resolve(),
                config.stash[_SESSION],
                config.getoption("executor"),
                reuse=config.getoption("harness_reuse"),
            )
        except HarnessError as exc:
            _fail(exc)
        if self.runs.trained_s:
            self.user_properties.append((TRAINED, round(self.runs.trained_s, 3)))
        for mode, rec in self.runs.records.items():
            self.user_properties.append((f"run.{mode}.wall_s", round(rec.result.wall_s, 3)))

    xfail_reason: str | None = None  # a known gap's reason

    def evaluate(self) -> CheckResult:
        raise NotImplementedError

    def runtest(self) -> None:
        try:
            result = self.evaluate()
        except HarnessError as exc:
            _fail(exc)
        self.user_properties += list(result.figures.items())
        record_check(self.scenario, self.runs, result, xfail_reason=self.xfail_reason)
        self.add_report_section("call", "harness", "\n".join([result.summary, *result.notes]))
        if not result.passed:
            raise CheckFailed(self.scenario.name, result)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.scenario.name}::{self.name}"


class CheckItem(ScenarioItem):
    def __init__(self, *, check: Check, **kw: Any) -> None:
        super().__init__(**kw)
        self.check = check

    def evaluate(self) -> CheckResult:
        return self.check(CheckContext(self.scenario, self.runs.dir))


class GapItem(ScenarioItem):
    def __init__(self, *, gap: KnownGap, **kw: Any) -> None:
        super().__init__(**kw)
        self.gap = gap
        self.xfail_reason = gap.reason

    def evaluate(self) -> CheckResult:
        return check_gap(CheckContext(self.scenario, self.runs.dir), self.gap)


class RegressionItem(ScenarioItem):
    """Against ``--harness-baseline`` (harness.gate): the absolute budgets stay with the other items."""

    def evaluate(self) -> CheckResult:
        ctx = CheckContext(self.scenario, self.runs.dir)
        for check in CHECKS.values():  # the figures it compares, fresh even when their items did not run
            record_check(self.scenario, self.runs, check(ctx))
        observed = observe_results(self.runs.dir.results)
        return compare_scenario(self.scenario.name, self.config.stash[_BASELINE], observed).as_check_result()


_SESSION = pytest.StashKey[str]()
_BASELINE = pytest.StashKey[Baseline]()


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
    launching, waiting, locking, checks, results. Unit tests in the same session are not counted.
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
