"""Fixtures; the builders they use are in builders.py (imported by tests directly)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import write_dump, write_metrics, write_scenario

from harness.checks import CheckContext
from harness.loader import load_scenario
from harness.rundir import ScenarioDir
from harness.scenario import Scenario


@pytest.fixture
def good_case(tmp_path: Path) -> tuple[Scenario, CheckContext]:
    """A scenario with a complete, correct set of artifacts (as a successful pair of runs leaves them)."""
    scenario = load_scenario(write_scenario(tmp_path))
    sdir = ScenarioDir(tmp_path / "results" / scenario.name)
    dumps = sdir.run("on").dumps
    for step in scenario.precision_debugger.steps:
        for stage in scenario.precision_debugger.stages:
            for rank in range(scenario.world_size):
                write_dump(dumps, step, stage, rank)
    write_metrics(sdir.run("off").metrics, {n: 1.0 for n in range(1, 6)})
    write_metrics(sdir.run("on").metrics, {1: 1.0, 2: 8.0, 3: 1.1, 4: 9.0, 5: 1.05}, stage_scale=0.3)
    return scenario, CheckContext(scenario, sdir)
