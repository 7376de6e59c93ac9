"""The workload interface: ``prepare`` a run of a scenario whose ``workload`` block is this workload's (``name``, its
``kind``: ``harness.scenario.settings``)."""

from __future__ import annotations

from typing import ClassVar, Protocol

from harness.artifacts.rundir import RunDir
from harness.scenario.blocks import ScenarioView
from harness.training.launch import Launch


class Workload(Protocol):
    name: ClassVar[str]
    # what the workload drives in the target's verl (dotted paths): probed before launching, so API drift is
    # an infrastructure error naming the symbol, not a traceback in a training log
    symbols: ClassVar[tuple[str, ...]]

    def prepare(
        self, scenario: ScenarioView, run: RunDir, enabled: bool, *, dry: bool = False, python: str | None = None
    ) -> Launch:
        """Write the run's inputs into ``run`` and say how to start it (precision_debugger on or off) with
        ``python``, the target environment's interpreter (None: the harness's own). ``dry``: for a dry run,
        which describes a runner: do not require this host's inputs."""
        ...

    def takes_slot(self, scenario: ScenarioView) -> bool:
        """Whether a run takes one of the host's heavy slots (``harness.training.slots``): several GiB and cores
        each."""
        ...

    def describe(self, scenario: ScenarioView, run: RunDir, python: str | None = None) -> list[str]:
        """Lines for the dry run beyond the launch (inputs, what the trainer will run); ``run`` is the on run,
        already prepared."""
        ...
