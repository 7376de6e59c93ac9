"""results.json: every measured figure and verdict of one scenario, merged as checks finish."""

from __future__ import annotations

import json
import platform
from importlib import metadata
from typing import Any

from filelock import FileLock

from harness.checks.base import CheckResult
from harness.registry import EXECUTORS
from harness.runs import ScenarioRuns
from harness.scenario import Scenario

PACKAGES = ("verl", "mindstudio-probe", "torch", "torch_npu", "transformers")


def environment(scenario: Scenario) -> dict[str, Any]:
    env: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine()}
    for pkg in PACKAGES:
        try:
            env[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            env[pkg] = None
    env["device"] = scenario.device
    env["executor"] = kind = scenario.executor.kind
    return env | EXECUTORS[kind].environment(scenario.executor)


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
                "environment": environment(scenario),
                "runs": {
                    m: {"argv": r.argv, "executor": r.executor, **r.result.to_dict()} for m, r in runs.records.items()
                },
                "checks": {},
            }
        doc["checks"][result.check] = {
            "passed": result.passed,
            "summary": result.summary,
            "problems": result.problems,
            "notes": result.notes,
            "figures": result.figures,
            **({"xfail_reason": xfail_reason} if xfail_reason else {}),
        }
        path.write_text(json.dumps(doc, indent=2, sort_keys=False))
