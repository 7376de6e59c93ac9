"""A scenario's two trainings (precision_debugger off, then on), run once per session; or the on training alone
where what judges them reads nothing of an off run (``modes``: base against head on a tier whose overhead it does
not compare), the off run then trained only to tell whose crash an on run's is.

The runs are guarded by a file lock and recorded in ``trainings.json`` with the id of the session that made them,
so every check item of a scenario (in any pytest-xdist worker) reuses them instead of training again. Each training runs
under a ``Monitor``: a run it stops at the dump cap is recorded with its verdict line (the disk check's
failure), one it stops at the free-space floor is an infrastructure error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Self

from filelock import FileLock, Timeout

from harness import config
from harness.artifacts.crash import VERDICT_PARTIES, Crash, classify, transient
from harness.artifacts.record import ExecResult, RunRecord
from harness.artifacts.rundir import MODES, Mode, ScenarioDir
from harness.errors import EnvironmentProblem, FailedAlike, HarnessBug, HarnessError, InfraError, WorkloadError
from harness.outside import shown
from harness.safeio import MB, InputError, Versioned, cannot_write, output_path, tail_bytes
from harness.scenario.model import Scenario
from harness.targets.environment import TargetEnv, check_api, ensure_env, of_target
from harness.targets.spec import Target, parse_target
from harness.training import dumpfs
from harness.training.deadline import training_limit
from harness.training.executors.base import LABEL_PREFIX, Executor, owner_labels
from harness.training.monitor import Monitor, WatchSettings, dump_cap
from harness.training.registry import EXECUTORS, WORKLOADS
from harness.training.slots import heavy_slot
from harness.training.workloads import fault_injection
from harness.training.workloads.verl_cpu.lag import lagging

__all__ = [
    "LABEL_PREFIX", "ScenarioRuns", "TrainingsRecord", "ensure_runs", "fingerprint", "results_dir", "scenario_lock",
]  # fmt: skip


class TrainingsRecord(Versioned):
    """trainings.json: a scenario's off and on trainings (each one's ``RunRecord``), the id of the session that made
    them, what they depend on (``fingerprint``) and which were asked (``modes``), so every check item of the scenario,
    in any worker, reuses them. Its earlier names (session.json, runs.json before it) are read as it; schemas 1 (no
    ``schema_version``) and 2 had the same fields less ``modes``: both trainings were asked."""

    FILE = "trainings.json"
    REDO = "the runs are made again"
    schema_version: Literal[3] = 3
    session: str  # the id of the session that made them
    fingerprint: str
    target: dict[str, Any] = {}
    records: dict[Mode, RunRecord]
    modes: tuple[Mode, ...] = MODES  # the trainings asked; ("on",): no off run unless to tell an on run's crash

    @classmethod
    def of(cls, doc: object) -> Self:
        """Schema 1 (no ``schema_version``) had schema 2's fields: read as schema 2, which reads as this one."""
        if isinstance(doc, dict) and "schema_version" not in doc:
            doc = {**doc, "schema_version": 2}
        return super().of(doc)


@dataclass
class ScenarioRuns:
    """A scenario's off and on trainings as a session has them: their records, the id of the session that made them
    (``session_id``: this one's, or an earlier one's where reused)."""

    dir: ScenarioDir
    session_id: str
    records: dict[Mode, RunRecord]
    trained_s: float  # wall time of the trainings this call ran (0 when reused)
    # the target as results.json records it: {"block": Target.block(), "environment": versions, identity, series}
    target: dict[str, Any] = field(default_factory=dict)
    modes: tuple[Mode, ...] = MODES  # the trainings asked (``ensure_runs``'s ``modes``)

    @property
    def error(self) -> HarnessError | None:
        """The failure that is no verdict on verl (a crash of verl or msprobe is the crash check's), as the error
        of the party at fault: the harness, the environment or the runner."""
        failed = [r for r in self.records.values() if r.error]
        if not failed:
            return None
        party = (failed[0].crash or {}).get("party")
        text = f"scenario {self.dir.root.name}: " + "\n".join(f"{r.mode} run: {r.error}" for r in failed)
        if party in ("harness", "environment"):
            return (HarnessBug if party == "harness" else EnvironmentProblem)(text)
        if (alike := (failed[-1].crash or {})).get("alike") in VERDICT_PARTIES:
            return FailedAlike(text, crash=alike)
        return InfraError(text, transient=all(transient(str((r.crash or {}).get("reason", ""))) for r in failed))


def target_labels(target: Target) -> dict[str, str]:
    """Container labels naming the target; a self-contained image must carry the same verl label."""
    return {f"{LABEL_PREFIX}.target.verl": target.verl.identity, f"{LABEL_PREFIX}.target.series": target.series}


def _tail(path: Path, lines: int = 15) -> str:
    """The log's last lines for an error, each shown as one line (the training's output is the code under test's:
    a line ``::error::...`` in it would be a workflow command of its own), read from the log's end, never through
    a link."""
    if not path.is_file() or path.is_symlink():
        return "(no log)"
    return "\n".join(shown(ln) for ln in tail_bytes(path, 64 * 1024).splitlines()[-lines:]) or "(the log is empty)"


def _verdict(res: ExecResult, limit: tuple[float, str], log: Path, env: TargetEnv) -> tuple[str | None, Crash | None]:
    """The run's error line (None when it finished, or when verl or msprobe crashed it: the crash check's verdict)
    and the crash (whose code failed), from its exit and its log; ``limit``: its timeout and what set it."""
    crash = classify(res, log, limit[0], env.facts.get("verl_requires"), limit[1])
    if crash and crash.party == "verl" and (why := lagging(crash.exception, env.facts.get("packages_dir"))):
        crash = replace(crash, party="harness", reason=f"{why}; raised at {crash.where}")
    if crash is None or crash.verdict:
        return None, crash
    if res.oom_killed:
        return f"{crash.reason}: raise executor.docker.memory. Log: {log}", crash
    return f"{crash.reason}. Log tail ({log}):\n{_tail(log)}", crash


def _both_failed(crash: Crash, log: Path) -> tuple[str, Crash]:
    """Both runs crashed the same way: the trainer fails with precision_debugger off as well as on, which no verdict
    on the integration can come from (the inputs, the runner, or verl's trainer itself: verl's own CI's to judge)."""
    reason = f"both runs failed the same way, precision_debugger off and on: {crash.reason}; no verdict on the tool"
    alike = replace(crash, party="infrastructure", reason=reason, alike=crash.party)
    return f"{reason}. Log tail ({log}):\n{_tail(log)}", alike


def fingerprint(scenario: Scenario, target: Target) -> str:
    """What the trainings depend on: everything but the checks' expectations and budgets (plus test knobs), and
    the verl and msprobe under test."""
    data = scenario.model_dump(mode="json", exclude={"expect", "budgets", "description"})
    data["test_knobs"] = fault_injection.passthrough()
    data["target"] = {"verl": target.verl.key(), "msprobe": target.msprobe.key()}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _load(
    sdir: ScenarioDir, session_id: str, scenario: Scenario, env: TargetEnv, reuse: bool, modes: tuple[Mode, ...]
) -> ScenarioRuns | None:
    """This session's runs (or, with ``reuse``, an earlier session's good ones); None when there are none to reuse,
    including a trainings.json that is not one (corrupt, a link, not a file), or of other trainings than ``modes``
    (an on run alone is no off/on pair): those runs are made again."""
    try:
        doc = TrainingsRecord.read_file(sdir.trainings_record_read, 16 * MB, follow=False)
    except InputError:
        return None
    if doc.fingerprint != fingerprint(scenario, env.target) or doc.modes != modes:
        return None  # another target (or other settings, or other trainings) in the same session: train again
    if doc.session != session_id and not (reuse and not _failed(doc)):
        return None
    recorded = doc.target or {"block": env.target.block(), "environment": of_target(env)}
    return ScenarioRuns(sdir, doc.session, dict(doc.records), trained_s=0.0, target=recorded, modes=doc.modes)


def _failed(doc: TrainingsRecord) -> bool:
    records = doc.records.values()
    return any(m not in doc.records for m in doc.modes) or any(r.error or r.stopped or r.crash for r in records)


def check_target(scenario: Scenario, env: TargetEnv) -> None:
    """The target's environment holds what the scenario's workload drives (API drift: InfraError)."""
    workload = WORKLOADS[scenario.workload.kind]
    check_api(env, workload.symbols, list(scenario.precision_debugger.stages), scenario.workload.kind)


def results_dir(path: str | Path, option: str = "--results") -> Path:
    """A results dir as given on the command line (``option``), absolute and made; bad input (a file, or a file on
    the way to it) is one line naming the option, said before any run (``safeio.output_path``)."""
    return output_path(path, option, directory=True)


class ScenarioLock(FileLock):
    """A results dir's lock that says what it waits for: taken at once when free (or already held here), else one
    line naming the lock and the bound, then a wait of at most HARNESS_LOCK_WAIT_S (default an hour: another run's
    trainings), then an error naming the lock (a run of another process that never ends no longer hangs this one)."""

    def acquire(self, timeout: float | None = None, poll_interval: float | None = None, **kw: Any) -> Any:
        try:
            return self._wait(timeout, poll_interval, **kw)
        except Timeout:  # an OSError too: a wait the caller asked for, as filelock says it
            raise
        except OSError as exc:  # a lock file that cannot be written (a read-only mount): the results dir's, not ours
            raise cannot_write(Path(self.lock_file), exc, named=f"{self.lock_file} (the results dir's lock)") from None

    def _wait(self, timeout: float | None, poll_interval: float | None, **kw: Any) -> Any:
        if timeout is not None or kw.get("blocking") is False:  # an explicit wait: as asked
            return super().acquire(timeout, poll_interval, **kw)
        try:
            return super().acquire(timeout=0)
        except Timeout:
            bound = config.LOCK_WAIT_S.get()
            print(f"waiting for {self.lock_file}: another harness run holds this scenario's results dir (at most "
                  f"{bound:g} s, HARNESS_LOCK_WAIT_S)", file=sys.stderr, flush=True)  # fmt: skip
            try:
                return super().acquire(timeout=bound)
            except Timeout:
                raise InfraError(
                    f"{self.lock_file}: held by another harness run for {bound:g} s (HARNESS_LOCK_WAIT_S): let it "
                    "finish, or use another --results dir"
                ) from None


def scenario_lock(sdir: ScenarioDir) -> FileLock:
    """The lock of one scenario's results dir, to hold from its trainings to its last results.json write (a
    ``--reuse`` re-check too): one instance per path in a process, so taking it again while held is free.
    Makes the results dir and refuses one that is not a plain directory (a link would move every write)."""
    for p in (sdir.root.parent, sdir.root):
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            raise InfraError(f"results dir {p} is a link or not a directory: results are written in place only")
    try:
        sdir.root.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(sdir.root.parent, exc, named=f"results dir {sdir.root.parent}") from None
    return ScenarioLock(str(sdir.lock), is_singleton=True)


def ensure_runs(
    scenario: Scenario,
    results: Path,
    session_id: str,
    executor: str | None = None,
    reuse: bool = False,
    env: TargetEnv | None = None,
    watch: WatchSettings | None = None,
    modes: tuple[Mode, ...] = MODES,
) -> ScenarioRuns:
    """Run (or reuse this session's) off and on trainings in ``env``, the target's environment as the entry point
    resolved it once (default: from HARNESS_VERL and HARNESS_MSPROBE, else the pinned releases); raise InfraError
    if either failed.

    ``reuse`` also accepts successful runs of an earlier session made from the same scenario settings and
    target (re-checking without retraining). ``watch``: the runner's cap, floor and live line (default: from
    the environment, no live line). ``modes``: the trainings asked, ``("on",)`` where whatever judges them reads
    nothing of an off run (the off run is then trained only after an on run crashed, to tell whether it fails off
    too: ``FailedAlike``)."""
    env = env or ensure_env(parse_target())
    sdir = ScenarioDir(Path(results) / scenario.name)
    kind = executor or scenario.executor.kind
    if kind != scenario.executor.kind:  # as it runs: the kind changes, the options blocks stay (the workload reads it)
        scenario = scenario.model_copy(update={"executor": scenario.executor.model_copy(update={"kind": kind})})
    with scenario_lock(sdir):
        runs = _load(sdir, session_id, scenario, env, reuse, modes)
        if runs is None:
            if kind == "docker" and env.stack.source != "harness":
                raise WorkloadError(
                    f"{scenario.name}: {env.stack.summary()}: the docker executor runs the harness's stack only (its "
                    "image mounts the harness's interpreter): run it with --executor local, or --stack harness"
                )
            check_target(scenario, env)
            runs = _run_both(scenario, sdir, session_id, kind, env, watch := watch or WatchSettings.configure(), modes)
            if isinstance(failed := runs.error, InfraError) and failed.transient:
                # the machine's, and it may pass the next time: one flake would cost a nightly or a whole comparison
                # (an A/A real_fsdp_l0 compare lost 1 of 6 runs to EADDRINUSE on verl's TCPStore port, 2 cores, 3 jobs)
                line = str(failed).splitlines()[0][:300]
                print(f"[harness] {line}: the machine failed it; trained once more", file=sys.stderr, flush=True)
                runs = _run_both(scenario, sdir, session_id, kind, env, watch, modes)
    if runs.error:
        raise runs.error
    return runs


def fresh(root: Path) -> None:
    """``root`` emptied for new runs and made; a dir that cannot be (read-only, another user's, a mount point) is
    one line naming it and the first path it could not remove: bad input of whoever gave the results dir."""
    failed: list[tuple[str, OSError]] = []

    def refused(_: object, path: str, info: tuple[type, BaseException, object]) -> None:
        if isinstance(info[1], OSError):
            failed.append((path, info[1]))

    if root.exists():
        shutil.rmtree(root, onerror=refused)
    try:
        root.mkdir(parents=True)
    except OSError as exc:
        where, first = failed[0] if failed else (str(root), exc)
        raise cannot_write(root, first, named=f"{root} (for new runs: {where})") from None


def _run_both(
    scenario: Scenario,
    sdir: ScenarioDir,
    session_id: str,
    executor_kind: str,
    env: TargetEnv,
    watch: WatchSettings,
    modes: tuple[Mode, ...],
) -> ScenarioRuns:
    dumpfs.release_stale(sdir.root)  # a killed harness's dumps tmpfs: rmtree cannot remove a mount point
    fresh(sdir.root)
    workload = WORKLOADS[scenario.workload.kind]
    # both runs under one slot: the off/on pair sees the same load, and waiting is not training time
    with heavy_slot() if workload.takes_slot(scenario) else contextlib.nullcontext():
        return _train(scenario, sdir, session_id, EXECUTORS[executor_kind], env, watch, modes)


def _train(
    scenario: Scenario,
    sdir: ScenarioDir,
    session_id: str,
    executor: Executor,
    env: TargetEnv,
    watch: WatchSettings,
    modes: tuple[Mode, ...],
) -> ScenarioRuns:
    workload = WORKLOADS[scenario.workload.kind]
    pd = scenario.precision_debugger
    cap = dump_cap(scenario.budgets.disk, len(pd.steps), len(pd.stages), scenario.world_size, watch.max_dump)
    records: dict[Mode, RunRecord] = {}
    block = env.target.block()
    started = time.monotonic()
    queue = list(modes)
    while queue:
        mode = queue.pop(0)
        run = sdir.run(mode)
        launch = workload.prepare(scenario, run, enabled=mode == "on", python=env.python)
        launch = replace(launch, verl=env.target.verl)
        if env.target.verl.kind != "pinned":  # a self-contained image must hold this very verl
            launch = replace(launch, target=env.target.verl.identity)
        labels = {
            f"{LABEL_PREFIX}.session": session_id,
            f"{LABEL_PREFIX}.scenario": scenario.name,
            f"{LABEL_PREFIX}.run": mode,
            **target_labels(env.target),
            **owner_labels(),
        }
        stopped = None
        try:
            limit = training_limit(scenario.executor.timeout_s)  # the job's cap and deadline too
            settings = scenario.executor.model_copy(update={"timeout_s": limit[0]})
            # the on run's dumps on a filesystem of the cap's size where this host allows it: the cap holds (not on a
            # Ray cluster's nodes: each writes on its own disk, and the job gathers into the run dir, which the head
            # mounted before any tmpfs here; the gathered dumps' size is the disk check's)
            held = cap.bytes if cap and mode == "on" and launch.node is None else None
            with dumpfs.bounded(run.dumps, held) as bounded:
                if bounded is not None:
                    print(f"[harness] {scenario.name} on: {bounded.line()}", file=sys.stderr, flush=True)
                with Monitor(run, scenario.name, executor.name, scenario.steps, cap, watch, bounded) as monitor:
                    res = executor.execute(launch, run, settings, labels, stop=monitor.stop)
            error, crash = _verdict(res, limit, run.log, env)
            # the kill's exit code says nothing, nor a failed write on the full tmpfs: the monitor's line does
            if monitor.stopped and (res.stopped or monitor.stopped.kind == "cap"):
                crash = None
                if monitor.stopped.kind == "cap":
                    stopped, error = monitor.stopped.line, None
                else:
                    error = monitor.stopped.line
        except InfraError as exc:
            res, error, crash = ExecResult(exit_code=None, wall_s=0.0, detail=str(exc)), str(exc), None
        argv = res.argv or launch.argv("python")
        other: Mode = "on" if mode == "off" else "off"
        first = (records[other].crash or {}) if other in records else {}
        if crash and crash.verdict and (first.get("exception"), first.get("where")) == (crash.exception, crash.where):
            error, crash = _both_failed(crash, run.log)
            records[other] = records[other].model_copy(update={"error": error, "crash": crash.to_dict()})
            records[other].write(sdir.run(other).record)
        found = crash.to_dict() if crash else None
        records[mode] = RunRecord(
            mode=mode, executor=executor.name, argv=argv, result=res, error=error, target=block, stopped=stopped,
            crash=found,
        )  # fmt: skip
        records[mode].write(run.record)
        if error or stopped or (crash and mode == "on" and "off" in records):
            break  # the on run is pointless without a baseline; a stopped on run is the last anyway
        # an off run that verl or msprobe crashed: the on run says whether precision_debugger is what fails; an on run
        # crashed with no off run asked (``modes``): the off run, trained now, says the same
        if crash and crash.verdict and mode == "on" and "off" not in modes:
            queue.append("off")
    recorded = {"block": block, "environment": of_target(env)}
    runs = ScenarioRuns(sdir, session_id, records, time.monotonic() - started, recorded, modes)
    made = fingerprint(scenario, env.target)
    TrainingsRecord(session=session_id, fingerprint=made, target=recorded, records=records, modes=modes).write(
        sdir.trainings_record
    )
    return runs
