"""Where a scenario's figures were measured, and with what: results.json's ``settings`` and ``environment`` blocks,
which the gate and the history compare before they compare any figure."""

from __future__ import annotations

import functools
import platform
from pathlib import Path
from typing import Any

from harness import config
from harness.errors import TargetError
from harness.scenario.model import Scenario
from harness.targets.spec import git
from harness.training.registry import EXECUTORS


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo). Step times, and so the overhead ratios, move with it: GitHub's
    hosted runners of one label come with several, so a nightly baseline's overhead is gated only on the same one
    (``harness.gate.baseline.OVERHEAD_ENV``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


@functools.cache
def harness_commit() -> str | None:
    """The harness's own commit where it runs from a git checkout (a nightly's), else None. A harness change can move
    an overhead figure with verl unchanged: the history keeps it with each night and never blames verl for it."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        return str(git("rev-parse", "HEAD", cwd=root))
    except TargetError:
        return None


def environment(scenario: Scenario, target: dict[str, Any]) -> dict[str, Any]:
    """Where the figures were measured, and with what: the harness's commit and the scenario file's sha256 (what the
    history calls an environment change). ``target``: ``ScenarioRuns.target`` (versions as installed in the target's
    environment, its identity and series, as the runs recorded them)."""
    env: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(), "cpu_model": cpu_model()}
    env["runner"] = config.RUNNER_NAME.get() or platform.node() or "?"  # the machine that trained, by name
    env |= {"harness": harness_commit(), "scenario_sha256": scenario.digest}
    env.update(target.get("environment") or {})
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
