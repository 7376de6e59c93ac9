"""The plugin's command-line options: those it shares with the CLI from ``harness.pipeline.options`` (one
declaration each), and its own (results, base against head, heavy, baseline)."""

from __future__ import annotations

import pytest

from harness import config
from harness.pipeline import options as shared


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("harness", "verl precision_debugger regression harness")
    g.addoption("--harness-results", default="results", help="results directory (default: ./results)")
    shared.add(
        g.addoption, (shared.EXECUTOR, shared.RAY_ADDRESS, shared.REUSE, *shared.TARGET, shared.STACK), pytest=True
    )
    g.addoption(
        "--harness-compare-base",
        metavar="SPEC",
        default=None,
        help="base against head: each scenario becomes one 'compare' item that runs it for this verl (base) and "
        "the --verl one (head), interleaved, and fails on a regression of head",
    )
    shared.add(g.addoption, (shared.REPEATS, shared.MAX_REPEATS), pytest=True)
    g.addoption(
        "--harness-heavy",
        action="store_true",
        default=config.HEAVY.get(),
        help="also run the scenarios marked heavy: true (or set HARNESS_HEAVY=1); otherwise they are skipped",
    )
    shared.add(g.addoption, (shared.TIMING,), pytest=True)
    g.addoption(
        "--harness-baseline",
        default=None,
        metavar="BASELINE",
        help="add a 'regression' item per scenario: overhead, disk and dump structure against this baseline file",
    )
    shared.add(g.addoption, shared.WATCH, pytest=True)
