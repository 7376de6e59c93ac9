"""What a workload hands an executor: a Launch. It sits below workloads and executors, which therefore never import
each other; what the executor hands back is ``harness.artifacts.record.ExecResult``."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path


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


def argv_lines(argv: list[str]) -> list[str]:
    """An argv as shell-quoted lines, one argument per line after the module (for dry runs)."""
    quoted = [shlex.quote(a) for a in argv]
    head = " ".join(quoted[:3])
    return [
        f"  {head}" + (" \\" if quoted[3:] else ""),
        *(f"    {a} \\" for a in quoted[3:-1]),
        *([f"    {quoted[-1]}"] if quoted[3:] else []),
    ]
