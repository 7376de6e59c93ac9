"""Fixtures; the builders they use are in builders.py (imported by tests directly). The verl repository,
the environment cache and the small scenario are made once per session and shared by the target and compare
tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import write_good_case, write_scenario
from guard import sitecustomize as guard
from verl_repo import VerlRepo, make_verl_repo

from harness.checks import CheckContext
from harness.config import RAY_ADDRESS
from harness.pipeline.options import runs_heavy
from harness.scenario.model import Scenario


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked heavy (minutes of training each) are the heavy tier, like heavy: true scenarios; they train."""
    skip = pytest.mark.skip(reason="heavy test (minutes of training): run it with --harness-heavy")
    for item in items:
        if item.get_closest_marker("heavy"):
            item.add_marker(pytest.mark.trains)
            if not runs_heavy(config.getoption("harness_heavy")):
                item.add_marker(skip)


TABLE_ROWS = "test_bad_input_table.py::test_a_bad_input_row"  # both kinds: in this process, in a child
_table: dict[str, list[float]] = {}  # each row's node id: its phases' seconds


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The bad-input table's rows as they ran (under xdist the controller gets every worker's reports)."""
    if TABLE_ROWS in report.nodeid and not report.skipped:
        _table.setdefault(report.nodeid, []).append(report.duration)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The table's count and minutes in the run's own output (.ci/run's): what the rows cost, read off the run that
    tested them, never a second run."""
    if _table:
        seconds = sum(sum(phases) for phases in _table.values())
        terminalreporter.write_line(
            f"bad-input table: {len(_table)} rows ran in {seconds / 60:.1f} min ({seconds:.0f} s of test time)"
        )


@pytest.fixture(autouse=True)
def _trains_only_when_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test not marked ``trains`` fails where it would start a training, here or in a Python it starts; one not
    marked ``integration`` either, where it would start a harness, pytest or verl process or build an environment."""
    if request.node.get_closest_marker("trains"):
        return
    if not request.node.get_closest_marker("integration"):
        monkeypatch.setattr(guard, "unmarked", request.node.nodeid)
    monkeypatch.setenv(guard.ENV, request.node.nodeid)
    paths = [str(Path(guard.__file__).parent), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.setattr(subprocess.Popen, "__init__", subprocess.Popen.__init__)  # restored after the test
    guard.install()


@pytest.fixture(autouse=True)
def _no_cluster_outlives_its_test() -> Iterator[None]:
    """``executor_choice`` names a cluster in this process's environment for the runs it starts: put back after each
    test (a test's ``--ray-address`` made every later harness process of its worker the ray executor's)."""
    before = os.environ.get(RAY_ADDRESS.name)
    yield
    if before is None:
        os.environ.pop(RAY_ADDRESS.name, None)
    else:
        os.environ[RAY_ADDRESS.name] = before


@pytest.fixture
def good_case(tmp_path: Path) -> tuple[Scenario, CheckContext]:
    """A scenario with a complete, correct set of artifacts (as a successful pair of runs leaves them)."""
    scenario, sdir = write_good_case(tmp_path)
    return scenario, CheckContext(scenario, sdir)


# 1 rank, 3 steps, 1 profiled step: the smallest real run that shows a verdict; budgets nothing can flip
SMALL_TARGET: dict = {
    "world_size": 1,
    "steps": 3,
    "precision_debugger": {
        "level": "L1",
        "steps": [2],
        "stages": ["actor_compute_log_prob", "ref_compute_log_prob", "actor_update"],
    },
    "budgets": {
        "overhead": {"max_profiled_ratio": 1000, "max_unprofiled_ratio": 100},
        "disk": {"max_total": "1GB", "max_per_step": None},
    },
}


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("harness-cache")


@pytest.fixture(scope="session")
def repo(tmp_path_factory: pytest.TempPathFactory) -> VerlRepo:
    return make_verl_repo(tmp_path_factory.mktemp("verl") / "repo")


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with scenarios/tiny_fsdp_l1.yaml, the small variant."""
    root = tmp_path_factory.mktemp("small")
    write_scenario(root, name="tiny_fsdp_l1", **SMALL_TARGET)
    return root
