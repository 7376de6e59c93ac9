"""One session of the harness: the runs of a scenario and every check on them, for every front end (``harness run``,
``pytest scenarios/``, base against head, duet, bisect), decided and recorded the same way.

A front end makes one ``Session`` and asks it, per scenario: ``skip`` (the one rule: device, heavy, cluster),
``runs`` (the scenario's results-dir lock taken, its trainings made or reused), ``judge`` (every check and known gap
once, and a verdict beside them where the session has one: results.json written once), or ``evaluate`` for both,
the lock released at the end; or ``compare`` for base against head (``harness.pipeline.base_head``): every run of
both sides made and judged here, the comparison judged from what was judged, in memory, and each dump read once.
What a front end shows, and its exit code (``harness.outcomes``), are its own: nothing here words a verdict.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from filelock import FileLock

from harness import config, outcomes
from harness.artifacts.dumpfacts import DumpReads
from harness.artifacts.dumpfile import DumpFile
from harness.artifacts.reader import Metrics
from harness.artifacts.results import CheckDoc, PhaseDoc, PhaseName, ResultsDoc, RunDoc
from harness.artifacts.rundir import MODES, Mode, ScenarioDir
from harness.checks import CHECKS, CheckContext, CheckResult, run_check
from harness.checks.crash import not_checked
from harness.checks.known_gap import check_gap, gap_name
from harness.errors import FailedAlike, HarnessError, MetricsError
from harness.gate.judge import ComparePolicy, Crowding, ScenarioVerdict, Side, judge
from harness.gate.observe import Observation, observe_doc
from harness.pipeline.base_head import (
    NUMERICS_RUNS,
    SIDES,
    Compared,
    add_numerics,
    cannot_train,
    families,
    overhead_note,
    run_dir,
    run_order,
)
from harness.pipeline.provenance import environment, settings_of
from harness.scenario.model import Scenario
from harness.targets.census import census_of
from harness.targets.census import diff as census_diff
from harness.targets.environment import TargetEnv, ensure_env
from harness.targets.spec import Target, reproduce_compare, reproducible
from harness.training.deadline import job_left
from harness.training.devices import cluster_missing, skip_reason
from harness.training.monitor import WatchSettings
from harness.training.runs import ScenarioRuns, ensure_runs, scenario_lock


class Beside(Protocol):
    """A verdict judged beside the checks, from what results.json will hold (pytest's ``--harness-baseline``: the
    regression against a baseline, ``harness.report.verdicts.AgainstBaseline``): its name, and what it says."""

    @property
    def name(self) -> str: ...

    def __call__(self, scenario: str, observed: Observation) -> CheckResult: ...


@dataclass
class Judged:
    """One scenario's runs judged: every verdict in report order, results.json as written, what the judge of two
    sides reads of it, and its dumps as read (held open where a later reader of their bytes is known)."""

    found: list[CheckResult]
    doc: ResultsDoc
    observed: Observation
    reads: DumpReads


@dataclass
class Session:
    """What one invocation of the harness shares across its scenarios. ``id``: the session the runs record (a
    ``--reuse`` re-check trains nothing of its own session again); ``results``: where each scenario's directory goes
    unless a call names another (base against head: one per side and run); ``executor``: ``--executor`` (None: each
    scenario's own); ``watch``: the runner's dump cap, free-space floor and live line (None: from the environment);
    ``gate_timing``: whether an overhead over its maximum fails (``CheckContext``); ``reuse``: ``--reuse``;
    ``heavy``: whether scenarios marked heavy run; ``beside``: a verdict ``judge`` adds beside the checks (pytest's
    ``--harness-baseline``; None: none); ``say``: where a comparison's progress goes (a line each)."""

    results: Path
    executor: str | None = None
    watch: WatchSettings | None = None
    gate_timing: bool = True
    reuse: bool = False
    heavy: bool = False
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    beside: Beside | None = None
    say: Callable[[str], None] = print
    _envs: dict[Target, TargetEnv] = field(default_factory=dict, init=False, repr=False)
    _held: FileLock | None = field(default=None, init=False, repr=False)
    _runs: dict[Path, ScenarioRuns] = field(default_factory=dict, init=False, repr=False)
    _judged: dict[Path, Judged] = field(default_factory=dict, init=False, repr=False)
    # where this session's minutes went, in order (``PhaseDoc``): each environment made or found, each training's
    # set-up, start-up and steps, each judge, each numerics; a front end adds its own (its set-up, its reports)
    phases: list[PhaseDoc] = field(default_factory=list, init=False, repr=False)
    _run_phases: dict[Path, tuple[str, list[PhaseDoc]]] = field(default_factory=dict, init=False, repr=False)

    def env(self, target: Target, of: str = "") -> TargetEnv:
        """The target's environment, made (or found) once per session on first use: a SPEC that cannot be installed
        fails what needs it, one line, and nothing before. ``of``: what it is to the job (``base``, ``head``), for
        its phase."""
        if target not in self._envs:
            started = time.monotonic()
            self._envs[target] = ensure_env(target)
            self.phases.append(_phase("environment", of or "target", started))
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
        return self._made(scenario, env, results or self.results, self.reuse)

    def _made(
        self,
        scenario: Scenario,
        env: TargetEnv,
        results: Path,
        reuse: bool,
        modes: tuple[Mode, ...] = MODES,
        label: str = "",
    ) -> ScenarioRuns:
        """``runs``; ``label``: the runs as a job's table of phases names them (default the scenario's name)."""
        sdir = ScenarioDir(results / scenario.name)
        self.hold(sdir)
        if sdir.root in self._runs:
            return dataclasses.replace(self._runs[sdir.root], trained_s=0.0)  # nothing trained by this call
        started = time.monotonic()
        self._runs[sdir.root] = runs = ensure_runs(
            scenario, sdir.root.parent, self.id, self.executor, reuse=reuse, env=env, watch=self.watch, modes=modes
        )
        own = run_phases(runs, time.monotonic() - started)
        label = label or scenario.name
        self._run_phases[sdir.root] = (label, own)
        if runs.trained_s:  # the job's minutes: a reused training cost this session nothing
            self.phases += [p.model_copy(update={"of": f"{label} {p.of}".strip()}) for p in own]
        return runs

    def judge(self, scenario: Scenario, runs: ScenarioRuns) -> list[CheckResult]:
        """Every check, then every known gap, then (with ``beside``) the verdict beside them, on ``runs``, once per
        session, in report order; results.json written once with all of them. A check that raises (a HarnessError)
        records nothing: the front end shows it."""
        return self._judge(scenario, runs, self.gate_timing, self.beside).found

    def _judge(
        self, scenario: Scenario, runs: ScenarioRuns, gate_timing: bool, beside: Beside | None, hold: bool = False
    ) -> Judged:
        """``judge``; ``hold``: the on run's dumps kept open for a later reader of their bytes (the numerics). The
        dumps are read once, by the checks and then for the facts no check read (``harness.artifacts.dumpfacts``),
        stored beside the run before results.json."""
        if runs.dir.root not in self._judged:
            ctx = CheckContext(scenario, runs.dir, gate_timing, hold, runs.modes)
            label, phases = self._run_phases.get(runs.dir.root, (scenario.name, []))
            try:
                judged = self._judged_now(scenario, runs, ctx, beside, phases)
                self._judged[runs.dir.root] = judged
                self.phases += [p.model_copy(update={"of": label}) for p in judged.doc.phases if p.phase == "judge"]
            except BaseException:  # a check that raised: nothing recorded, and no dump left open
                ctx.reads.close()
                raise
        return self._judged[runs.dir.root]

    @staticmethod
    def _judged_now(
        scenario: Scenario, runs: ScenarioRuns, ctx: CheckContext, beside: Beside | None, phases: list[PhaseDoc]
    ) -> Judged:
        """What judging ``runs`` makes: every verdict, the dumps' facts (stored before results.json, which a reader
        finds them beside) and results.json, written once each, and what the judge of two sides reads of them;
        ``phases``: where the runs' minutes went, the judge's own added (its writes of the facts and results.json
        after, milliseconds, aside)."""
        started = time.monotonic()
        found = [run_check(name, check, ctx) for name, check in CHECKS.items()]
        found += [not_checked(ctx, gap_name(gap)) or check_gap(ctx, gap) for gap in scenario.expect.known_gaps]
        on = runs.dir.run("on")
        facts = ctx.reads.facts(ctx.tree) if on.dumps.is_dir() else None
        if beside is not None:
            observed = observe_doc(results_doc(scenario, runs, found), runs.dir.root, facts)
            found.append(not_checked(ctx, beside.name) or beside(scenario.name, observed))
        doc = results_doc(scenario, runs, found, [*phases, _phase("judge", "", started)])
        if facts is not None:
            facts.write(on.dump_facts)
        doc.write(runs.dir.results)
        return Judged(found, doc, observe_doc(doc, runs.dir.root, facts), ctx.reads)

    def evaluate(
        self, scenario: Scenario, env: TargetEnv, results: Path | None = None
    ) -> tuple[ScenarioRuns, list[CheckResult]]:
        """``runs`` and ``judge`` under one hold of the scenario's lock, released at the end."""
        try:
            runs = self.runs(scenario, env, results)
            return runs, self.judge(scenario, runs)
        finally:
            self.release()

    def compare(
        self,
        scenarios: Sequence[Scenario],
        base: Target,
        head: Target,
        policy: ComparePolicy | None = None,
        results: Path | None = None,
    ) -> Compared:
        """Base against head, each scenario (every one this session runs: ``skip`` is the front end's to ask) run for
        both targets, interleaved, under ``results`` (default the session's): ``<results>/<base|head>/r<i>/``. Each
        run is made and judged as ``harness run`` judges it (its overhead maxima recorded, never gated or compared:
        ``judge.PER_RUN_MAXIMA``; never reused from another session, nor judged against a baseline); the comparison
        is of what was judged, in memory, decided under ``policy`` (its families, less overhead where a scenario's
        tier cannot decide it; its repeats and stopping rule). Head's annotated stages are compared with base's
        first, from their sources (``harness.targets.census``): a finding whether or not a training reaches them."""
        results, policy = results or self.results, policy or ComparePolicy()
        first = len(self.phases)
        envs = {"base": self.env(base, "base"), "head": self.env(head, "head")}  # before training: a bad SPEC fails now
        for side, env in envs.items():
            self.say(f"{side}: {env.label()}")
        census, census_notes = census_diff(census_of(base, envs["base"]), census_of(head, envs["head"]))
        for line in census:
            self.say(f"{outcomes.REGRESSED} census: {line}")
        out = Compared(envs["base"].describe(), envs["head"].describe(), census, census_notes)
        before, after = (reproducible(t.verl.commit, t.verl.source, t.verl.version) for t in (base, head))
        for scenario in scenarios:
            decided = dataclasses.replace(policy, families=families(scenario, policy.families))
            sc = self._compared(scenario, envs, decided, results, out)
            sc.reproduce = reproduce_compare(scenario.name, before, after, heavy=scenario.heavy)
            out.scenarios.append(sc)
        out.phases = self.phases[first:]
        return out

    def _compared(
        self, scenario: Scenario, envs: dict[str, TargetEnv], policy: ComparePolicy, results: Path, out: Compared
    ) -> ScenarioVerdict:
        """One scenario of ``compare``: its runs in ``run_order``, a pair more while the runs so far leave it
        INCONCLUSIVE (each new set of runs judged once: the last verdict is the scenario's where no run came after
        it), then its numerics from the dumps its checks read, held open until then."""
        name, order, budget = scenario.name, run_order(policy), policy.budget
        sides: dict[str, list[Observation]] = {side: [] for side in SIDES}
        errors: list[str] = []
        judged: dict[tuple[str, int], Judged] = {}
        verdict: ScenarioVerdict | None = None  # of the runs so far, None once another run came
        started = time.monotonic()
        try:
            for n, (side, i) in enumerate(order):
                if n % 2 == 0 and i >= policy.repeats:
                    verdict = verdict or _verdict_of(name, sides, policy)
                    if verdict.status != "inconclusive":
                        break
                    spent = time.monotonic() - started
                    pair, crowd = spent / i, crowding(scenario, spent, 2 * i)
                    if (left := job_left()) is not None and pair > left:  # never a pair the job cannot finish
                        self.say(
                            f"{name}: {outcomes.INCONCLUSIVE} after {i} runs a side; another pair (~{pair:.0f} s) "
                            f"would end past the job's deadline ({left:.0f} s left for trainings)"
                        )
                        break
                    if budget is not None and spent + pair > budget:
                        if crowd is not None and crowd.crowded and i < policy.decisive:  # runs, not minutes
                            self.say(
                                f"{name}: {outcomes.INCONCLUSIVE} after {i} runs a side on a crowded runner "
                                f"({crowd.text()}): another pair past the default {budget // 60:g} min, up to "
                                f"{policy.decisive} runs a side"
                            )
                        else:
                            said = f"; {crowd.text()}" if crowd is not None else ""
                            self.say(
                                f"{name}: {outcomes.INCONCLUSIVE} after {i} runs a side; another pair (~{pair:.0f} s) "
                                f"would end past the default {budget // 60:g} min (--max-repeats goes on "
                                f"regardless){said}"
                            )
                            break
                of = policy.repeats if i < policy.repeats else f"at most {policy.cap}"
                self.say(f"{name}: {side} run {i + 1} of {of}")
                out.order = max(out.order, order[: n + 1], key=len)
                try:
                    where = run_dir(results, side, i)
                    judged[(side, i)] = self._evaluated(
                        scenario, envs[side], where, (side, i), policy.modes, f"{name} {side} r{i + 1}"
                    )
                except FailedAlike as exc:
                    if side == "head" and sides["base"] and not sides["head"]:
                        out.untrainable.append(name)
                        verdict = ScenarioVerdict(name, policy, findings=[cannot_train(name, exc.crash)])
                        break  # it fails off and on alike where base trained: another run says no more
                    errors.append(f"{side} run {i + 1}: {exc.label}: {exc}")
                    continue
                except HarnessError as exc:
                    errors.append(f"{side} run {i + 1}: {exc.label}: {exc}")
                    continue
                sides[side].append(judged[(side, i)].observed)
                verdict = None
            out.observed[name] = sides
            sc = verdict or _verdict_of(name, sides, policy)
            sc.crowding = crowding(scenario, time.monotonic() - started, len(judged))
            if note := overhead_note(scenario, policy.families):
                sc.notes.append(note)
            sc.errors = errors + sc.errors
            crashed = any(o.crashes or o.known_crash for obs in sides.values() for o in obs)
            if name not in out.untrainable and sides["base"] and sides["head"] and not sc.errors and not crashed:
                self.say(f"{name}: numerics (statistics compare)")
                reads, numerics = [j.reads for j in judged.values()], time.monotonic()
                add_numerics(sc, scenario, sides, results, envs["head"].python, lambda p: read_before(reads, p))
                self.phases.append(_phase("numerics", name, numerics))
            return sc
        finally:
            for j in judged.values():
                j.reads.close()

    def _evaluated(
        self,
        scenario: Scenario,
        env: TargetEnv,
        where: Path,
        run: tuple[str, int],
        modes: tuple[Mode, ...],
        label: str = "",
    ) -> Judged:
        """One run of a comparison made and judged under one hold of its lock: never reused from another session,
        its overhead maxima recorded and never gated, no verdict beside the checks; its dumps held open where the
        numerics will read them again (``NUMERICS_RUNS``); ``modes``: the trainings the policy reads
        (``ComparePolicy.modes``: the on run alone where it decides no overhead)."""
        try:
            runs = self._made(scenario, env, where, reuse=False, modes=modes, label=label)
            return self._judge(scenario, runs, gate_timing=False, beside=None, hold=run in NUMERICS_RUNS)
        finally:
            self.release()


def crowding(scenario: Scenario, spent: float, runs: int) -> Crowding | None:
    """How crowded the runner is for ``scenario``'s comparison: ``runs`` runs in ``spent`` seconds against its
    quiet wall (``budgets.overhead.quiet_run_s``), the load average on this machine's cores now; None where the
    scenario has no quiet wall or no run was made."""
    quiet = scenario.budgets.overhead.quiet_run_s
    if quiet is None or runs == 0:
        return None
    return Crowding(round(spent / runs, 1), quiet, round(os.getloadavg()[0], 2), len(os.sched_getaffinity(0)))


def _verdict_of(name: str, sides: dict[str, list[Observation]], policy: ComparePolicy) -> ScenarioVerdict:
    """Head's runs against base's under ``policy`` (``harness.gate.judge``)."""
    return judge(name, Side.of_runs(sides["base"]), Side.of_runs(sides["head"]), policy)


def read_before(reads: Iterable[DumpReads], path: Path) -> DumpFile:
    """The dump at ``path`` as the checks of one of these runs read it (held open, with its summary); else a new
    one."""
    return next((d for r in reads if (d := r.known(path)) is not None), None) or DumpFile(path)


def _phase(name: PhaseName, of: str, started: float) -> PhaseDoc:
    """A phase that began at ``started`` (``time.monotonic``) and ends now."""
    return PhaseDoc(phase=name, of=of, seconds=round(time.monotonic() - started, 3))


def run_phases(runs: ScenarioRuns, elapsed: float) -> list[PhaseDoc]:
    """Where ``runs``' minutes went: each training's start-up (its wall outside its steps: a process, Ray, the
    models, teardown) and steps (its own timing_s/step, as it logged them), and the set-up around them (``elapsed``,
    the call that made them, less the trainings' walls: directories, launches, locks; 0 where they were reused)."""
    out, walls = [], 0.0
    for mode, record in runs.records.items():
        wall = float(record.result.wall_s)
        try:
            steps = sum(Metrics.read(runs.dir.run(mode).metrics).step_times().values())
        except MetricsError:  # a training that logged no step (it crashed first): all of it start-up
            steps = 0.0
        walls += wall
        out += [
            PhaseDoc(phase="start-up", of=mode, seconds=round(max(wall - steps, 0.0), 3)),
            PhaseDoc(phase="steps", of=mode, seconds=round(min(steps, wall), 3)),
        ]
    setup = max(elapsed - walls, 0.0) if runs.trained_s else 0.0
    return [PhaseDoc(phase="set-up", seconds=round(setup, 3)), *out]


def results_doc(
    scenario: Scenario, runs: ScenarioRuns, found: Iterable[CheckResult], phases: Sequence[PhaseDoc] = ()
) -> ResultsDoc:
    """results.json of ``runs`` judged: the runs and where they ran, each verdict by its check's name, and where
    their minutes went (``phases``)."""
    return ResultsDoc(
        scenario=scenario.name,
        session=runs.session_id,
        settings=settings_of(scenario),
        target=runs.target.get("block"),
        environment=environment(scenario, runs.target),
        runs={
            m: RunDoc(**{"argv": r.argv, "executor": r.executor, **r.result.to_dict()}) for m, r in runs.records.items()
        },
        checks={r.check: check_doc(r) for r in found},
        phases=list(phases),
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
