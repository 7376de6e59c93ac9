"""results.json: every measured figure and verdict of one scenario, as the gate, the baselines, the history and the
reports read it. The session that ran the scenario writes it once, every check's verdict in it
(``harness.pipeline.session``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from harness.artifacts.figures import check_figures
from harness.errors import BaselineError
from harness.safeio import MB, InputError, Versioned
from harness.scenario.loader import NAME_RE

MAX_RESULTS_BYTES = 64 * MB


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RunDoc(_Doc):
    """One training as the executor ran it (``artifacts.record.ExecResult`` and the run's argv and executor)."""

    argv: list[str] = []
    executor: str = ""
    exit_code: int | None = None
    wall_s: float = 0.0
    timed_out: bool = False
    oom_killed: bool = False
    stopped: bool = False
    detail: str = ""


class CheckDoc(_Doc):
    passed: bool
    summary: str = ""
    not_checked: str = ""  # nothing to check: a training crashed (the crash check's verdict)
    xfail_reason: str = ""
    figures: Annotated[dict[str, float | int | str], AfterValidator(check_figures)] = {}
    problems: list[str] = []
    inconclusive: list[str] = []
    notes: list[str] = []


# Where a job's minutes go, phase by phase (#85): what a maintainer waits for, named. ``set-up``: the harness's own
# (its start, the runs' directories and launches, outside any training); ``environment``: a target's (made or
# found); ``start-up``: a training's wall outside its steps (Ray, the models, teardown); ``steps``: its steps' own
# seconds (timing_s/step); ``judge``: the checks and verdicts; ``numerics``: the statistics compare; ``reports``.
PhaseName = Literal["set-up", "environment", "start-up", "steps", "judge", "numerics", "reports"]
PHASES: tuple[PhaseName, ...] = ("set-up", "environment", "start-up", "steps", "judge", "numerics", "reports")


class PhaseDoc(_Doc):
    """One phase's wall seconds, ``of`` what: a training (``off``, ``on``; in a job's table with its scenario and
    run), a side's environment (``base``, ``head``), a scenario; "" for the whole."""

    phase: PhaseName
    of: str = ""
    seconds: float


class ResultsDoc(Versioned):
    """results.json. Schema 4 adds ``phases`` (where the scenario's minutes went: its trainings' set-up, start-up
    and steps, and its judge); schema 3 (read with none) is written once per scenario with every check's verdict;
    schema 2 was merged as each check finished (a pytest run of some items held only theirs), and schema 1 (no
    ``schema_version``) had the same fields as 2, every one optional but the scenario and each check's verdict: all
    read as they are."""

    model_config = ConfigDict(extra="forbid", strict=True)
    FILE = "results.json"
    REDO = "re-run the scenario with this harness (or --reuse its trainings), or read it with the harness that wrote it"
    schema_version: Literal[4] = 4
    scenario: Annotated[str, Field(pattern=NAME_RE.pattern)]
    session: str = ""
    settings: dict[str, Any] = {}
    target: dict[str, Any] | None = None
    environment: dict[str, Any] = {}
    runs: dict[str, RunDoc] = {}
    checks: dict[str, CheckDoc] = {}
    phases: list[PhaseDoc] = []

    @classmethod
    def of(cls, doc: object) -> Self:
        """Schemas 1 and 2 had schema 3's fields: each read as schema 3, which reads as this one."""
        if isinstance(doc, dict):
            version = doc.get("schema_version", 1)
            if type(version) is not int or not 1 <= version <= cls.schema_number():  # not True, not 2.0
                raise InputError(
                    f"{cls.FILE} written by schema {version!r}, this harness reads schemas 1 to "
                    f"{cls.schema_number()}: {cls.REDO}"
                )
            doc = {**doc, "schema_version": max(version, cls.schema_number() - 1)}
        return super().of(doc)


def read_results(path: Path) -> ResultsDoc:
    """``<results>/<scenario>/results.json``, checked; BaselineError in one line (file, field, what) otherwise. The
    scenario it names must be its directory's: a name from a file never becomes a path of its own."""
    try:
        doc = ResultsDoc.read_file(path, MAX_RESULTS_BYTES, follow=False)
    except InputError as exc:
        raise BaselineError(f"{path}: {exc}") from None
    if doc.scenario != path.parent.name:
        raise BaselineError(f"{path}: scenario: {doc.scenario!r} is not its directory's name {path.parent.name!r}")
    return doc
