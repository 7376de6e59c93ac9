"""The executor interface: run one Launch to completion, or say why the infrastructure could not."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Protocol

from harness.executors.settings import ExecutorSettings
from harness.rundir import RunDir
from harness.workloads.base import Launch

# Environment variables a training may see; nothing else leaks from the host.
ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class InfraError(Exception):
    """The training could not run or did not finish (not a verdict on precision_debugger)."""


@dataclass
class ExecResult:
    exit_code: int | None
    wall_s: float
    timed_out: bool = False
    oom_killed: bool = False
    detail: str = ""
    argv: list[str] = field(default_factory=list)  # the command as the executor really ran it

    def to_dict(self) -> dict:
        return asdict(self)


class Executor(Protocol):
    name: str

    def execute(self, launch: Launch, run: RunDir, settings: ExecutorSettings, labels: dict[str, str]) -> ExecResult:
        """Run ``launch`` with its output in ``run.log``; raise InfraError when it cannot be started."""
        ...
