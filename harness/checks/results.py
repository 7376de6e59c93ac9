"""results.json: every measured figure and verdict of one scenario, merged as checks finish."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Annotated, Any

from filelock import FileLock
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from harness.artifacts.figures import check_figures
from harness.checks.base import CheckResult
from harness.errors import BaselineError
from harness.safeio import MB, InputError, read_text, write_atomic
from harness.scenario.loader import NAME_RE
from harness.scenario.model import Scenario
from harness.scenario.registry import EXECUTORS
from harness.target.environment import ensure_env
from harness.target.environment import environment as target_environment
from harness.target.spec import pinned_target
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


def environment(scenario: Scenario, target: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where the figures were measured. ``target``: ``ScenarioRuns.target`` (versions as installed in the target's
    environment, its identity and series); without it, the pinned releases of the project venv."""
    env: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(), "cpu_model": cpu_model()}
    env.update((target or {}).get("environment") or target_environment(ensure_env(pinned_target())))
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


def record_check(scenario: Scenario, runs: ScenarioRuns, result: CheckResult) -> None:
    path = runs.dir.results
    with FileLock(str(runs.dir.lock) + ".results"):
        try:
            doc = json.loads(read_text(path, MAX_RESULTS_BYTES, follow=False))
        except (InputError, ValueError):
            doc = {}
        if not isinstance(doc, dict) or doc.get("session") != runs.session or not isinstance(doc.get("checks"), dict):
            doc = {
                "scenario": scenario.name,
                "session": runs.session,
                "settings": settings_of(scenario),
                "target": runs.target.get("block"),
                "environment": environment(scenario, runs.target),
                "runs": {
                    m: {"argv": r.argv, "executor": r.executor, **r.result.to_dict()} for m, r in runs.records.items()
                },
                "checks": {},
            }
        doc["checks"][result.check] = {
            "passed": result.passed,
            "summary": result.summary,
            "problems": result.problems,
            "inconclusive": result.inconclusive,
            "notes": result.notes,
            "figures": result.figures,
            **({"not_checked": result.not_checked} if result.not_checked else {}),
            **({"xfail_reason": result.xfail_reason} if result.xfail_reason else {}),
        }
        write_atomic(path, json.dumps(doc, indent=2, sort_keys=False))


class _Lenient(BaseModel):
    """Fields the readers use, checked; anything else a results.json holds (older or newer harnesses) kept."""

    model_config = ConfigDict(extra="allow", strict=True)


class RunDoc(_Lenient):
    exit_code: int | None = None
    timed_out: bool = False


class CheckDoc(_Lenient):
    passed: bool
    not_checked: str = ""  # nothing to check: a training crashed (the crash check's verdict)
    figures: Annotated[dict[str, float | int | str], AfterValidator(check_figures)] = {}
    problems: list[str] = []
    inconclusive: list[str] = []


class ResultsDoc(_Lenient):
    """What the gate, the baselines and the reports read from a results.json."""

    scenario: Annotated[str, Field(pattern=NAME_RE.pattern)]
    settings: dict[str, Any] = {}
    environment: dict[str, Any] = {}
    runs: dict[str, RunDoc] = {}
    checks: dict[str, CheckDoc] = {}


def read_results(path: Path) -> ResultsDoc:
    """``<results>/<scenario>/results.json``, checked; BaselineError in one line (file, field, what) otherwise. The
    scenario it names must be its directory's: a name from a file never becomes a path of its own."""
    try:
        doc = ResultsDoc.model_validate(json.loads(read_text(path, MAX_RESULTS_BYTES, follow=False)))
    except InputError as exc:
        raise BaselineError(f"cannot read {path}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            where = ".".join(map(str, err["loc"])) or "(top level)"
            more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            msg = err["msg"].removeprefix("Value error, ")
            raise BaselineError(f"{path}: {where}: {msg}{more}: not a harness results.json") from None
        why = str(exc)[:80]
        raise BaselineError(f"{path} is not valid JSON ({why}): a truncated or corrupt results file") from None
    if doc.scenario != path.parent.name:
        raise BaselineError(f"{path}: scenario: {doc.scenario!r} is not its directory's name {path.parent.name!r}")
    return doc
