"""The scenario file and its items: one per check, a known gap's, the regression item against a baseline, and
the compare item of base against head. A scenario's trainings run in its first item's setup."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness import outcomes
from harness.artifacts.rundir import ScenarioDir
from harness.checks import CHECKS, CheckContext, CheckResult, run_check
from harness.checks.crash import not_checked
from harness.checks.known_gap import check_gap, gap_name
from harness.checks.results import record_check
from harness.errors import HarnessError, InfraError, ScenarioError
from harness.gate.against_baseline import gate_scenario
from harness.gate.observe import observe_results
from harness.pipeline.base_head import run_comparison
from harness.pipeline.options import gates_timing
from harness.pytest_plugin.state import (
    BASELINE,
    COMPARE_BASE,
    HELD,
    SCENARIOS,
    SESSION,
    TARGET,
    TRAINED,
    WATCH,
    CheckFailed,
    CheckInconclusive,
    fail,
    target_env,
)
from harness.report import verdicts
from harness.scenario.blocks import KnownGap
from harness.scenario.loader import ExecutorRefused
from harness.scenario.model import Scenario
from harness.training.devices import cluster_missing, skip_reason
from harness.training.runs import ensure_runs, results_dir, scenario_lock


class ScenarioFile(pytest.File):
    def collect(self) -> list[pytest.Item]:
        refused = ""
        try:
            scenario = self.config.stash[SCENARIOS].load(self.path)
        except ExecutorRefused as exc:  # valid, but not under this --executor: a skip, which -k may deselect
            scenario, refused = exc.scenario, "; ".join(exc.problems)
        except ScenarioError as exc:
            raise self.CollectError(f"invalid scenario file ({len(exc.problems)} problems):\n{exc}") from None
        if scenario is None:  # the same file collected twice: its items once
            return []
        items: list[pytest.Item] = [CheckItem.from_parent(self, name=name, scenario=scenario) for name in CHECKS]
        if COMPARE_BASE in self.config.stash:  # the head's own checks are part of the comparison
            items = [CompareItem.from_parent(self, name="compare", scenario=scenario)]
        elif BASELINE in self.config.stash:
            items.append(RegressionItem.from_parent(self, name="regression", scenario=scenario))
        for gap in scenario.expect.known_gaps if COMPARE_BASE not in self.config.stash else ():
            gap_item = GapItem.from_parent(self, name=gap_name(gap), scenario=scenario, gap=gap)
            gap_item.add_marker(pytest.mark.xfail(reason=gap.reason, strict=True, raises=CheckFailed))
            items.append(gap_item)
        for item in items:
            item.add_marker(pytest.mark.xdist_group(scenario.name))
            if refused:
                item.add_marker(pytest.mark.skip(reason=refused))
        return items


def _hold_lock(config: pytest.Config, sdir: ScenarioDir) -> None:
    """Hold the scenario's results-dir lock from its first item's setup until the next scenario's (or the session's
    end), so that no other harness run trains or writes results.json between this scenario's items."""
    held = config.stash.get(HELD, None)
    if held is not None and held.lock_file == str(sdir.lock):
        return
    release_lock(config)
    lock = scenario_lock(sdir)
    lock.acquire()
    config.stash[HELD] = lock


def release_lock(config: pytest.Config) -> None:
    if (held := config.stash.get(HELD, None)) is not None:
        held.release()
        del config.stash[HELD]


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
        if reason := cluster_missing(self.scenario):
            pytest.skip(reason)
        try:
            results = results_dir(config.getoption("harness_results"), "--harness-results")
            _hold_lock(config, ScenarioDir(results / self.scenario.name))
            self.runs = ensure_runs(
                self.scenario,
                results,
                config.stash[SESSION],
                config.getoption("executor"),
                reuse=config.getoption("harness_reuse"),
                env=target_env(config),
                watch=config.stash[WATCH],
            )
        except HarnessError as exc:
            fail(exc)
        self.user_properties += target_properties(self.runs.target)
        if self.runs.trained_s:
            self.user_properties.append((TRAINED, round(self.runs.trained_s, 3)))
        for mode, rec in self.runs.records.items():
            self.user_properties.append((f"run.{mode}.wall_s", round(rec.result.wall_s, 3)))

    def evaluate(self, ctx: CheckContext) -> CheckResult:
        raise NotImplementedError

    def runtest(self) -> None:
        try:
            ctx = CheckContext(self.scenario, self.runs.dir, gates_timing(self.config.getoption("harness_timing")))
            result = not_checked(ctx, self.name) or self.evaluate(ctx)
        except HarnessError as exc:
            fail(exc)
        self.user_properties += list(result.figures.items())
        record_check(self.scenario, self.runs, result)
        self.add_report_section("call", "harness", "\n".join([result.summary, *result.notes]))
        # a known gap's item carries a strict xfail marker; a known bug is decided once the crash is read
        outcome = outcomes.check_outcome(result, expected_failure=bool(result.xfail_reason) and not self.own_marker)
        if outcome == "not checked":
            pytest.skip(result.not_checked)
        if outcome == "not gated":  # decided nothing: never a green pass, its figures in the reason
            pytest.skip(f"{self.scenario.name}::{self.name}: {result.not_gated}")
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
        return verdicts.check_result(gate_scenario(self.scenario.name, self.config.stash[BASELINE], observed))


def target_properties(target: dict[str, Any]) -> list[tuple[str, Any]]:
    """JUnit properties naming the verl and msprobe the runs trained with."""
    env = target.get("environment") or {}
    names = {"target": "target.verl", "verl": "target.verl_version", "series": "target.series"}
    return [(prop, env[k]) for k, prop in names.items() if env.get(k) is not None] + [
        ("target.verl_dirty", bool(env.get("verl_dirty"))),
        ("target.msprobe", env.get("mindstudio-probe")),
    ]


class CompareItem(pytest.Item):
    """Base against head for one scenario (``harness.pipeline.base_head``): fails on a regression of head, one line
    each."""

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
                config.stash[COMPARE_BASE],
                config.stash[TARGET],
                results,
                config.getoption("harness_compare_repeats"),
                config.getoption("executor"),
                say=lambda line: None,
                watch=config.stash[WATCH],
                max_repeats=config.getoption("harness_compare_max_repeats"),
            )
        except HarnessError as exc:
            fail(exc)
        (compared,) = comparison.scenarios
        self.user_properties += [(f"compare.{f.metric}", verdicts.ratio_text(f)) for f in compared.figures]
        self.user_properties += compared.numerics.properties() if compared.numerics else []
        self.add_report_section("call", "harness", "\n".join(verdicts.lines(comparison)))
        if compared.status == "error":
            fail(InfraError("; ".join(compared.errors)))
        if compared.status == "regressed":
            lines = [verdicts.compare_line(f) for f in compared.figures if f.verdict in ("regressed", "missing")]
            raise CheckFailed(self.scenario.name, CheckResult("compare", problems=lines + compared.findings))
        if compared.status == "inconclusive":
            lines = [verdicts.compare_line(f) for f in compared.figures if f.verdict == "inconclusive"]
            raise CheckInconclusive(self.scenario.name, CheckResult("compare", inconclusive=compared.undecided + lines))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.scenario.name}::{self.name}"
