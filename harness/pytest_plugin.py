"""pytest plugin: each scenario file becomes one test item per check (``pytest scenarios/ -k NAME``).

A scenario's trainings run in the setup of its first item (errors there are infrastructure ERRORs, not
check FAILUREs) and are reused by its other items; under pytest-xdist all items of a scenario go to
one worker (``--dist loadgroup``), and the file lock in ``harness.runs`` keeps it to one run anyway.
Each training shows a live line in the terminal reporter (``harness.monitor``); SIGTERM and SIGHUP stop it
like Ctrl-C and exit 128+N; containers of dead harnesses are swept at session start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, NoReturn

import pytest
from filelock import FileLock

from harness import outcomes
from harness.base_head import repeats_option, run_comparison
from harness.checks import CHECKS, CheckContext, CheckResult, run_check
from harness.checks.crash import not_checked
from harness.checks.known_gap import check_gap, gap_name
from harness.devices import skip_reason
from harness.errors import HarnessError, InfraError, ScenarioError, one_line
from harness.gate.baseline import Baseline
from harness.gate.observe import observe_results
from harness.gate.verdicts import compare_scenario
from harness.loader import load_scenario
from harness.monitor import MAX_DUMP_ENV, MIN_FREE_ENV, PeriodicLines, Watch, positive_seconds
from harness.registry import EXECUTORS
from harness.results import record_check
from harness.rundir import ScenarioDir
from harness.runs import ensure_runs, results_dir, scenario_lock
from harness.scenario import Scenario
from harness.settings import KnownGap
from harness.signals import Interrupted, describe, interrupts, note_stopped
from harness.target import SERIES_HELP, TARGET_HELP, Target, parse_target

TRAINED = "harness.trained_s"


class CheckFailed(pytest.fail.Exception):  # type: ignore[name-defined]  # public pytest API; mypy sees a function attribute
    """A check's verdict: its problems, one per line, without a traceback (what a known gap's xfail expects)."""

    verdict = "failed"

    def __init__(self, scenario: str, result: CheckResult) -> None:
        lines = [f"{scenario}: {result.check} check {self.verdict}:"]
        lines += [f"  - {p}" for p in result.problems + result.inconclusive]
        super().__init__("\n".join(lines), pytrace=False)


class CheckInconclusive(CheckFailed):
    """A check the noise leaves undecided: a failure of its own kind, never a pass or a skip."""

    verdict = "INCONCLUSIVE (rerun, or more repeats decide it)"


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
    g.addoption("--verl", metavar="SPEC", default=None, help=f"the verl under test: {TARGET_HELP} (env HARNESS_VERL)")
    g.addoption(
        "--msprobe", metavar="SPEC", default=None, help="the msprobe under test: a version or a .whl (HARNESS_MSPROBE)"
    )
    g.addoption("--series", default=None, help=f"{SERIES_HELP} (env HARNESS_SERIES)")
    g.addoption(
        "--harness-compare-base",
        metavar="SPEC",
        default=None,
        help="base against head: each scenario becomes one 'compare' item that runs it for this verl (base) and "
        "the --verl one (head), interleaved, and fails on a regression of head",
    )
    g.addoption(
        "--harness-compare-repeats", type=repeats_option, default=2, help="runs per side of a comparison (default 2)"
    )
    g.addoption(
        "--harness-compare-max-repeats",
        type=repeats_option,
        help="while a comparison is INCONCLUSIVE, more base/head pairs up to this many runs per side (default: up "
        "to 6, while the next pair ends within 20 min of the scenario's first run)",
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
    g.addoption(
        "--harness-max-dump",
        metavar="SIZE",
        help=f"stop any run whose dumps grow past SIZE, whatever its budgets (default: ${MAX_DUMP_ENV}, else none)",
    )
    g.addoption(
        "--harness-min-free",
        metavar="SIZE",
        help=f"stop a run when the results filesystem has less free (default: ${MIN_FREE_ENV}, else 1GB)",
    )
    g.addoption(
        "--harness-progress-every",
        type=positive_seconds,
        default=15.0,
        metavar="S",
        help="seconds between a training's live lines (default 15)",
    )


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"  # keep a scenario's items (and so its trainings) on one worker
    if workerinput and workerinput.get("harness_loadgroup"):
        config.option.loadgroup = True  # xdist set this from the worker's own args, before our change above
    config.stash[_SESSION] = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
    try:
        config.stash[_TARGET] = parse_target(
            config.getoption("verl", None), config.getoption("msprobe", None), config.getoption("series", None)
        )
    except HarnessError as exc:
        raise pytest.UsageError(one_line(exc)) from None
    if spec := config.getoption("harness_compare_base", None):
        try:
            config.stash[_COMPARE_BASE] = parse_target(spec, config.getoption("msprobe", None))
        except HarnessError as exc:
            raise pytest.UsageError(f"--harness-compare-base: {one_line(exc)}") from None
    try:
        config.stash[_WATCH] = Watch.configure(
            config.getoption("harness_max_dump", None),
            config.getoption("harness_min_free", None),
            show=PeriodicLines(lambda line: _write_line(config, line), config.getoption("harness_progress_every", 15)),
        )
    except ValueError as exc:
        raise pytest.UsageError(f"--harness-max-dump/--harness-min-free: {exc}") from None
    config.stash[_SIGNALS] = stack = contextlib.ExitStack()
    stack.enter_context(interrupts())
    if workerinput:
        _interrupt_when_orphaned()
    if path := config.getoption("harness_baseline", None):
        try:
            config.stash[_BASELINE] = Baseline.read(Path(path))
        except HarnessError as exc:
            raise pytest.UsageError(f"--harness-baseline: {exc}") from None
    if workerinput is None:
        config.pluginmanager.register(PlainNodeIds(), "harness-plain-nodeids")
        config.pluginmanager.register(WorkersStop(config), "harness-workers-stop")
        workers = config.getoption("numprocesses", None) or 1
        config.pluginmanager.register(TimeBreakdown(int(workers) if str(workers).isdigit() else 2), "harness-times")


def pytest_report_header(config: pytest.Config) -> str:
    return f"harness target: {config.stash[_TARGET].describe()}"


def _interrupt_when_orphaned() -> None:
    """An xdist worker whose controller is gone (signalled, SIGKILLed) SIGTERMs itself: its training is stopped
    instead of going on, and the next one starting, under PID 1."""
    controller = os.getppid()

    def watch() -> None:
        while os.getppid() == controller:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="harness-orphan-watch", daemon=True).start()


def pytest_unconfigure(config: pytest.Config) -> None:
    _release_lock(config)
    if _SIGNALS in config.stash:
        config.stash[_SIGNALS].close()


def _write_line(config: pytest.Config, line: str) -> None:
    """Through the terminal reporter, past output capture (a training runs inside an item's setup); an xdist
    worker has no terminal of its own, so its lines go to the stderr it shares with the controller."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        if reporter is not None and not hasattr(config, "workerinput"):
            reporter.write_line(line)
        else:
            print(line, file=sys.__stderr__, flush=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Sweep what dead harnesses left (a SIGKILLed one's containers) before anything runs, one line each."""
    if hasattr(session.config, "workerinput"):
        return  # the controller sweeps
    for executor in EXECUTORS.values():
        for line in executor.sweep():
            _write_line(session.config, f"harness: {line}")


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    if isinstance(excinfo.value, KeyboardInterrupt):  # not pytest.exit(), which comes here too
        _INTERRUPTS.append(excinfo.value)


class WorkersStop:
    """On the xdist controller, interrupted: xdist SIGKILLs a worker still busy 10 s later, leaving its training
    to PID 1. SIGTERM the workers (the controller's only children) first: they stop their trainings like
    Ctrl-C and exit."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if self.config.pluginmanager.get_plugin("dsession") is None:
            return  # not distributed: this process runs the trainings itself
        me, signalled = str(os.getpid()), []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and (proc / "stat").read_text().rpartition(")")[2].split()[1] == me:
                    os.kill(int(proc.name), signal.SIGTERM)
                    signalled.append(proc.name)
            except (OSError, IndexError):
                continue
        if signalled:
            note_stopped(excinfo.value, f"xdist workers {', '.join(signalled)} (each stops its own training)")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """After an interrupt: one line saying what was stopped; SIGTERM and SIGHUP exit 128+N (SIGINT keeps
    pytest's 2)."""
    while _INTERRUPTS:
        exc = _INTERRUPTS.pop()
        line, code = describe(exc)
        _write_line(session.config, f"harness: {line}")
        if isinstance(exc, Interrupted) and exc.signum != signal.SIGINT:
            session.exitstatus = code


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
            scenario = load_scenario(self.path, self.config.getoption("executor"))
        except ScenarioError as exc:
            raise self.CollectError(f"invalid scenario file ({len(exc.problems)} problems):\n{exc}") from None
        items: list[pytest.Item] = [CheckItem.from_parent(self, name=name, scenario=scenario) for name in CHECKS]
        if _COMPARE_BASE in self.config.stash:  # the head's own checks are part of the comparison
            items = [CompareItem.from_parent(self, name="compare", scenario=scenario)]
        elif _BASELINE in self.config.stash:
            items.append(RegressionItem.from_parent(self, name="regression", scenario=scenario))
        for gap in scenario.expect.known_gaps if _COMPARE_BASE not in self.config.stash else ():
            gap_item = GapItem.from_parent(self, name=gap_name(gap), scenario=scenario, gap=gap)
            gap_item.add_marker(pytest.mark.xfail(reason=gap.reason, strict=True, raises=CheckFailed))
            items.append(gap_item)
        for item in items:
            item.add_marker(pytest.mark.xdist_group(scenario.name))
        return items


def _hold_lock(config: pytest.Config, sdir: ScenarioDir) -> None:
    """Hold the scenario's results-dir lock from its first item's setup until the next scenario's (or the session's
    end), so that no other harness run trains or writes results.json between this scenario's items."""
    held = config.stash.get(_HELD, None)
    if held is not None and held.lock_file == str(sdir.lock):
        return
    _release_lock(config)
    lock = scenario_lock(sdir)
    lock.acquire()
    config.stash[_HELD] = lock


def _release_lock(config: pytest.Config) -> None:
    if (held := config.stash.get(_HELD, None)) is not None:
        held.release()
        del config.stash[_HELD]


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, **kw: Any) -> None:
        super().__init__(**kw)
        self.scenario = scenario

    own_marker = False  # True where the item's expected failure is a pytest marker (known gaps)

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
            results = results_dir(config.getoption("harness_results"))
            _hold_lock(config, ScenarioDir(results / self.scenario.name))
            self.runs = ensure_runs(
                self.scenario,
                results,
                config.stash[_SESSION],
                config.getoption("executor"),
                reuse=config.getoption("harness_reuse"),
                target=config.stash[_TARGET],
                watch=config.stash[_WATCH],
            )
        except HarnessError as exc:
            _fail(exc)
        self.user_properties += target_properties(self.runs.target)
        if self.runs.trained_s:
            self.user_properties.append((TRAINED, round(self.runs.trained_s, 3)))
        for mode, rec in self.runs.records.items():
            self.user_properties.append((f"run.{mode}.wall_s", round(rec.result.wall_s, 3)))

    def evaluate(self, ctx: CheckContext) -> CheckResult:
        raise NotImplementedError

    def runtest(self) -> None:
        try:
            ctx = CheckContext(self.scenario, self.runs.dir)
            result = not_checked(ctx, self.name) or self.evaluate(ctx)
        except HarnessError as exc:
            _fail(exc)
        self.user_properties += list(result.figures.items())
        record_check(self.scenario, self.runs, result)
        self.add_report_section("call", "harness", "\n".join([result.summary, *result.notes]))
        # a known gap's item carries a strict xfail marker; a known bug is decided once the crash is read
        outcome = outcomes.check_outcome(result, expected_failure=bool(result.xfail_reason) and not self.own_marker)
        if outcome == "not checked":
            pytest.skip(result.not_checked)
        if outcome == "xfail":
            pytest.xfail(result.xfail_reason)
        if outcome == "xpass":
            result.problems = [f"{outcomes.WORDS[outcome]} (expect.known_bugs): {result.xfail_reason}"]
        if outcome in ("fail", "xpass"):
            raise CheckFailed(self.scenario.name, result)
        if outcome == "inconclusive":
            raise CheckInconclusive(self.scenario.name, result)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.scenario.name}::{self.name}"


class CheckItem(ScenarioItem):
    def evaluate(self, ctx: CheckContext) -> CheckResult:
        return CHECKS[self.name](ctx)  # runtest has asked not_checked first


class GapItem(ScenarioItem):
    own_marker = True  # a strict xfail marker: the gap's failure is the expected one

    def __init__(self, *, gap: KnownGap, **kw: Any) -> None:
        super().__init__(**kw)
        self.gap = gap

    def evaluate(self, ctx: CheckContext) -> CheckResult:
        return check_gap(ctx, self.gap)


class RegressionItem(ScenarioItem):
    """Against ``--harness-baseline`` (harness.gate): the absolute budgets stay with the other items."""

    def evaluate(self, ctx: CheckContext) -> CheckResult:
        for name, check in CHECKS.items():  # the figures it compares, fresh even when their items did not run
            record_check(self.scenario, self.runs, run_check(name, check, ctx))
        observed = observe_results(self.runs.dir.results)
        return compare_scenario(self.scenario.name, self.config.stash[_BASELINE], observed).as_check_result()


def target_properties(target: dict[str, Any]) -> list[tuple[str, Any]]:
    """JUnit properties naming the verl and msprobe the runs trained with."""
    env = target.get("environment") or {}
    names = {"target": "target.verl", "verl": "target.verl_version", "series": "target.series"}
    return [(prop, env[k]) for k, prop in names.items() if env.get(k) is not None] + [
        ("target.verl_dirty", bool(env.get("verl_dirty"))),
        ("target.msprobe", env.get("mindstudio-probe")),
    ]


class CompareItem(pytest.Item):
    """Base against head for one scenario (``harness.base_head``): fails on a regression of head, one line each."""

    def __init__(self, *, scenario: Scenario, **kw: Any) -> None:
        super().__init__(**kw)
        self.scenario = scenario

    def runtest(self) -> None:
        if reason := skip_reason(self.scenario, os.path.relpath(self.path)):
            pytest.skip(reason)
        config = self.config
        results = Path(config.getoption("harness_results")).resolve() / "compare" / self.scenario.name
        try:
            comparison, _ = run_comparison(
                [self.scenario],
                config.stash[_COMPARE_BASE],
                config.stash[_TARGET],
                results,
                config.getoption("harness_compare_repeats"),
                config.getoption("executor"),
                say=lambda line: None,
                watch=config.stash[_WATCH],
                max_repeats=config.getoption("harness_compare_max_repeats"),
            )
        except HarnessError as exc:
            _fail(exc)
        (compared,) = comparison.scenarios
        self.user_properties += [(f"compare.{f.metric}", f.ratio_text()) for f in compared.figures]
        self.user_properties += compared.numerics.properties() if compared.numerics else []
        self.add_report_section("call", "harness", "\n".join(comparison.lines()))
        if compared.status == "error":
            _fail(InfraError("; ".join(compared.errors)))
        if compared.status == "regressed":
            lines = [f.line() for f in compared.figures if f.verdict in ("regressed", "missing")]
            raise CheckFailed(self.scenario.name, CheckResult("compare", problems=lines + compared.findings))
        if compared.status == "inconclusive":
            lines = [f.line() for f in compared.figures if f.verdict == "inconclusive"]
            raise CheckInconclusive(self.scenario.name, CheckResult("compare", inconclusive=compared.undecided + lines))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.scenario.name}::{self.name}"


_SESSION = pytest.StashKey[str]()
_COMPARE_BASE = pytest.StashKey[Target]()
_TARGET = pytest.StashKey[Target]()
_BASELINE = pytest.StashKey[Baseline]()
_WATCH = pytest.StashKey[Watch]()
_SIGNALS = pytest.StashKey[contextlib.ExitStack]()
_HELD = pytest.StashKey[FileLock]()  # the results-dir lock of the scenario whose items are running
_INTERRUPTS: list[KeyboardInterrupt] = []  # pytest_keyboard_interrupt -> pytest_sessionfinish


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
