"""What a workload hands an executor (a Launch) and what the executor hands back (an ExecResult).

Both sit below workloads and executors, which therefore never import each other."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
