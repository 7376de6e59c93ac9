"""The plugin's one object, shaped as pytest's own junitxml plugin: made in ``pytest_configure``, kept under one stash
key, registered as a plugin; its methods are pytest's hooks of the test run, and it owns the harness ``Session`` every
item runs through (``session``: the harness's alone; pytest's own reaches one hook, ``pytest_sessionfinish``, by the
name pluggy passes it). Only light modules at import: the checks, the gate and the executors (scipy, the docker SDK)
load where a scenario is collected or run, not in every pytest run of the environment."""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness import outcomes
from harness.errors import HarnessError, one_line
from harness.pipeline import options as shared
from harness.pytest_plugin.hygiene import interrupt_when_orphaned, stop_workers
from harness.pytest_plugin.reporting import INCONCLUSIVE, PlainNodeIds, TimeBreakdown
from harness.scenario.loader import ScenarioList
from harness.signals import Interrupted, describe, interrupts
from harness.targets.environment import TargetEnv
from harness.targets.spec import Target, parse_target
from harness.training.monitor import PeriodicLines, WatchSettings

if TYPE_CHECKING:
    from harness.gate.baseline import Baseline
    from harness.pipeline.session import Session

KEY = pytest.StashKey["HarnessPlugin"]()


class HarnessPlugin:
    """The harness in one pytest process (the xdist controller or a worker): its options read once, bad ones a
    ``pytest.UsageError`` in one line; ``scenario_file`` makes the collector of a scenario file."""

    def __init__(
        self, config: pytest.Config, scenario_file: Callable[[pytest.Collector, Path], pytest.Collector]
    ) -> None:
        self.config = config
        self.scenario_file = scenario_file
        workerinput = getattr(config, "workerinput", None)
        self.controller = workerinput is None
        if getattr(config.option, "dist", "no") == "load":
            config.option.dist = "loadgroup"  # keep a scenario's items (and so its trainings) on one worker
        if workerinput and workerinput.get("harness_loadgroup"):
            config.option.loadgroup = True  # xdist set this from the worker's own args, before our change above
        self.id: str = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
        self.interrupts: list[KeyboardInterrupt] = []  # pytest_keyboard_interrupt -> pytest_sessionfinish
        self.failures = {"inconclusive": 0, "other": 0}  # the test run's failed reports, for its exit status
        try:  # a cluster named (--ray-address, HARNESS_RAY_ADDRESS): every scenario under the ray executor
            config.option.executor = shared.executor_choice(
                config.getoption("executor", None), config.getoption("ray_address")
            )
        except HarnessError as exc:
            raise pytest.UsageError(one_line(exc)) from None
        self.scenarios = ScenarioList(config.getoption("executor", None))  # one per name, as every command's
        try:
            self.target = parse_target(
                config.getoption("verl", None),
                config.getoption("msprobe", None),
                config.getoption("series", None),
                stack=config.getoption("stack", None),
            )
        except HarnessError as exc:
            raise pytest.UsageError(one_line(exc)) from None
        self.compare_base: Target | None = None
        if spec := config.getoption("harness_compare_base", None):
            try:
                self.compare_base = parse_target(
                    spec, config.getoption("msprobe", None), stack=config.getoption("stack", None)
                )
            except HarnessError as exc:
                raise pytest.UsageError(f"--harness-compare-base: {one_line(exc)}") from None
        try:
            self.watch = WatchSettings.configure(
                config.getoption("harness_max_dump", None),
                config.getoption("harness_min_free", None),
                show=PeriodicLines(self.write_line, config.getoption("harness_progress_every", 15)),
            )
        except ValueError as exc:
            raise pytest.UsageError(f"--harness-max-dump/--harness-min-free: {exc}") from None
        self.baseline: Baseline | None = None
        if path := config.getoption("harness_baseline", None):
            from harness.gate.baseline import Baseline  # the gate: only where a baseline is named

            try:
                self.baseline = Baseline.read(Path(path))
            except HarnessError as exc:
                raise pytest.UsageError(f"--harness-baseline: {exc}") from None
        self.signals = contextlib.ExitStack()
        self.signals.enter_context(interrupts())
        if workerinput:
            interrupt_when_orphaned()
        if self.controller:
            config.pluginmanager.register(PlainNodeIds(), "harness-plain-nodeids")
            workers = config.getoption("numprocesses", None) or 1
            config.pluginmanager.register(TimeBreakdown(int(workers) if str(workers).isdigit() else 2), "harness-times")

    @functools.cached_property
    def session(self) -> Session:
        """The harness session every scenario item runs through, made on first use (the checks and executors load
        with it). Its results dir is each item's ``--harness-results``, said there when it is bad."""
        from harness.pipeline.session import Session
        from harness.report.verdicts import AgainstBaseline  # the gate: only where a scenario is run

        option = self.config.getoption
        return Session(
            Path(option("harness_results")),
            option("executor"),
            self.watch,
            shared.gates_timing(option("harness_timing")),
            option("harness_reuse"),
            shared.runs_heavy(option("harness_heavy")),
            self.id,
            AgainstBaseline(self.baseline) if self.baseline is not None else None,
            say=lambda line: None,  # a comparison's progress: its item's report says what it found
        )

    def target_env(self) -> TargetEnv:
        """The target's environment, made (or found) once per process on first use and passed to every scenario: a
        SPEC that cannot be installed fails the items that need it, one line each, and no collection."""
        return self.session.env(self.target)

    def close(self) -> None:
        if "session" in self.__dict__:
            self.session.release()
        self.signals.close()

    def write_line(self, line: str) -> None:
        """Through the terminal reporter, past output capture (a training runs inside an item's setup); an xdist
        worker has no terminal of its own, so its lines go to the stderr it shares with the controller."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if reporter is not None and self.controller:
                reporter.write_line(line)
            else:
                print(line, file=sys.__stderr__, flush=True)

    def pytest_report_header(self, config: pytest.Config) -> str:
        return f"harness target: {self.target.describe()}"

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller: tell each worker to tag items with their xdist_group, as loadgroup needs."""
        node.workerinput["harness_loadgroup"] = node.config.getoption("dist") == "loadgroup"

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if file_path.suffix in (".yaml", ".yml") and file_path.parent.name == "scenarios":
            return self.scenario_file(parent, file_path)
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self) -> None:
        """Sweep what dead harnesses left (a SIGKILLed one's containers) before anything runs, one line each."""
        if not self.controller:
            return  # the controller sweeps
        from harness.training.registry import EXECUTORS  # the executors: the docker SDK

        for executor in EXECUTORS.values():
            for line in executor.sweep():
                self.write_line(f"harness: {line}")

    @pytest.hookimpl(trylast=True)  # after -k and -m deselected theirs
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """The clusters the collected scenarios name themselves (``executor.ray.address``): their jobs of dead harnesses
        stopped too (the test run's start swept those of ``--ray-address``); on each worker under xdist, where they are
        collected, one line each."""
        scenarios = {id(s): s for s in (getattr(i, "scenario", None) for i in items) if s is not None}
        if any(getattr(s.executor.options("ray"), "address", None) for s in scenarios.values()):
            from harness.training.registry import EXECUTORS  # the executors: the docker SDK

            for line in EXECUTORS["ray"].sweep([s.executor for s in scenarios.values()]):
                self.write_line(f"harness: {line}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            inconclusive = any(tuple(p) == INCONCLUSIVE for p in report.user_properties)  # a list once xdist sent it
            self.failures["inconclusive" if inconclusive else "other"] += 1

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.failures["other"] += 1

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if not isinstance(excinfo.value, KeyboardInterrupt):  # pytest.exit() comes here too
            return
        self.interrupts.append(excinfo.value)
        if self.config.pluginmanager.get_plugin("dsession") is not None:  # distributed: the workers run trainings
            stop_workers(excinfo.value)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:  # pytest's: the test run (pluggy's name)
        """After an interrupt: one line saying what was stopped; SIGTERM and SIGHUP exit 128+N (SIGINT keeps
        pytest's 2). Failed, every failure an INCONCLUSIVE one: exit 3, as ``harness run`` (``harness.outcomes``)."""
        while self.interrupts:
            exc = self.interrupts.pop()
            line, code = describe(exc)
            self.write_line(f"harness: {line}")
            if isinstance(exc, Interrupted) and exc.signum != signal.SIGINT:
                session.exitstatus = code
        failed = session.exitstatus == pytest.ExitCode.TESTS_FAILED
        if failed and self.failures["inconclusive"] and not self.failures["other"]:
            session.exitstatus = outcomes.EXIT_INCONCLUSIVE
