"""A scenario's runs and every check on them, outside pytest (the CLI's ``run`` and ``compare``): the same
runs, checks and results.json as the pytest items."""

from __future__ import annotations

from pathlib import Path

from harness.artifacts.rundir import ScenarioDir
from harness.checks import CHECKS, CheckContext, CheckResult, run_check
from harness.checks.crash import not_checked
from harness.checks.known_gap import check_gap, gap_name
from harness.checks.results import record_check
from harness.scenario.model import Scenario
from harness.targets.environment import TargetEnv
from harness.training.monitor import Watch
from harness.training.runs import ensure_runs, scenario_lock


def evaluate(
    scenario: Scenario,
    results: Path,
    session: str,
    executor: str | None,
    reuse: bool,
    env: TargetEnv,
    watch: Watch | None = None,
    gate_timing: bool = True,
) -> tuple[float, list[CheckResult]]:
    """The same runs and checks as the pytest items, outside pytest; returns the training time too. ``watch``:
    the runner's dump cap, free-space floor and live line (default: from the environment, no live line). ``env``:
    the target's environment, resolved once by the entry point; ``gate_timing``: ``CheckContext``'s. The
    scenario's lock is held throughout, so another harness run on the same results dir waits."""
    with scenario_lock(ScenarioDir(results / scenario.name)):  # no other harness run between runs and results
        runs = ensure_runs(scenario, results, session, executor, reuse=reuse, env=env, watch=watch)
        ctx = CheckContext(scenario, runs.dir, gate_timing)
        out = []
        for name, check in CHECKS.items():
            out.append(result := run_check(name, check, ctx))
            record_check(scenario, runs, result)
        for gap in scenario.expect.known_gaps:
            out.append(result := not_checked(ctx, gap_name(gap)) or check_gap(ctx, gap))
            record_check(scenario, runs, result)
    return runs.trained_s, out
