"""A scenario's two trainings (precision_debugger off, then on), run once per session.

The runs are guarded by a file lock and recorded in ``runs.json`` with the session id, so every check
item of a scenario (in any pytest-xdist worker) reuses them instead of training again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock

from harness.errors import InfraError
from harness.executors.base import Executor
from harness.launch import ExecResult
from harness.registry import EXECUTORS, WORKLOADS
from harness.rundir import MODES, Mode, ScenarioDir
from harness.scenario import Scenario
from harness.slots import heavy_slot
from harness.workloads import fault_injection

LABEL_PREFIX = "io.harness"


@dataclass
class RunRecord:
    mode: Mode
    executor: str
    argv: list[str]
    result: ExecResult
    error: str | None = None


@dataclass
class ScenarioRuns:
    dir: ScenarioDir
    session: str
    records: dict[Mode, RunRecord]
    trained_s: float  # wall time of the trainings this call ran (0 when reused)

    @property
    def error(self) -> str | None:
        errors = [f"{r.mode} run: {r.error}" for r in self.records.values() if r.error]
        return "\n".join(errors) or None


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(the log is empty)"
    except OSError:
        return "(no log)"


def _verdict(res: ExecResult, settings_timeout: float, log: Path) -> str | None:
    if res.timed_out:
        return f"timed out after {settings_timeout:.0f}s (executor.timeout_s); killed. Log tail ({log}):\n{_tail(log)}"
    if res.oom_killed:
        return f"killed for memory (OOM) with exit code {res.exit_code}: raise executor.docker.memory. Log: {log}"
    if res.exit_code != 0:
        return f"training exited with code {res.exit_code}. Log tail ({log}):\n{_tail(log)}"
    return None


def fingerprint(scenario: Scenario) -> str:
    """What the trainings depend on: everything but the checks' expectations and budgets (plus test knobs)."""
    data = scenario.model_dump(mode="json", exclude={"expect", "budgets", "description"})
    data["test_knobs"] = fault_injection.passthrough()
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _load(sdir: ScenarioDir, session: str, scenario: Scenario, reuse: bool) -> ScenarioRuns | None:
    try:
        raw = json.loads(sdir.runs_record.read_text())
    except (OSError, ValueError):
        return None
    same_session = raw.get("session") == session
    if not same_session and not (reuse and raw.get("fingerprint") == fingerprint(scenario) and not _failed(raw)):
        return None
    records = {m: RunRecord(**{**r, "result": ExecResult(**r["result"])}) for m, r in raw["records"].items()}
    return ScenarioRuns(sdir, raw["session"], records, trained_s=0.0)


def _failed(raw: dict) -> bool:
    return len(raw.get("records", {})) < len(MODES) or any(r.get("error") for r in raw["records"].values())


def ensure_runs(
    scenario: Scenario, results: Path, session: str, executor: str | None = None, reuse: bool = False
) -> ScenarioRuns:
    """Run (or reuse this session's) off and on trainings; raise InfraError if either failed.

    ``reuse`` also accepts successful runs of an earlier session made from the same scenario settings
    (re-checking without retraining)."""
    sdir = ScenarioDir(Path(results) / scenario.name)
    sdir.root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(sdir.lock)):
        runs = _load(sdir, session, scenario, reuse)
        if runs is None:
            runs = _run_both(scenario, sdir, session, executor or scenario.executor.kind)
    if runs.error:
        raise InfraError(f"scenario {scenario.name}: {runs.error}")
    return runs


def _run_both(scenario: Scenario, sdir: ScenarioDir, session: str, executor_kind: str) -> ScenarioRuns:
    shutil.rmtree(sdir.root, ignore_errors=True)
    sdir.root.mkdir(parents=True)
    workload = WORKLOADS[scenario.workload.kind]
    # both runs under one slot: the off/on pair sees the same load, and waiting is not training time
    with heavy_slot() if workload.takes_slot(scenario) else contextlib.nullcontext():
        return _train(scenario, sdir, session, EXECUTORS[executor_kind])


def _train(scenario: Scenario, sdir: ScenarioDir, session: str, executor: Executor) -> ScenarioRuns:
    workload = WORKLOADS[scenario.workload.kind]
    records: dict[Mode, RunRecord] = {}
    started = time.monotonic()
    for mode in MODES:
        run = sdir.run(mode)
        launch = workload.prepare(scenario, run, enabled=mode == "on")
        labels = {
            f"{LABEL_PREFIX}.session": session,
            f"{LABEL_PREFIX}.scenario": scenario.name,
            f"{LABEL_PREFIX}.run": mode,
        }
        try:
            res = executor.execute(launch, run, scenario.executor, labels)
            error = _verdict(res, scenario.executor.timeout_s, run.log)
        except InfraError as exc:
            res, error = ExecResult(exit_code=None, wall_s=0.0, detail=str(exc)), str(exc)
        records[mode] = RunRecord(mode, executor.name, res.argv or launch.argv("python"), res, error)
        run.record.write_text(json.dumps(asdict(records[mode]), indent=2))
        if error:
            break  # the on run is pointless without a baseline
    runs = ScenarioRuns(sdir, session, records, trained_s=time.monotonic() - started)
    sdir.runs_record.write_text(
        json.dumps(
            {
                "session": session,
                "fingerprint": fingerprint(scenario),
                "records": {m: asdict(r) for m, r in records.items()},
            },
            indent=2,
        )
    )
    return runs
