"""What a training run leaves of how it ran: its executor's ``ExecResult`` and ``RunRecord``, the run's run.json.

Executors make them, the checks and the crash classifier read them back (``harness.artifacts.crash``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.safeio import MB, InputError, Versioned


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
