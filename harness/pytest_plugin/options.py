"""The plugin's command-line options (the CLI's twins where both have one; environment defaults named)."""

from __future__ import annotations

import os

import pytest

from harness.pipeline.base_head import repeats_option
from harness.scenario.registry import EXECUTORS
from harness.target.spec import SERIES_HELP, TARGET_HELP
from harness.training.monitor import MAX_DUMP_ENV, MIN_FREE_ENV, positive_seconds


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("harness", "verl precision_debugger regression harness")
    g.addoption("--harness-results", default="results", help="results directory (default: ./results)")
    g.addoption("--executor", choices=list(EXECUTORS), default=None, help="override every scenario's executor")
    g.addoption(
        "--harness-reuse",
        action="store_true",
        help="reuse successful trainings of an earlier session when the scenario's run settings are unchanged",
    )
    g.addoption("--verl", metavar="SPEC", default=None, help=f"the verl under test: {TARGET_HELP} (env HARNESS_VERL)")
    g.addoption(
        "--msprobe", metavar="SPEC", default=None, help="the msprobe under test: a version or a .whl (HARNESS_MSPROBE)"
    )
    g.addoption("--series", default=None, help=f"{SERIES_HELP} (env HARNESS_SERIES)")
    g.addoption(
        "--harness-compare-base",
        metavar="SPEC",
        default=None,
        help="base against head: each scenario becomes one 'compare' item that runs it for this verl (base) and "
        "the --verl one (head), interleaved, and fails on a regression of head",
    )
    g.addoption(
        "--harness-compare-repeats", type=repeats_option, default=2, help="runs per side of a comparison (default 2)"
    )
    g.addoption(
        "--harness-compare-max-repeats",
        type=repeats_option,
        help="while a comparison is INCONCLUSIVE, more base/head pairs up to this many runs per side (default: up "
        "to 6, while the next pair ends within 20 min of the scenario's first run)",
    )
    g.addoption(
        "--harness-heavy",
        action="store_true",
        default=os.environ.get("HARNESS_HEAVY") == "1",
        help="also run the scenarios marked heavy: true (or set HARNESS_HEAVY=1); otherwise they are skipped",
    )
    g.addoption(
        "--harness-timing",
        choices=["gate", "record"],
        default=os.environ.get("HARNESS_TIMING", "gate"),
        help="gate: an overhead over its scenario's max fails (default); record: decided and recorded, never failing "
        "(the harness's own CI on a shared runner, where timing claims are benchmarks; env HARNESS_TIMING)",
    )
    g.addoption(
        "--harness-baseline",
        default=None,
        metavar="BASELINE",
        help="add a 'regression' item per scenario: overhead, disk and dump structure against this baseline file",
    )
    g.addoption(
        "--harness-max-dump",
        metavar="SIZE",
        help=f"stop any run whose dumps grow past SIZE, whatever its budgets (default: ${MAX_DUMP_ENV}, else none)",
    )
    g.addoption(
        "--harness-min-free",
        metavar="SIZE",
        help=f"stop a run when the results filesystem has less free (default: ${MIN_FREE_ENV}, else 1GB)",
    )
    g.addoption(
        "--harness-progress-every",
        type=positive_seconds,
        default=15.0,
        metavar="S",
        help="seconds between a training's live lines (default 15)",
    )
