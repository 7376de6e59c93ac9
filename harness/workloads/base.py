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
    python: str | None = None  # the target environment's interpreter; None: the executor's default
    target: str | None = None  # the verl identity a self-contained image must hold; None: the pinned release

    def argv(self, python: str) -> list[str]:
        return [python, "-m", self.module, *self.args]


class Workload(Protocol):
    # what the workload drives in the target's verl (dotted paths): probed before launching, so API drift is
    # an infrastructure error naming the symbol, not a traceback in a training log
    symbols: tuple[str, ...]

    def prepare(self, scenario: Scenario, run: RunDir, enabled: bool, python: str | None = None) -> Launch:
        """Write the run's inputs into ``run`` and say how to start it (precision_debugger on or off) with
        ``python``, the target environment's interpreter."""
        ...
