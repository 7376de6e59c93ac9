"""results.json: every measured figure and verdict of one scenario, merged as checks finish."""

from __future__ import annotations

import functools
import platform
from pathlib import Path
from typing import Annotated, Any, Literal

from filelock import FileLock
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from harness import config
from harness.artifacts.figures import check_figures
from harness.checks.base import CheckResult
from harness.errors import BaselineError, TargetError
from harness.safeio import MB, InputError, Versioned, write_atomic
from harness.scenario.loader import NAME_RE
from harness.scenario.model import Scenario
from harness.targets.spec import git
from harness.training.registry import EXECUTORS
from harness.training.runs import ScenarioRuns

MAX_RESULTS_BYTES = 64 * MB


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo). Step times, and so the overhead ratios, move with it: GitHub's
    hosted runners of one label come with several, so a nightly baseline's overhead is gated only on the same one
    (``harness.gate.baseline.OVERHEAD_ENV``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


@functools.cache
def harness_commit() -> str | None:
    """The harness's own commit where it runs from a git checkout (a nightly's), else None. A harness change can move
    an overhead figure with verl unchanged: the history keeps it with each night and never blames verl for it."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        return str(git("rev-parse", "HEAD", cwd=root))
    except TargetError:
        return None


def environment(scenario: Scenario, target: dict[str, Any]) -> dict[str, Any]:
    """Where the figures were measured, and with what: the harness's commit and the scenario file's sha256 (what the
    history calls an environment change). ``target``: ``ScenarioRuns.target`` (versions as installed in the target's
    environment, its identity and series, as the runs recorded them)."""
    env: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(), "cpu_model": cpu_model()}
    env["runner"] = config.RUNNER_NAME.get() or platform.node() or "?"  # the machine that trained, by name
    env |= {"harness": harness_commit(), "scenario_sha256": scenario.digest}
    env.update(target.get("environment") or {})
    packages_dir = env.pop("packages_dir", None)
    env["device"] = scenario.device
    env["executor"] = kind = scenario.executor.kind
    return env | EXECUTORS[kind].environment(scenario.executor, packages_dir)


def settings_of(scenario: Scenario) -> dict[str, Any]:
    """The settings block of results.json: what makes two runs of a scenario comparable (the gate's check)."""
    return {
        "engine": scenario.engine,
        "world_size": scenario.world_size,
        "steps": scenario.steps,
        "workload": scenario.workload.kind,
        "precision_debugger": scenario.precision_debugger.model_dump(by_alias=True),
    }


def _check_doc(result: CheckResult) -> CheckDoc:
    return CheckDoc(
        passed=result.passed,
        summary=result.summary,
        problems=result.problems,
        inconclusive=result.inconclusive,
        notes=result.notes,
        figures=result.figures,
        not_checked=result.not_checked,
        xfail_reason=result.xfail_reason,
    )


def record_check(scenario: Scenario, runs: ScenarioRuns, result: CheckResult) -> None:
    """Add one check's verdict to results.json (a new one for a new session: the runs and where they ran)."""
    path = runs.dir.results
    with FileLock(str(runs.dir.lock) + ".results"):
        try:
            doc: ResultsDoc | None = ResultsDoc.read_file(path, MAX_RESULTS_BYTES, follow=False)
        except InputError:
            doc = None  # none yet, or a broken one: this session's replaces it
        if doc is None or doc.session != runs.session:
            doc = ResultsDoc(
                scenario=scenario.name,
                session=runs.session,
                settings=settings_of(scenario),
                target=runs.target.get("block"),
                environment=environment(scenario, runs.target),
                runs={
                    m: RunDoc(**{"argv": r.argv, "executor": r.executor, **r.result.to_dict()})
                    for m, r in runs.records.items()
                },
            )
        doc.checks[result.check] = _check_doc(result)
        write_atomic(path, doc.model_dump_json(indent=2))


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


class ResultsDoc(Versioned):
    """results.json: what the gate, the baselines and the reports read. Schema 1 (no ``schema_version``) had the
    same fields, every one optional but the scenario and each check's verdict."""

    model_config = ConfigDict(extra="forbid", strict=True)
    FILE = "results.json"
    REDO = "re-run the scenario with this harness (or --reuse its trainings), or read it with the harness that wrote it"
    schema_version: Literal[2] = 2
    scenario: Annotated[str, Field(pattern=NAME_RE.pattern)]
    session: str = ""
    settings: dict[str, Any] = {}
    target: dict[str, Any] | None = None
    environment: dict[str, Any] = {}
    runs: dict[str, RunDoc] = {}
    checks: dict[str, CheckDoc] = {}


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
