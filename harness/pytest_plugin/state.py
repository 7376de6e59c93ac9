"""What the plugin's modules share: the session's stash keys, the verdict exceptions, and one output line."""

from __future__ import annotations

import contextlib
import sys
from typing import NoReturn

import pytest
from filelock import FileLock

from harness import outcomes
from harness.checks import CheckResult
from harness.errors import HarnessError, one_line
from harness.gate.baseline import Baseline
from harness.scenario.loader import ScenarioList
from harness.targets.environment import TargetEnv, ensure_env
from harness.targets.spec import Target
from harness.training.monitor import Watch

SESSION = pytest.StashKey[str]()
COMPARE_BASE = pytest.StashKey[Target]()
TARGET = pytest.StashKey[Target]()
BASELINE = pytest.StashKey[Baseline]()
WATCH = pytest.StashKey[Watch]()
SIGNALS = pytest.StashKey[contextlib.ExitStack]()
HELD = pytest.StashKey[FileLock]()  # the results-dir lock of the scenario whose items are running
TARGET_ENV = pytest.StashKey[TargetEnv]()
SCENARIOS = pytest.StashKey[ScenarioList]()  # the session's scenario files: one per name, as every command's


def target_env(config: pytest.Config) -> TargetEnv:
    """The target's environment, made (or found) once per process on first use and passed to every scenario: a
    SPEC that cannot be installed fails the items that need it, one line each, and no collection."""
    if TARGET_ENV not in config.stash:
        config.stash[TARGET_ENV] = ensure_env(config.stash[TARGET])
    return config.stash[TARGET_ENV]


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

    verdict = f"{outcomes.INCONCLUSIVE} (rerun, or more repeats decide it)"


def fail(exc: HarnessError) -> NoReturn:
    """A run that could not be prepared or did not finish: an ERROR in setup, shown without a traceback."""
    raise pytest.fail.Exception(one_line(exc), pytrace=False) from None


def write_line(config: pytest.Config, line: str) -> None:
    """Through the terminal reporter, past output capture (a training runs inside an item's setup); an xdist
    worker has no terminal of its own, so its lines go to the stderr it shares with the controller."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        if reporter is not None and not hasattr(config, "workerinput"):
            reporter.write_line(line)
        else:
            print(line, file=sys.__stderr__, flush=True)
