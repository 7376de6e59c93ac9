"""Every problem the harness reports is a HarnessError: printed as one line (or one line per problem), exit 2,
never a traceback. The kinds are the ones a user must tell apart, each with the label it is shown under."""

from __future__ import annotations

import traceback
from typing import Any


class HarnessError(Exception):
    """The root. ``label`` heads the one-line report (CLI, pytest, dry run)."""

    label = "ERROR"
    note = ""  # said after the label where the kind alone could mislead


class ScenarioError(HarnessError):
    """An invalid scenario file; ``problems`` are complete, printable lines (``file:line: field: what``)."""

    label = "INVALID SCENARIO"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class TargetError(HarnessError):
    """A verl or msprobe SPEC that names nothing installable (a missing path, an unknown ref): said before any run."""

    label = "TARGET ERROR"


class WorkloadError(HarnessError):
    """A valid scenario whose runs cannot be prepared as it asks (caught before training)."""

    label = "WORKLOAD ERROR"
    note = " (caught before training)"


class InfraError(HarnessError):
    """The training could not run or did not finish: not a verdict on precision_debugger. ``transient``: the
    machine failed a training that may well run the next time (a lost port, a timeout, a signal)."""

    label = "INFRASTRUCTURE ERROR"
    note = " (not a check verdict)"

    def __init__(self, *args: object, transient: bool = False) -> None:
        super().__init__(*args)
        self.transient = transient


class FailedAlike(InfraError):
    """Both trainings failed the same way in the code under test, precision_debugger off and on: no verdict on the
    tool from this target alone (the inputs, the runner or verl's trainer itself). Against a base that trained on the
    same runner it is a verdict on head (``harness.pipeline.base_head``). ``crash``: the on run's (``Crash``)."""

    def __init__(self, *args: object, crash: dict[str, Any]) -> None:
        super().__init__(*args)
        self.crash = crash


class HarnessBug(HarnessError):
    """A training that failed in the harness's own code (its workload, its CPU patches): a harness bug, or verl
    changed under it (API drift). Not a verdict on verl."""

    label = "HARNESS ERROR"
    note = " (not a verdict on verl)"


class EnvironmentProblem(HarnessError):
    """The target's environment lacks what its code imports (targets install ``--no-deps``): fix the image or the
    project venv. Not a verdict on verl."""

    label = "ENVIRONMENT ERROR"
    note = " (not a verdict on verl)"


class MetricsError(HarnessError):
    """A run's metrics cannot be read: the input of a check is missing or malformed."""

    label = "METRICS ERROR"


class BaselineError(HarnessError):
    """A baseline or results directory that cannot be read, merged or compared."""

    label = "BASELINE ERROR"


def one_line(exc: HarnessError) -> str:
    """How every entry point shows a HarnessError."""
    return f"{exc.label}{exc.note}: {exc}"


def unexpected(exc: Exception) -> str:
    """How every entry point shows an exception nobody raised on purpose: a bug of the harness (or of a library
    under it), never a verdict on verl, so exit 2 and not the interpreter's 1 (which reads as a regression). The
    innermost frame is named, so the line alone locates the bug."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {frame.filename}:{frame.lineno} ({frame.name})" if frame else ""
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{HarnessBug.label}{HarnessBug.note}: {type(exc).__name__}: {text}{where}"
