"""results.json: every measured figure and verdict of one scenario, merged as checks finish."""

from __future__ import annotations

import json
import platform
from typing import Any

from filelock import FileLock

from harness.checks.base import CheckResult
from harness.registry import EXECUTORS
from harness.runs import ScenarioRuns
from harness.scenario import Scenario
from harness.target import pinned_target
from harness.target_env import ensure_env
from harness.target_env import environment as target_environment


def environment(scenario: Scenario, target: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where the figures were measured. ``target``: ``ScenarioRuns.target`` (versions as installed in the target's
    environment, its identity and series); without it, the pinned releases of the project venv."""
    env: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine()}
    env.update((target or {}).get("environment") or target_environment(ensure_env(pinned_target())))
    packages_dir = env.pop("packages_dir", None)
    env["device"] = scenario.device
    env["executor"] = kind = scenario.executor.kind
    return env | EXECUTORS[kind].environment(scenario.executor, packages_dir)


def settings_of(scenario: Scenario) -> dict[str, Any]:
    """The settings block of results.json: what makes two runs of a scenario comparable (the gate's check)."""
    return {
        "engine": scenario.engine,
        "world_size": scenario.world_size,
        "steps": scenario.steps,
        "workload": scenario.workload.kind,
        "precision_debugger": scenario.precision_debugger.model_dump(by_alias=True),
    }


def record_check(scenario: Scenario, runs: ScenarioRuns, result: CheckResult, xfail_reason: str | None = None) -> None:
    path = runs.dir.results
    with FileLock(str(runs.dir.lock) + ".results"):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = {}
        if doc.get("session") != runs.session:
            doc = {
                "scenario": scenario.name,
                "session": runs.session,
                "settings": settings_of(scenario),
                "target": runs.target.get("block"),
                "environment": environment(scenario, runs.target),
                "runs": {
                    m: {"argv": r.argv, "executor": r.executor, **r.result.to_dict()} for m, r in runs.records.items()
                },
                "checks": {},
            }
        doc["checks"][result.check] = {
            "passed": result.passed,
            "summary": result.summary,
            "problems": result.problems,
            "inconclusive": result.inconclusive,
            "notes": result.notes,
            "figures": result.figures,
            **({"xfail_reason": xfail_reason} if xfail_reason else {}),
        }
        path.write_text(json.dumps(doc, indent=2, sort_keys=False))
