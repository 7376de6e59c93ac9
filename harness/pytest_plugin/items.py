"""The scenario file and its items: one per check, a known gap's, the regression item against a baseline, and
the compare item of base against head. A scenario's trainings run in its first item's setup, its checks in its first
item's call (``harness.pipeline.session``: once per scenario, results.json written once); each item shows its own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import pytest

from harness import outcomes
from harness.checks import CHECKS, CheckResult
from harness.checks.known_gap import gap_name
from harness.errors import HarnessError, InfraError, ScenarioError, one_line
from harness.pytest_plugin.plugin import KEY, HarnessPlugin
from harness.pytest_plugin.reporting import INCONCLUSIVE, TRAINED
from harness.report import verdicts
from harness.scenario.blocks import KnownGap
from harness.scenario.loader import ExecutorRefused
from harness.scenario.model import Scenario
from harness.training.runs import results_dir


class CheckFailed(pytest.fail.Exception):  # type: ignore[name-defined]  # public pytest API; mypy sees a function attribute
    """A check's verdict: its problems, one per line, without a traceback (what a known gap's xfail expects)."""

    verdict = "failed"

    def __init__(self, scenario: str, result: CheckResult) -> None:
        lines = [f"{scenario}: {result.check} check {self.verdict}:"]
        lines += [f"  - {p}" for p in result.problems + result.inconclusive]
        super().__init__("\n".join(lines), pytrace=False)


class CheckInconclusive(CheckFailed):
    """A check the noise leaves undecided: a failure of its own kind, never a pass or a skip."""

    verdict = f"{outcomes.INCONCLUSIVE} (rerun, or more repeats decide it)"


def fail(exc: HarnessError) -> NoReturn:
    """A run that could not be prepared or did not finish: an ERROR in setup, shown without a traceback."""
    raise pytest.fail.Exception(one_line(exc), pytrace=False) from None


class ScenarioFile(pytest.File):
    def collect(self) -> list[pytest.Item]:
        refused = ""
        try:
            scenario = self.config.stash[KEY].scenarios.load(self.path)
        except ExecutorRefused as exc:  # valid, but not under this --executor: a skip, which -k may deselect
            scenario, refused = exc.scenario, "; ".join(exc.problems)
        except ScenarioError as exc:
            raise self.CollectError(f"invalid scenario file ({len(exc.problems)} problems):\n{exc}") from None
        if scenario is None:  # the same file collected twice: its items once
            return []
        plugin = self.config.stash[KEY]
        items: list[pytest.Item] = [CheckItem.from_parent(self, name=name, scenario=scenario) for name in CHECKS]
        if plugin.compare_base is not None:  # the head's own checks are part of the comparison
            items = [CompareItem.from_parent(self, name="compare", scenario=scenario)]
        elif plugin.baseline is not None:
            items.append(RegressionItem.from_parent(self, name=verdicts.REGRESSION, scenario=scenario))
        for gap in scenario.expect.known_gaps if plugin.compare_base is None else ():
            gap_item = GapItem.from_parent(self, name=gap_name(gap), scenario=scenario, gap=gap)
            gap_item.add_marker(pytest.mark.xfail(reason=gap.reason, strict=True, raises=CheckFailed))
            items.append(gap_item)
        for item in items:
            item.add_marker(pytest.mark.xdist_group(scenario.name))
            if refused:
                item.add_marker(pytest.mark.skip(reason=refused))
        return items


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, **kw: Any) -> None:
        super().__init__(**kw)
        self.scenario = scenario

    own_marker = False  # True where the item's expected failure is a pytest marker (known gaps)

    @property
    def plugin(self) -> HarnessPlugin:
        return self.config.stash[KEY]

    def setup(self) -> None:
        try:
            session = self.plugin.session
            if reason := session.skip(self.scenario, os.path.relpath(self.path)):
                pytest.skip(reason)
            results = results_dir(self.config.getoption("harness_results"), "--harness-results")
            self.runs = session.runs(self.scenario, self.plugin.target_env(), results)
        except HarnessError as exc:
            fail(exc)
        self.user_properties += target_properties(self.runs.target)
        if self.runs.trained_s:
            self.user_properties.append((TRAINED, round(self.runs.trained_s, 3)))
        for mode, rec in self.runs.records.items():
            self.user_properties.append((f"run.{mode}.wall_s", round(rec.result.wall_s, 3)))

    def verdict(self, judged: dict[str, CheckResult]) -> CheckResult:
        """This item's result among the scenario's ``judged`` checks, by name."""
        return judged[self.name]

    def runtest(self) -> None:
        try:
            judged = {r.check: r for r in self.plugin.session.judge(self.scenario, self.runs)}
            result = self.verdict(judged)
        except HarnessError as exc:
            fail(exc)
        self.user_properties += list(result.figures.items())
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
            self.user_properties.append(INCONCLUSIVE)
            raise CheckInconclusive(self.scenario.name, result)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.scenario.name}::{self.name}"


class CheckItem(ScenarioItem):
    """One of ``harness.checks.CHECKS``, by its name."""


class GapItem(ScenarioItem):
    own_marker = True  # a strict xfail marker: the gap's failure is the expected one

    def __init__(self, *, gap: KnownGap, **kw: Any) -> None:
        super().__init__(**kw)
        self.gap = gap


class RegressionItem(ScenarioItem):
    """Against ``--harness-baseline`` (harness.gate), judged by the session with the checks (``Session.baseline``):
    the absolute budgets stay with the other items."""


def target_properties(target: dict[str, Any]) -> list[tuple[str, Any]]:
    """JUnit properties naming the verl and msprobe the runs trained with."""
    env = target.get("environment") or {}
    names = {"target": "target.verl", "verl": "target.verl_version", "series": "target.series"}
    return [(prop, env[k]) for k, prop in names.items() if env.get(k) is not None] + [
        ("target.verl_dirty", bool(env.get("verl_dirty"))),
        ("target.msprobe", env.get("mindstudio-probe")),
    ]


class CompareItem(pytest.Item):
    """Base against head for one scenario, by the plugin's one session (``Session.compare``): fails on a regression
    of head, one line each."""

    def __init__(self, *, scenario: Scenario, **kw: Any) -> None:
        super().__init__(**kw)
        self.scenario = scenario

    def runtest(self) -> None:
        config, plugin = self.config, self.config.stash[KEY]
        assert plugin.compare_base is not None  # collected only with one
        results = Path(config.getoption("harness_results")).resolve() / "compare" / self.scenario.name
        from harness.gate.judge import ComparePolicy  # the gate: only where a comparison runs
        from harness.pipeline.base_head import families, overhead_note

        policy = ComparePolicy(
            repeats=config.getoption("harness_compare_repeats"),
            max_repeats=config.getoption("harness_compare_max_repeats"),
        )
        try:  # the plugin's session made here (a bad HARNESS_TIMING: this item's one line, as the check items')
            if reason := plugin.session.skip(self.scenario, os.path.relpath(self.path)):  # as the check items decide
                pytest.skip(reason)
            ran = plugin.session.compare([self.scenario], plugin.compare_base, plugin.target, policy, results)
            comparison = ran.judgement()
            verdicts.write_comparison(comparison, results)
        except HarnessError as exc:
            fail(exc)
        (compared,) = comparison.scenarios
        self.user_properties += [(f"compare.{f.metric}", verdicts.ratio_text(f)) for f in compared.figures]
        if note := overhead_note(self.scenario, families(self.scenario, policy.families)):  # said, never a pass
            self.user_properties.append(("compare.overhead", note))
        self.user_properties += compared.numerics.properties() if compared.numerics else []
        self.add_report_section("call", "harness", "\n".join(verdicts.lines(comparison)))
        if compared.status == "error":
            fail(InfraError("; ".join(compared.errors)))
        if compared.status == "regressed":
            lines = [verdicts.compare_line(f) for f in compared.figures if f.verdict in ("regressed", "missing")]
            raise CheckFailed(self.scenario.name, CheckResult("compare", problems=lines + compared.findings))
        if compared.status == "inconclusive":
            lines = [verdicts.compare_line(f) for f in compared.figures if f.verdict == "inconclusive"]
            self.user_properties.append(INCONCLUSIVE)
            raise CheckInconclusive(self.scenario.name, CheckResult("compare", inconclusive=compared.undecided + lines))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.scenario.name}::{self.name}"
