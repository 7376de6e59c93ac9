"""The options the CLI and the pytest plugin share, declared once: the same flag means the same thing in
``python -m harness run`` and in ``pytest scenarios/``. pytest's options live in one namespace with every other
plugin's, so there most of them carry a ``--harness-`` prefix (``--reuse`` is ``--harness-reuse``); the target's
and the executor's keep their names in both.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness import config
from harness.errors import HarnessError, InfraError
from harness.scenario.settings import EXECUTORS
from harness.scenario.settings.ray import check_address
from harness.targets.spec import SERIES_HELP, STACK_HELP, STACKS, TARGET_HELP
from harness.training.monitor import positive_seconds

# Runs per side of a comparison, at most: each is a full off + on pair of trainings (30-300 s), so a hundred is a day's
# compare; a billion once built the whole run order in memory before anything ran (a MemoryError traceback).
MOST_REPEATS = 100


def repeats_option(text: str) -> int:
    """``--repeats`` / ``--max-repeats`` (and pytest's): a whole number from 1 to MOST_REPEATS, else argparse's
    one-line usage error."""
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MOST_REPEATS:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 1 to {MOST_REPEATS} runs per side, got {text!r}"
        )
    return int(text)


@dataclass(frozen=True)
class Option:
    name: str  # the CLI's flag without its dashes
    kwargs: dict[str, Any] = field(default_factory=dict)  # argparse's (pytest's addoption takes the same)
    pytest_name: str = ""  # pytest's flag without its dashes, where it is not ``harness-<name>``

    def flag(self, pytest: bool) -> str:
        return f"--{self.pytest_name or 'harness-' + self.name}" if pytest else f"--{self.name}"


VERL = Option("verl", {"metavar": "SPEC", "help": f"the verl under test: {TARGET_HELP} (env HARNESS_VERL)"}, "verl")
MSPROBE = Option(
    "msprobe", {"metavar": "SPEC", "help": "the msprobe under test: a version or a .whl (HARNESS_MSPROBE)"}, "msprobe"
)
SERIES = Option("series", {"help": f"{SERIES_HELP} (env HARNESS_SERIES)"}, "series")
STACK = Option("stack", {"choices": list(STACKS), "help": f"the stack: {STACK_HELP} (env HARNESS_STACK)"}, "stack")
EXECUTOR = Option("executor", {"choices": list(EXECUTORS), "help": "override every scenario's executor"}, "executor")
RAY_ADDRESS = Option(
    "ray-address",
    {
        "metavar": "URL",
        "help": "submit every scenario's trainings to this Ray cluster, as Ray jobs (its dashboard, http://HEAD:8265; "
        "executor ray; env HARNESS_RAY_ADDRESS)",
    },
    "ray-address",
)
REUSE = Option(
    "reuse",
    {
        "action": "store_true",
        "help": "reuse earlier successful trainings when the scenario's run settings are unchanged",
    },
)
MAX_DUMP = Option(
    "max-dump",
    {
        "metavar": "SIZE",
        "help": "stop any run whose dumps grow past SIZE, whatever its budgets (default: $HARNESS_MAX_DUMP, else none)",
    },
)
MIN_FREE = Option(
    "min-free",
    {
        "metavar": "SIZE",
        "help": "stop a run when the results filesystem has less free (default: $HARNESS_MIN_FREE, else 1GB)",
    },
)
PROGRESS_EVERY = Option(
    "progress-every",
    {"type": positive_seconds, "default": 15.0, "metavar": "S", "help": "seconds between a training's live lines"},
)
REPEATS = Option(
    "repeats",
    {"type": repeats_option, "default": 2, "help": "runs per side of a comparison: base, head, head, base, ..."},
    "harness-compare-repeats",
)
MAX_REPEATS = Option(
    "max-repeats",
    {
        "type": repeats_option,
        "help": "while a comparison is INCONCLUSIVE, one more base/head pair at a time up to this many runs per side "
        "(default: up to 6, while the next pair ends within 20 min of the scenario's first run)",
    },
    "harness-compare-max-repeats",
)
HEAVY = Option(
    "heavy",
    {
        "action": "store_true",
        "help": f"also run the scenarios marked heavy: true (or set {config.HEAVY.name}=1); otherwise they are skipped",
    },
)
TIMINGS = ("gate", "record")
TIMING = Option(
    "timing",
    {
        "choices": TIMINGS,
        "help": "gate: an overhead over its scenario's max fails (the default); record: decided and recorded, never "
        "failing: the harness's own CI on a shared runner, where timing claims are benchmarks (env HARNESS_TIMING)",
    },
)
TARGET = (VERL, MSPROBE, SERIES)
WATCH = (MAX_DUMP, MIN_FREE, PROGRESS_EVERY)


def executor_choice(executor: str | None, ray_address: str | None) -> str | None:
    """``--executor``, or ``ray`` where a cluster is named (``--ray-address``, else ``HARNESS_RAY_ADDRESS`` unless
    ``--executor`` says otherwise); the address then reaches the ray executor as ``HARNESS_RAY_ADDRESS``, in this
    process and the runs and workers it starts. Bad input (a HarnessError, one line): a bad address, or
    ``--ray-address`` with another executor."""
    if ray_address and executor not in (None, "ray"):
        raise HarnessError(f"--ray-address with --executor {executor}: a cluster's runs are the ray executor's")
    given = ray_address or (config.RAY_ADDRESS.get() if executor in (None, "ray") else None)
    if not given:
        return executor
    try:
        os.environ[config.RAY_ADDRESS.name] = check_address(given)  # for the runs and workers it starts
    except ValueError as exc:
        raise HarnessError(f"{'--ray-address' if ray_address else config.RAY_ADDRESS.name}: {exc}") from None
    return "ray"


def add(add_option: Callable[..., Any], options: Iterable[Option], pytest: bool = False) -> None:
    """Each option onto a parser: ``argparse.ArgumentParser.add_argument`` or pytest's ``OptionGroup.addoption``."""
    for option in options:
        add_option(option.flag(pytest), **option.kwargs)


def gates_timing(value: str | None) -> bool:
    """``--timing`` (pytest: ``--harness-timing``), else ``HARNESS_TIMING``, else gate: whether the scenarios' overhead
    maxima fail a run (``CheckContext.gate_timing``). The environment variable reaches the runs a test starts."""
    chosen = value or config.TIMING.get() or "gate"
    if chosen not in TIMINGS:
        raise InfraError(f"HARNESS_TIMING={chosen!r}: one of {', '.join(TIMINGS)}")
    return chosen == "gate"


def runs_heavy(flag: bool) -> bool:
    """``--heavy`` (pytest: ``--harness-heavy``), else ``HARNESS_HEAVY=1``: whether the scenarios marked heavy: true
    run (``Session.heavy``); they are skipped, saying how to run them, otherwise."""
    return flag or config.HEAVY.get()
