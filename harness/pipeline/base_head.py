"""Base against head on one machine: every scenario run for both targets, interleaved, then compared.

The way benchmarking tools compare two commits (asv ``continuous``): both on the same machine in one job, so
the runner's drift is not mistaken for the change. Each scenario runs base, head, head, base, ... (ABBA: a
slow drift cancels between the sides); each run of a side is a full off + on pair in its own results
directory, ``<results>/<base|head>/r<i>/<scenario>/``, checked as ``harness run`` checks it. The comparison
(``harness.gate.judge``) reads those directories back; it and the reports land in ``<results>/``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from harness import outcomes
from harness.artifacts.figures import FAMILIES
from harness.artifacts.rundir import ScenarioDir
from harness.errors import FailedAlike, HarnessError
from harness.gate.judge import ComparePolicy, Judgement, ScenarioVerdict, compare_runs, interleaved
from harness.gate.numerics.compare import compare_numerics
from harness.gate.observe import Observation, observe_results
from harness.pipeline.session import Session
from harness.report import verdicts
from harness.report.verdicts import compare_doc
from harness.safeio import write_atomic
from harness.scenario.model import Scenario
from harness.targets.census import census_of
from harness.targets.census import diff as census_diff
from harness.targets.environment import ensure_env
from harness.targets.spec import Target, reproduce_compare, reproducible
from harness.training.monitor import Watch

SIDES = ("base", "head")


OVERHEAD_NOT_COMPARED = (
    "overhead: reported with its figures, not decided here (budgets.overhead.compare: false: this tier's noise leaves "
    "base against head undecided at the runs a pull request affords); the nightly decides it across nights"
)


def families(scenario: Scenario, judge: Collection[str]) -> set[str]:
    """The figure families base against head decides for ``scenario``: ``judge`` (``--judge``), less overhead where
    the scenario says its tier cannot decide it (``budgets.overhead.compare: false``)."""
    return {f for f in judge if f != "overhead" or scenario.budgets.overhead.compare}


def structure_order(repeats: int) -> list[tuple[str, int]]:
    """The runs of a comparison that decides no overhead: base ``repeats`` times (the numerics' determinism
    self-check compares base's second run with its first), head once (its structure, layout, disk and numerics are
    exact in one run), ABBA otherwise; no pairs added (nothing exact is INCONCLUSIVE)."""
    return [(side, i) for side, i in interleaved(repeats) if side == "base" or i == 0]


def run_dir(results: Path, side: str, repeat: int) -> Path:
    return results / side / f"r{repeat}"


def comparison_session(
    results: Path, executor: str | None = None, watch: Watch | None = None, heavy: bool = False
) -> Session:
    """The session a comparison runs both sides in, made by its front end, which asks it what to skip
    (``Session.skip``: heavy, device, cluster, as ``harness run`` and pytest do): each run's own overhead maxima
    recorded, never gated (nor compared: judge.PER_RUN_MAXIMA)."""
    return Session(results, executor, watch, gate_timing=False, heavy=heavy)


def run_comparison(
    scenarios: list[Scenario],
    base: Target,
    head: Target,
    results: Path,
    repeats: int = ComparePolicy.repeats,
    session: Session | None = None,
    say: Callable[[str], None] = print,
    judge: Collection[str] = FAMILIES,
    max_repeats: int | None = None,
    skipped: Collection[str] = (),
    accepted: str | None = None,
    notes: Collection[str] = (),
) -> tuple[Judgement, dict[str, dict[str, list[Observation]]]]:
    """Run and compare; returns the comparison and, per scenario and side, the observations of the repeats.
    ``judge``: the figure families decided (the others are reported); structure names and checks always are.
    ``max_repeats``: while a scenario is INCONCLUSIVE after ``repeats``, one more base/head pair (the ABBA order
    goes on) at a time, up to this many per side (sequential sampling); default: the compare policy's
    (``ComparePolicy.max_repeats`` within ``ComparePolicy.budget_s`` per scenario).
    ``skipped``: the scenarios not run here, with why (they count in the total a comparison compares).
    ``accepted``: why head's regressions are intended (``outcomes.final``). Head's annotated stages are compared
    with base's first, from their sources (``harness.targets.census``): a finding whether or not a training
    reaches the stage. ``notes``: what the reader must know of the pair first (``harness.targets.pair``).
    ``session``: the front end's ``comparison_session`` (default: one under ``results``, every scenario's executor)."""
    envs = {side: ensure_env(target) for side, target in (("base", base), ("head", head))}  # once, before training:
    for side, env in envs.items():  # a bad SPEC fails at once
        say(f"{side}: {env.label()}")
    census, census_notes = census_diff(census_of(base, envs["base"]), census_of(head, envs["head"]))
    for line in census:
        say(f"{outcomes.REGRESSED} census: {line}")
    cap = max(repeats, max_repeats or ComparePolicy.max_repeats)
    budget = ComparePolicy.budget_s if max_repeats is None else None
    session = session or comparison_session(results)
    observed: dict[str, dict[str, list[Observation]]] = {}
    scenario_errors: dict[str, list[str]] = {}
    untrainable: dict[str, str] = {}  # head fails off and on alike where base trained: its finding
    decides: dict[str, set[str]] = {}
    ran: list[tuple[str, int]] = []  # the longest run order of a scenario, for the reports' run labels
    for scenario in scenarios:
        decides[scenario.name] = decided = families(scenario, judge)
        order = interleaved(cap) if "overhead" in decided else structure_order(repeats)
        sides: dict[str, list[Observation]] = {side: [] for side in SIDES}
        started = time.monotonic()
        for n, (side, i) in enumerate(order):
            if n % 2 == 0 and i >= repeats:
                if compare_runs(scenario.name, sides["base"], sides["head"], decided).status != "inconclusive":
                    break
                spent, pair = time.monotonic() - started, (time.monotonic() - started) / i
                if budget is not None and spent + pair > budget:
                    say(
                        f"{scenario.name}: {outcomes.INCONCLUSIVE} after {i} runs a side; another pair "
                        f"(~{pair:.0f} s) would end past the default {budget // 60} min (--max-repeats goes on "
                        "regardless)"
                    )
                    break
            say(f"{scenario.name}: {side} run {i + 1} of {repeats if i < repeats else f'at most {cap}'}")
            ran = max(ran, order[: n + 1], key=len)
            where = run_dir(results, side, i)
            try:
                session.evaluate(scenario, envs[side], where)
            except FailedAlike as exc:
                if side == "head" and sides["base"] and not sides["head"]:
                    untrainable[scenario.name] = cannot_train(scenario.name, exc.crash)
                    break  # it fails off and on alike where base trained: another run says no more
                scenario_errors.setdefault(scenario.name, []).append(f"{side} run {i + 1}: {exc.label}: {exc}")
                continue
            except HarnessError as exc:
                scenario_errors.setdefault(scenario.name, []).append(f"{side} run {i + 1}: {exc.label}: {exc}")
                continue
            sides[side].append(observe_results(ScenarioDir(where / scenario.name).results))
        observed[scenario.name] = sides
    compared = []
    for scenario in scenarios:
        sides = observed[scenario.name]
        if scenario.name in untrainable:
            sc = ScenarioVerdict(scenario.name, ComparePolicy(families=decides[scenario.name]))
            sc.findings.append(untrainable[scenario.name])
        else:
            sc = compare_runs(scenario.name, sides["base"], sides["head"], decides[scenario.name])
        if "overhead" not in decides[scenario.name] and not scenario.budgets.overhead.compare:
            sc.notes.append(OVERHEAD_NOT_COMPARED)
        sc.errors = scenario_errors.get(scenario.name, []) + sc.errors
        before, after = (reproducible(t.verl.commit, t.verl.source, t.verl.version) for t in (base, head))
        sc.reproduce = reproduce_compare(scenario.name, before, after, heavy=scenario.heavy)
        ran_both = sides["base"] and sides["head"]
        if ran_both and not sc.errors and not any(o.crashes or o.known_crash for obs in sides.values() for o in obs):
            say(f"{scenario.name}: numerics (statistics compare)")
            add_numerics(sc, scenario, sides, results, envs["head"].python)
        compared.append(sc)
    labels = [f"{side} {i + 1}" for side, i in ran]
    if accepted and untrainable:  # an intended change of what is dumped, never a head that cannot train at all
        notes = [*notes, f"not accepted ({accepted}): head cannot train ({', '.join(untrainable)})"]
    comparison = Judgement(
        "compare",
        envs["base"].describe(),
        envs["head"].describe(),
        compared,
        labels,
        list(skipped),
        census,
        [*notes, *census_notes],
        None if untrainable else accepted,
    )
    write_comparison(comparison, results)
    return comparison, observed


def cannot_train(name: str, crash: dict[str, Any]) -> str:
    """The finding of a head that cannot train where base did (``outcomes.CANNOT_TRAIN``): a verdict on head, exit 1,
    never retried as the runner's (base trained on this runner, in this job)."""
    where = f" at {crash['where']}" if crash.get("where") else ""
    return (
        f"{outcomes.REGRESSED} {name}: {outcomes.CANNOT_TRAIN}: {crash.get('alike')} raised "
        f"{crash.get('exception')}{where} with precision_debugger off and on alike, where base trained on this "
        "runner: the pull request breaks the training itself"
    )


def add_numerics(
    sc: ScenarioVerdict, scenario: Scenario, sides: dict[str, list[Observation]], results: Path, python: str | None
) -> None:
    """msprobe's compare of head's first "on" dumps against base's (and base's second against its first), in
    msprobe's environment under test (head's), its CSVs under ``<results>/numerics/<scenario>/``."""
    base, head = ([ScenarioDir(o.source).run("on").dumps for o in sides[side] if o.source] for side in SIDES)
    try:
        sc.numerics = compare_numerics(
            base, head[0], results / "numerics" / scenario.name, scenario.expect.nonfinite_ok,
            not scenario.expect.numerics_match, python or sys.executable, scope=scenario.expect.numerics_scope,
        )  # fmt: skip
    except HarnessError as exc:
        sc.errors.append(f"numerics: {exc}")
        return
    dumped = any(s.status == "compared" for s in sc.numerics.head_vs_base.stages)  # a stage dumped on both sides
    if dumped and (nothing := sc.numerics.nothing_compared()):  # no entry, or none in common: never "all pass"
        sc.errors.append(f"numerics: {nothing}")
    sc.findings += sc.numerics.findings(scenario.name)
    sc.notes += sc.numerics.notes()


def write_comparison(c: Judgement, results: Path) -> None:
    """``compare.json`` (every figure of both sides and every verdict) and ``compare.txt`` (the lines)."""
    results.mkdir(parents=True, exist_ok=True)
    compare_doc(c).write(results / "compare.json")
    write_atomic(results / "compare.txt", "\n".join(verdicts.lines(c)) + "\n")


def write_reports(c: Judgement, observed: dict[str, dict[str, list[Observation]]], out: Path) -> list[Path]:
    """summary.md and a PNG per scenario (base and head side by side) under ``out``."""
    from harness.report.compare import compare_markdown, plot_compare  # matplotlib only here

    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "summary.md", compare_markdown(c, png_dir=out))
    pngs = [out / "summary.md"]
    for name, sides in observed.items():
        if sides["base"] or sides["head"]:
            pngs.append(plot_compare(name, sides["base"], sides["head"], out / f"{name}.png"))
    return pngs
