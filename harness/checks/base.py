"""What every check gets (the scenario and its artifacts on disk) and what it returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol

from harness.artifacts.crash import Crash
from harness.artifacts.dumpfacts import DumpReads
from harness.artifacts.nodes import NodesRecord
from harness.artifacts.reader import DumpDir, DumpTree, Metrics
from harness.artifacts.record import RunRecord
from harness.artifacts.rundir import LINKED, MODES, Mode, ScenarioDir
from harness.errors import HarnessError, MetricsError
from harness.scenario.blocks import Budgets
from harness.scenario.model import Scenario

Figure = float | int | str


@dataclass
class CheckResult:
    check: str
    problems: list[str] = field(default_factory=list)
    figures: dict[str, Figure] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    summary: str = ""  # the headline figures, one short line for tables
    inconclusive: list[str] = field(default_factory=list)  # figures the noise leaves undecided: not a pass
    not_checked: str = ""  # why there was nothing to check (a training crashed: the crash check says so): not a pass
    xfail_reason: str = ""  # a declared known gap or known bug: expected to fail (a strict xfail)
    # what was measured against budgets and gated none of it (timing recorded, budgets provisional), with the figures:
    # not a pass (outcomes.check_outcome); results.json keeps the lines in ``notes``
    not_gated: str = ""

    @property
    def passed(self) -> bool:
        return not self.problems and not self.inconclusive and not self.not_checked


# What a check that needs the off run says where only the on run was trained (``CheckContext.modes``): not measured,
# never a pass (``outcomes.check_outcome``: not checked).
OFF_UNTRAINED = (
    "no off run was trained: the comparison that made these runs decides no overhead for this scenario "
    "(budgets.overhead.compare: false, or --judge without overhead), so none of its figures would be read"
)


def provisional(budgets: Budgets) -> str:
    """What a check against provisional budgets (``budgets.provisional``: never measured on their device) says of
    them, "" where they are measured: each figure is reported against them, none gated."""
    return f"provisional budgets, not gated ({budgets.provisional})" if budgets.provisional else ""


def _timings_checked(path: Path) -> Metrics:
    """A run's metrics whose timers (``timing_s/*``) are all finite numbers: ``"fast"`` or ``null`` is a
    MetricsError naming the step and key, not a traceback in the check that reads it."""
    metrics = Metrics.read(path)
    for step, data in sorted(metrics.steps.items()):
        for key, value in data.items():
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            if key.startswith("timing_s/") and not ok:
                raise MetricsError(f"{path}: step {step}: {key} is {value!r}, not a number of seconds")
    return metrics


@dataclass
class CheckContext:
    scenario: Scenario
    dir: ScenarioDir
    # False: timing budgets (the overhead maxima) are decided and recorded but never fail (``--harness-timing
    # record``): the harness's own CI on a shared 2-core runner, where one off/on pair cannot decide a timing
    gate_timing: bool = True
    hold: bool = False  # the on run's dumps kept open for a later reader of their bytes (``DumpReads``)
    # the trainings asked of these runs (``ScenarioRuns.modes``): ("on",) where what judged them decides no overhead
    # (base against head on a tier that cannot decide it): no off run, and nothing of one to check
    modes: tuple[Mode, ...] = MODES

    def __post_init__(self) -> None:
        if linked := self.dir.link(dumps=False):  # a re-check (--reuse) of a linked run dir read another tree
            raise HarnessError(f"{linked}: {LINKED}")

    @cached_property
    def tree(self) -> DumpTree:
        return DumpTree.scan(self.dir.run("on").dumps)

    @cached_property
    def reads(self) -> DumpReads:
        """The on run's dumps as every check reads them: each opened and read whole once, its facts kept."""
        return DumpReads(self.dir.run("on").dumps, self.hold)

    @cached_property
    def off_tree(self) -> DumpTree:
        return DumpTree.scan(self.dir.run("off").dumps)

    @cached_property
    def nodes(self) -> NodesRecord | None:
        """Where the on run's ranks ran and what each node's disk held (a run on a Ray cluster's nodes); None: on one
        host."""
        return NodesRecord.read(self.dir.run("on").nodes)

    def on_node(self, rank: int | None) -> str:
        """`` on node ...`` for a line about ``rank``'s dumps, on a cluster; "" on one host."""
        return self.nodes.where(rank) if self.nodes else ""

    @cached_property
    def metrics_off(self) -> Metrics:
        return _timings_checked(self.dir.run("off").metrics)

    @cached_property
    def metrics_on(self) -> Metrics:
        return _timings_checked(self.dir.run("on").metrics)

    @cached_property
    def records(self) -> dict[Mode, RunRecord]:
        """Each run's run.json (what its executor measured, how it ended); a run that did not run is absent."""
        return {mode: r for mode in MODES if (r := RunRecord.read(self.dir.run(mode).record)) is not None}

    @cached_property
    def stopped(self) -> list[str]:
        """The monitor's lines for runs it stopped at the dump cap (from their run.json)."""
        return [r.stopped for r in self.records.values() if r.stopped]

    @cached_property
    def crashes(self) -> dict[Mode, Crash]:
        """The runs that verl or msprobe crashed (run.json's ``crash``): the crash check's verdict, and nothing
        else to check (their dumps and timings are a crash's leftovers)."""
        out: dict[Mode, Crash] = {}
        for mode, r in self.records.items():
            if r.crash is not None and (crash := Crash(**r.crash)).verdict:
                out[mode] = crash
        return out

    def untrained(self, mode: Mode) -> bool:
        """Whether ``mode``'s training was never asked of these runs (and not trained to tell a crash either)."""
        return mode not in self.modes and mode not in self.records

    def wall_s(self, mode: Mode) -> float | None:
        """The run's wall time as its executor measured it (run.json), None when unrecorded."""
        record = self.records.get(mode)
        return float(record.result.wall_s) if record is not None else None

    def dumps_of(self, stages: set[str] | None = None) -> list[DumpDir]:
        """Dump dirs of the expected steps and ranks (optionally only some stages)."""
        s = self.scenario
        return [
            d
            for d in self.tree.dirs
            if d.step in s.expected_steps and d.rank in s.expected_ranks and (stages is None or d.stage in stages)
        ]


class Check(Protocol):
    def __call__(self, ctx: CheckContext) -> CheckResult: ...
