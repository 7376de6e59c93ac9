"""pytest plugin: each scenario file becomes one test item per check (``pytest scenarios/ -k NAME``).

A scenario's trainings run in the setup of its first item (errors there are infrastructure ERRORs, not
check FAILUREs) and are reused by its other items; under pytest-xdist all items of a scenario go to
one worker (``--dist loadgroup``), and the file lock in ``harness.training.runs`` keeps it to one run anyway.
Each training shows a live line in the terminal reporter (``harness.training.monitor``); SIGTERM and SIGHUP stop it
like Ctrl-C and exit 128+N; containers of dead harnesses are swept at session start.

This module is what pytest registers (pyproject: pytest11): the session's set-up and collection. The rest is cut
by job: ``options``, ``items`` (the scenario file and its items), ``hygiene`` (no training outlives the session),
``reporting`` (node ids, the time breakdown), ``state`` (what they share).
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessError, one_line
from harness.gate.baseline import Baseline
from harness.pipeline.options import executor_choice
from harness.pytest_plugin.hygiene import (
    WorkersStop,
    interrupt_when_orphaned,
    pytest_keyboard_interrupt,
    pytest_sessionfinish,
    pytest_sessionstart,
)
from harness.pytest_plugin.items import ScenarioFile, release_lock
from harness.pytest_plugin.options import pytest_addoption
from harness.pytest_plugin.reporting import PlainNodeIds, TimeBreakdown
from harness.pytest_plugin.state import (
    BASELINE,
    COMPARE_BASE,
    SCENARIOS,
    SESSION,
    SIGNALS,
    TARGET,
    WATCH,
    write_line,
)
from harness.scenario.loader import ScenarioList
from harness.signals import interrupts
from harness.targets.spec import parse_target
from harness.training.monitor import PeriodicLines, Watch

# hooks defined in the modules above: pytest registers this module (pyproject: pytest11), so they are named here
__all__ = ["pytest_addoption", "pytest_keyboard_interrupt", "pytest_sessionfinish", "pytest_sessionstart"]


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"  # keep a scenario's items (and so its trainings) on one worker
    if workerinput and workerinput.get("harness_loadgroup"):
        config.option.loadgroup = True  # xdist set this from the worker's own args, before our change above
    config.stash[SESSION] = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
    try:  # a cluster named (--ray-address, HARNESS_RAY_ADDRESS): every scenario under the ray executor
        config.option.executor = executor_choice(config.getoption("executor", None), config.getoption("ray_address"))
    except HarnessError as exc:
        raise pytest.UsageError(one_line(exc)) from None
    config.stash[SCENARIOS] = ScenarioList(config.getoption("executor", None))
    try:
        config.stash[TARGET] = parse_target(
            config.getoption("verl", None),
            config.getoption("msprobe", None),
            config.getoption("series", None),
            stack=config.getoption("stack", None),
        )
    except HarnessError as exc:
        raise pytest.UsageError(one_line(exc)) from None
    if spec := config.getoption("harness_compare_base", None):
        try:
            config.stash[COMPARE_BASE] = parse_target(
                spec, config.getoption("msprobe", None), stack=config.getoption("stack", None)
            )
        except HarnessError as exc:
            raise pytest.UsageError(f"--harness-compare-base: {one_line(exc)}") from None
    try:
        config.stash[WATCH] = Watch.configure(
            config.getoption("harness_max_dump", None),
            config.getoption("harness_min_free", None),
            show=PeriodicLines(lambda line: write_line(config, line), config.getoption("harness_progress_every", 15)),
        )
    except ValueError as exc:
        raise pytest.UsageError(f"--harness-max-dump/--harness-min-free: {exc}") from None
    config.stash[SIGNALS] = stack = contextlib.ExitStack()
    stack.enter_context(interrupts())
    if workerinput:
        interrupt_when_orphaned()
    if path := config.getoption("harness_baseline", None):
        try:
            config.stash[BASELINE] = Baseline.read(Path(path))
        except HarnessError as exc:
            raise pytest.UsageError(f"--harness-baseline: {exc}") from None
    if workerinput is None:
        config.pluginmanager.register(PlainNodeIds(), "harness-plain-nodeids")
        config.pluginmanager.register(WorkersStop(config), "harness-workers-stop")
        workers = config.getoption("numprocesses", None) or 1
        config.pluginmanager.register(TimeBreakdown(int(workers) if str(workers).isdigit() else 2), "harness-times")


def pytest_report_header(config: pytest.Config) -> str:
    return f"harness target: {config.stash[TARGET].describe()}"


def pytest_unconfigure(config: pytest.Config) -> None:
    release_lock(config)
    if SIGNALS in config.stash:
        config.stash[SIGNALS].close()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: tell each worker to tag items with their xdist_group, as loadgroup needs."""
    node.workerinput["harness_loadgroup"] = node.config.getoption("dist") == "loadgroup"


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix in (".yaml", ".yml") and file_path.parent.name == "scenarios":
        return ScenarioFile.from_parent(parent, path=file_path)
    return None
