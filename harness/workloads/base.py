"""What a workload hands an executor: a Python module to run, its arguments and environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.rundir import RunDir

if TYPE_CHECKING:
    from harness.scenario import Scenario


class WorkloadError(Exception):
    """A run cannot be prepared as the scenario asks (caught before launching, not a check verdict)."""


@dataclass(frozen=True)
class Launch:
    """``python -m module *args`` in ``workdir`` (read-write); ``inputs`` are mounted read-only."""

    module: str
    args: list[str]
    env: dict[str, str]
    workdir: Path
    inputs: list[Path] = field(default_factory=list)
    ranks: int = 1

    def argv(self, python: str) -> list[str]:
        return [python, "-m", self.module, *self.args]


class Workload(Protocol):
    def prepare(self, scenario: Scenario, run: RunDir, enabled: bool, *, dry: bool = False) -> Launch:
        """Write the run's inputs into ``run`` and say how to start it (precision_debugger on or off).
        ``dry``: for a dry run, which describes a runner: do not require this host's inputs."""
        ...

    def describe(self, scenario: Scenario, run: RunDir) -> list[str]:
        """Lines for the dry run beyond the launch (inputs, what the trainer will run); ``run`` is the on run,
        already prepared."""
        ...
