"""One session of the harness: the runs of a scenario and every check on them, for every front end (``harness run``,
``pytest scenarios/``, base against head, bisect), decided and recorded the same way.

A front end makes one ``Session`` and asks it, per scenario: ``skip`` (the one rule: device, heavy, cluster),
``runs`` (the scenario's results-dir lock taken, its trainings made or reused), ``judge`` (every check and known gap
once, and the regression against a baseline where the session has one: results.json written once), or
``evaluate`` for both, the lock released at the end. What a front end shows, and
its exit code (``harness.outcomes``), are its own.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from harness import config
from harness.artifacts.results import CheckDoc, ResultsDoc, RunDoc
from harness.artifacts.rundir import ScenarioDir
from harness.checks import CHECKS, CheckContext, CheckResult, run_check
from harness.checks.crash import not_checked
from harness.checks.known_gap import check_gap, gap_name
from harness.gate.against_baseline import gate_scenario
from harness.gate.baseline import Baseline
from harness.gate.observe import observe_doc
from harness.pipeline.provenance import environment, settings_of
from harness.report import verdicts
from harness.report.verdicts import REGRESSION
from harness.scenario.model import Scenario
from harness.targets.environment import TargetEnv, ensure_env
from harness.targets.spec import Target
from harness.training.devices import cluster_missing, skip_reason
from harness.training.monitor import Watch
from harness.training.runs import ScenarioRuns, ensure_runs, scenario_lock


@dataclass
class Session:
    """What one invocation of the harness shares across its scenarios. ``id``: the session the runs record (a
    ``--reuse`` re-check trains nothing of its own session again); ``results``: where each scenario's directory goes
    unless a call names another (base against head: one per side and run); ``executor``: ``--executor`` (None: each
    scenario's own); ``watch``: the runner's dump cap, free-space floor and live line (None: from the environment);
    ``gate_timing``: whether an overhead over its maximum fails (``CheckContext``); ``reuse``: ``--reuse``;
    ``heavy``: whether scenarios marked heavy run; ``baseline``: what ``judge`` gates each scenario against, as a
    ``regression`` verdict beside the checks' (pytest's ``--harness-baseline``; None: no such verdict)."""

    results: Path
    executor: str | None = None
    watch: Watch | None = None
    gate_timing: bool = True
    reuse: bool = False
    heavy: bool = False
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    baseline: Baseline | None = None
    _envs: dict[Target, TargetEnv] = field(default_factory=dict, init=False, repr=False)
    _held: FileLock | None = field(default=None, init=False, repr=False)
    _runs: dict[Path, ScenarioRuns] = field(default_factory=dict, init=False, repr=False)
    _judged: dict[Path, list[CheckResult]] = field(default_factory=dict, init=False, repr=False)

    def env(self, target: Target) -> TargetEnv:
        """The target's environment, made (or found) once per session on first use: a SPEC that cannot be installed
        fails what needs it, one line, and nothing before."""
        if target not in self._envs:
            self._envs[target] = ensure_env(target)
        return self._envs[target]

    def skip(self, scenario: Scenario, path: str | None = None) -> str | None:
        """Why this session does not run ``scenario``, in one line saying how to run it; None where it runs. The same
        for every front end (run, compare, duet, bisect, pytest's items): a device this machine lacks, heavy
        (heavy: true) without ``--heavy`` (pytest's ``--harness-heavy``) or ``HARNESS_HEAVY=1``, a Ray cluster none
        named. ``path``: the scenario file as the user named it (default ``scenarios/<name>.yaml``)."""
        if reason := skip_reason(scenario, path):
            return reason
        if scenario.heavy and not self.heavy:
            name = scenario.name
            return (
                f"{name} is heavy (heavy: true, minutes of training): run it with --heavy (`python -m harness run "
                f"--heavy`, as compare, duet and bisect; `pytest scenarios/ -k {name} --harness-heavy`) or "
                f"{config.HEAVY.name}=1"
            )
        return cluster_missing(scenario)

    def hold(self, sdir: ScenarioDir) -> None:
        """Hold the scenario's results-dir lock until ``release`` or the next scenario's ``hold``: no other harness
        run trains or writes its results.json between this session's runs and its results."""
        if self._held is not None and self._held.lock_file == str(sdir.lock):
            return
        self.release()
        lock = scenario_lock(sdir)
        lock.acquire()
        self._held = lock

    def release(self) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None

    def runs(self, scenario: Scenario, env: TargetEnv, results: Path | None = None) -> ScenarioRuns:
        """The scenario's off and on trainings in ``env`` under ``results`` (default the session's), made once per
        session (or reused, ``reuse``), its lock held from here (``hold``); a HarnessError where they could not be
        made or did not finish."""
        sdir = ScenarioDir((results or self.results) / scenario.name)
        self.hold(sdir)
        if sdir.root in self._runs:
            return dataclasses.replace(self._runs[sdir.root], trained_s=0.0)  # nothing trained by this call
        self._runs[sdir.root] = ensure_runs(
            scenario, sdir.root.parent, self.id, self.executor, reuse=self.reuse, env=env, watch=self.watch
        )
        return self._runs[sdir.root]

    def judge(self, scenario: Scenario, runs: ScenarioRuns) -> list[CheckResult]:
        """Every check, then every known gap, then (with a ``baseline``) the regression against it, on ``runs``,
        once per session, in report order; results.json written once with all of them. A check that raises (a
        HarnessError) records nothing: the front end shows it."""
        if runs.dir.root not in self._judged:
            ctx = CheckContext(scenario, runs.dir, self.gate_timing)
            found = [run_check(name, check, ctx) for name, check in CHECKS.items()]
            found += [not_checked(ctx, gap_name(gap)) or check_gap(ctx, gap) for gap in scenario.expect.known_gaps]
            if self.baseline is not None:
                found.append(not_checked(ctx, REGRESSION) or regression(scenario, runs, found, self.baseline))
            results_doc(scenario, runs, found).write(runs.dir.results)
            self._judged[runs.dir.root] = found
        return self._judged[runs.dir.root]

    def evaluate(
        self, scenario: Scenario, env: TargetEnv, results: Path | None = None
    ) -> tuple[ScenarioRuns, list[CheckResult]]:
        """``runs`` and ``judge`` under one hold of the scenario's lock, released at the end."""
        try:
            runs = self.runs(scenario, env, results)
            return runs, self.judge(scenario, runs)
        finally:
            self.release()


def regression(scenario: Scenario, runs: ScenarioRuns, found: list[CheckResult], baseline: Baseline) -> CheckResult:
    """The checks' figures (``found``, as results.json will hold them) and the dumps' structure against ``baseline``
    (``harness.gate``): the absolute budgets stay with the checks."""
    observed = observe_doc(results_doc(scenario, runs, found), runs.dir.root)
    return verdicts.check_result(gate_scenario(scenario.name, baseline, observed))


def results_doc(scenario: Scenario, runs: ScenarioRuns, found: Iterable[CheckResult]) -> ResultsDoc:
    """results.json of ``runs`` judged: the runs and where they ran, and each verdict by its check's name."""
    return ResultsDoc(
        scenario=scenario.name,
        session=runs.session,
        settings=settings_of(scenario),
        target=runs.target.get("block"),
        environment=environment(scenario, runs.target),
        runs={
            m: RunDoc(**{"argv": r.argv, "executor": r.executor, **r.result.to_dict()}) for m, r in runs.records.items()
        },
        checks={r.check: check_doc(r) for r in found},
    )


def check_doc(result: CheckResult) -> CheckDoc:
    """One check's verdict as results.json holds it."""
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
