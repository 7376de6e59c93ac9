"""What a workload hands an executor (a Launch) and what the executor hands back (an ExecResult).

Both sit below workloads and executors, which therefore never import each other; and what a run leaves of them
(``RunRecord``, its run.json)."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.safeio import MB, InputError, Versioned


@dataclass(frozen=True)
class Launch:
    """``python -m module *args`` in ``workdir`` (read-write); ``inputs`` are mounted read-only."""

    module: str
    args: list[str]
    env: dict[str, str]
    workdir: Path
    inputs: list[Path] = field(default_factory=list)
    python: str | None = None  # the target environment's interpreter; None: the executor's default
    target: str | None = None  # the verl identity a self-contained image must hold; None: the pinned release

    def argv(self, python: str) -> list[str]:
        return [python, "-m", self.module, *self.args]


@dataclass
class ExecResult:
    exit_code: int | None
    wall_s: float
    timed_out: bool = False
    oom_killed: bool = False
    stopped: bool = False  # ended early at the harness's request (its monitor): see the run's monitor verdict
    detail: str = ""
    argv: list[str] = field(default_factory=list)  # the command as the executor really ran it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def argv_lines(argv: list[str]) -> list[str]:
    """An argv as shell-quoted lines, one argument per line after the module (for dry runs)."""
    quoted = [shlex.quote(a) for a in argv]
    head = " ".join(quoted[:3])
    return [
        f"  {head}" + (" \\" if quoted[3:] else ""),
        *(f"    {a} \\" for a in quoted[3:-1]),
        *([f"    {quoted[-1]}"] if quoted[3:] else []),
    ]


class RunRecord(Versioned):
    """run.json: one training as its executor ran it and how it ended (the checks read it back). Schema 1 (no
    ``schema_version``) had the same fields."""

    FILE = "run.json"
    REDO = "re-run the scenario with this harness"
    schema_version: Literal[2] = 2
    mode: Literal["off", "on"]  # rundir.Mode
    executor: str
    argv: list[str]
    result: ExecResult
    error: str | None = None
    target: dict[str, Any] | None = None  # the verl and msprobe under test (Target.block)
    stopped: str | None = None  # the monitor's line when it stopped the run at the dump cap (a disk failure)
    crash: dict[str, Any] | None = None  # why it failed and whose fault it is (harness.artifacts.crash.Crash)

    @classmethod
    def read(cls, path: Path) -> RunRecord | None:
        """A run's run.json; None when the run did not run or left none that reads (its checks say so)."""
        try:
            return cls.read_file(path, 16 * MB, follow=False)
        except InputError:
            return None
