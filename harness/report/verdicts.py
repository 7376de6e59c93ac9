"""What a verdict of the judge (``harness.gate.judge``) reads as: its lines on the console, in compare.txt and in
the gate's and compare's files. The verdicts are data; each policy's wording is here, chosen by the policy that
judged (``FIGURE_LINE``, ``SCENARIO_LINES``, ``JUDGEMENT_LINES``), so the judge decides and never words.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from harness import outcomes
from harness.artifacts.figures import family, fmt, ratio
from harness.checks.base import CheckResult
from harness.gate.against_baseline import gate_scenario
from harness.gate.baseline import Baseline
from harness.gate.files import (
    CompareDoc,
    CompareFigure,
    CompareScenario,
    GateBaselineDoc,
    GateDoc,
    GateFigure,
    GateScenario,
    change_against,
)
from harness.gate.judge import (
    JUDGED,
    ComparePolicy,
    FigureVerdict,
    GatePolicy,
    Judgement,
    Policy,
    ScenarioVerdict,
    Status,
    rel_change,
)
from harness.gate.observe import Observation
from harness.safeio import write_atomic

# The order of the counts on a judgement's last line.
GATE_COUNTS: tuple[Status, ...] = (
    "regressed", "inconclusive", "improved", "ok", "new scenario", "missing scenario", "environment differs",
    "settings changed", "error",
)  # fmt: skip
COMPARE_COUNTS: tuple[Status, ...] = ("regressed", "inconclusive", "error", "ok")
T = TypeVar("T")


def word(f: FigureVerdict) -> str:
    """The verdict column's word: a figure of a family not decided here says so, never "ok"."""
    return f.verdict if f.judged else "not judged"


# -- the gate's words: now against a baseline
def change(f: FigureVerdict) -> float | None:
    return rel_change(f.base[0], f.head[0]) if f.base and f.head else None


def limit(f: FigureVerdict) -> float | None:
    """The value beyond which the verdict was given (tolerances are multiplicative: x(1+t) up, /(1+t) down)."""
    if not f.base or f.tolerance is None or not f.head:
        return None
    b = f.base[0]
    return b * (1 + f.tolerance) if f.head[0] >= b else b / (1 + f.tolerance)


def tolerance_text(f: FigureVerdict) -> str:
    t = f.tolerance
    if not t:
        return "tolerance exact"
    if not f.head or not f.base:
        return f"tolerance +{100 * t:.3g}%"
    up = f.head[0] >= f.base[0]
    pct = 100 * t if up else 100 * (1 - 1 / (1 + t))
    return f"tolerance {'+' if up else '-'}{pct:.3g}% (limit {fmt(f.metric, limit(f))})"


def gate_line(f: FigureVerdict) -> str:
    """One readable line: scenario, metric, baseline, now, tolerance."""
    head = f"{f.verdict.upper()} {f.scenario}: {f.metric}"
    base, now = (f.base[0] if f.base else None), (f.head[0] if f.head else None)
    if f.detail:
        return f"{head} {f.detail} ({tolerance_text(f)})"
    if f.verdict == "missing":
        return f"{head} baseline {fmt(f.metric, base)}, now not measured"
    if f.verdict == "new":
        return f"{head} now {fmt(f.metric, now)} (not in the baseline)"
    c = change(f)
    pct = f"{100 * c:+.0f}%" if c is not None and math.isfinite(c) else "from 0"
    line = f"{head} baseline {fmt(f.metric, base)} now {fmt(f.metric, now)} ({pct}), {tolerance_text(f)}"
    if f.decision is not None and f.decision.estimate is not None:
        line += f"; now/baseline {f.decision.text()}"
    if f.verdict == "improved":
        line += ": better than the baseline, refresh it if this is intended"
    return line


# -- compare's words: head against base, one value per repeat
def ratio_text(f: FigureVerdict) -> str:
    if f.decision and f.decision.estimate:
        return f"head/base {f.decision.estimate.text()}"
    if not f.base or not f.head or not statistics.median(f.base):
        return "head/base -"
    r = statistics.median(f.head) / statistics.median(f.base)
    spread = [h / b for b, h in zip(f.base, f.head, strict=False) if b]  # per repeat pair: ran close together
    text = f"head/base {ratio(r)}"
    return text + (f" (spread {ratio(min(spread))}-{ratio(max(spread))})" if len(spread) > 1 else "")


def compare_line(f: FigureVerdict) -> str:
    head = f"{word(f).upper()} {f.scenario}: {f.metric}"
    if f.verdict == "missing" or not f.head:  # not judged: a side may lack it
        return f"{head} base {fmt(f.metric, statistics.median(f.base))}, not measured on head"
    if f.verdict == "new" or not f.base:
        return f"{head} head {fmt(f.metric, statistics.median(f.head))}, not measured on base"
    tol = "tolerance exact" if not f.tolerance else f"tolerance {100 * f.tolerance:.3g}%"
    rests = f.decision.undecided() if f.decision else ""
    return (
        f"{head} base {fmt(f.metric, statistics.median(f.base))} head "
        f"{fmt(f.metric, statistics.median(f.head))}: {ratio_text(f)}, {tol}{rests}"
    )


FIGURE_LINE: dict[type[Policy], Callable[[FigureVerdict], str]] = {GatePolicy: gate_line, ComparePolicy: compare_line}


def probe_figure(f: FigureVerdict) -> str:
    """An overhead probe's figure as bisect shows it after the figure's name (``ProbeRule.of_comparison``):
    compare's line without its word, scenario and name (``base .. head ..: head/base ..``)."""
    return compare_line(f).partition(f"{f.metric} ")[2]


def worded(policy: Policy, table: dict[type[Policy], T]) -> T:
    """The wording ``table`` holds for ``policy``'s class or the nearest it derives from."""
    return next(table[cls] for cls in type(policy).__mro__ if cls in table)


def figure_line(s: ScenarioVerdict, f: FigureVerdict) -> str:
    """A figure's line in the words of the policy that judged it."""
    return worded(s.policy, FIGURE_LINE)(f)


# -- a scenario
def reproduce_line(s: ScenarioVerdict) -> list[str]:
    """Where anything but ok was found, the command that reproduces it: each finding ends with it."""
    return [f"  reproduce {s.scenario}: {s.reproduce}"] if s.reproduce and s.status != "ok" else []


def within(s: ScenarioVerdict, noun: str = "figures") -> str:
    ok, judged, apart = s.counts()
    text = f"{ok} of {judged} {noun} within tolerance"
    return text + (f" ({apart} reported, not judged)" if apart else "")


def crowding_line(s: ScenarioVerdict) -> str:
    """How crowded the runner was for the scenario's runs, with the figure (empty where it has no quiet wall): an
    undecided figure on a crowded runner is said with it, never a bare INCONCLUSIVE."""
    c = s.crowding
    if c is None:
        return ""
    if not c.crowded:
        return f"runner: {c.text()}"
    undecided = "; an undecided figure is this runner's noise" if s.status == "inconclusive" else ""
    return f"runner crowded: {c.text()}{undecided}"


def notes_of(s: ScenarioVerdict) -> list[str]:
    """The scenario's notes, its runner's crowding first where the scenario has a quiet wall."""
    return [line for line in (crowding_line(s),) if line] + s.notes


def _compare_lines(s: ScenarioVerdict) -> list[str]:
    if s.errors:
        return [f"{outcomes.ERROR} {s.scenario}: {e}" for e in s.errors] + reproduce_line(s)
    out = [f"{s.status} {s.scenario}: {within(s)}"]
    out += s.findings + s.undecided  # checks and entry names first: they say which stage
    out += [compare_line(f) for f in s.figures if f.verdict != "ok"]
    out += reproduce_line(s)
    out += [f"  note {s.scenario}: {n}" for n in notes_of(s)]
    return out


def _gate_lines(s: ScenarioVerdict) -> list[str]:
    if s.crashes:
        out = [f"{outcomes.REGRESSED} {s.scenario}: {c}" for c in s.crashes]
    elif s.status in JUDGED:
        out = [f"{s.status} {s.scenario}: {within(s, 'metrics')}"]
    else:
        out = [f"{s.status.upper()} {s.scenario}: " + "; ".join(s.errors or s.notes)]
    out += s.findings
    out += [gate_line(f) for f in s.of("regressed", "missing", "inconclusive", "improved", "new")]
    out += reproduce_line(s) if s.status in ("regressed", "inconclusive") else []
    if s.status in JUDGED:
        out += [f"  note {s.scenario}: {n}" for n in s.notes]
    return out


SCENARIO_LINES: dict[type[Policy], Callable[[ScenarioVerdict], list[str]]] = {
    GatePolicy: _gate_lines,
    ComparePolicy: _compare_lines,
}


def scenario_lines(s: ScenarioVerdict) -> list[str]:
    return worded(s.policy, SCENARIO_LINES)(s)


def figure_table(s: ScenarioVerdict) -> list[str]:
    """Every overhead and disk figure as head/base with its spread (structure counts when they moved)."""
    rows = [f for f in s.figures if family(f.metric) != "structure" or f.verdict != "ok"]
    return [
        f"  {f.metric:<40} base {fmt(f.metric, statistics.median(f.base)) if f.base else '-':>10}  "
        f"head {fmt(f.metric, statistics.median(f.head)) if f.head else '-':>10}  {ratio_text(f)}  "
        f"{word(f)}"
        for f in rows
    ]


REGRESSION = "regression"  # the verdict against a baseline, beside the checks' (pytest's item of that name)


@dataclass(frozen=True)
class AgainstBaseline:
    """The verdict a session judges beside the checks against ``baseline`` (pytest's ``--harness-baseline``,
    ``Session.beside``): the gate's (``harness.gate.against_baseline``) on the figures results.json is about to hold,
    as a check's result (``check_result``); the absolute budgets stay with the checks."""

    baseline: Baseline
    name: str = REGRESSION

    def __call__(self, scenario: str, observed: Observation) -> CheckResult:
        return check_result(gate_scenario(scenario, self.baseline, observed))


def check_result(s: ScenarioVerdict) -> CheckResult:
    """For the pytest ``regression`` item: regressions and errors fail, the rest are notes."""
    res = CheckResult(REGRESSION)
    res.problems = [f"{outcomes.REGRESSED} {s.scenario}: {c}" for c in s.crashes] + s.findings
    res.problems += [figure_line(s, f) for f in s.of("regressed", "missing")]
    res.inconclusive = s.undecided + [figure_line(s, f) for f in s.of("inconclusive")]
    if s.status == "error":
        res.problems += s.errors
    else:
        res.notes = [figure_line(s, f) for f in s.of("improved", "new")] + s.notes
    res.summary = f"{s.status}: {within(s, 'metrics')}"
    res.figures = {
        "regression.status": s.status,
        "regression.compared": len(s.figures),
        "regression.regressed": len(s.of("regressed", "missing")) + len(s.findings),
        "regression.improved": len(s.of("improved")),
        "regression.inconclusive": len(s.of("inconclusive")),
    }
    return res


# -- a judgement
def head_lines(j: Judgement) -> list[str]:
    """What a reviewer reads first: the census findings, the targets' notes, and how an intended change is
    accepted (or that it was)."""
    out = [f"{outcomes.REGRESSED} census: {c}" for c in j.census] + [f"note: {n}" for n in j.notes]
    if j.accepted:
        out.append(
            f"{outcomes.ACCEPTED} as intended ({j.accepted}): every finding below is reported, none fails the gate"
        )
    elif j.regressed and not any(outcomes.CANNOT_TRAIN in f for s in j.scenarios for f in s.findings):
        out.append(f"note: {outcomes.ACCEPT_HINT}")  # the label accepts no head that cannot train
    return out


def _gate_judgement(j: Judgement, figures: bool) -> list[str]:
    out = [f"baseline: {j.base}"]
    for s in j.scenarios:
        out += scenario_lines(s)
    counts = ", ".join(f"{j.count(st)} {st}" for st in GATE_COUNTS if j.count(st))
    return [*out, f"gate: {counts or 'no scenarios'} -> {j.verdict[1]}"]


def _compare_judgement(j: Judgement, figures: bool) -> list[str]:
    out = [*head_lines(j), f"compare: base {j.base}", f"         head {j.head}"]
    out += [f"order per scenario: {', '.join(j.order)}"]
    out += [f"{outcomes.SKIPPED} {why}" for why in j.skipped]
    for s in j.scenarios:
        out += scenario_lines(s)
        out += figure_table(s) if figures and s.status != "error" else []
    said = [f"{j.count(st)} {st}" for st in COMPARE_COUNTS if j.count(st)]
    said += [f"{len(j.skipped)} skipped"] if j.skipped else []
    return [*out, f"compare: {', '.join(said) or 'no scenarios'} -> {j.verdict[1]}"]


JUDGEMENT_LINES: dict[str, Callable[[Judgement, bool], list[str]]] = {
    "gate": _gate_judgement,
    "compare": _compare_judgement,
}


def lines(j: Judgement, figures: bool = True) -> list[str]:
    """A judgement as the console (and compare.txt) says it; ``figures``: compare's table of every figure."""
    return JUDGEMENT_LINES[j.kind](j, figures)


# -- as files
def gate_doc(j: Judgement, baseline: Baseline, observations: dict[str, Observation], results: list[Path]) -> GateDoc:
    """The gate's JSON (``gate --json``): what ``report`` reads and never judges again."""

    def figure(s: ScenarioVerdict, f: FigureVerdict) -> GateFigure:
        base, now = (f.base[0] if f.base else None), (f.head[0] if f.head else None)
        return GateFigure(
            metric=f.metric, verdict=f.verdict, base=base, now=now, tolerance=f.tolerance, line=figure_line(s, f)
        )

    return GateDoc(
        exit_code=j.exit_code,
        verdict=j.verdict[1],
        results=[str(Path(r).resolve()) for r in results],
        baseline=GateBaselineDoc(created=baseline.created, commit=baseline.commit, environment=baseline.environment),
        scenarios=[
            GateScenario(
                scenario=s.scenario,
                status=s.status,
                notes=s.notes,
                errors=s.errors,
                crashes=s.crashes,
                figures=[figure(s, f) for f in s.figures if f.verdict != "ok"],
                change=change_against(observations.get(s.scenario), s, baseline),
                reproduce=s.reproduce,
            )
            for s in j.scenarios
        ],
    )


def compare_doc(c: Judgement) -> CompareDoc:
    """compare.json: every figure of both sides and every verdict, with the lines the console said."""

    def figures(s: ScenarioVerdict) -> list[CompareFigure]:
        return [
            CompareFigure.model_validate(asdict(f) | {"line": compare_line(f), "ratio": ratio_text(f)})
            for f in s.figures
        ]

    return CompareDoc(
        base=c.base,
        head=c.head,
        order=c.order,
        exit_code=c.exit_code,
        verdict=c.verdict[1],
        skipped=c.skipped,
        census=c.census,
        notes=c.notes,
        accepted=c.accepted,
        head_lines=head_lines(c),
        scenarios=[
            CompareScenario(
                scenario=s.scenario,
                status=s.status,
                findings=s.findings,
                undecided=s.undecided,
                notes=notes_of(s),
                errors=s.errors,
                figures=figures(s),
                numerics=s.numerics.as_dict() if s.numerics else None,
                reproduce=s.reproduce,
                crowding=crowding_line(s),
            )
            for s in c.scenarios
        ],
        phases=c.phases,
    )


def write_comparison(c: Judgement, results: Path) -> None:
    """``compare.json`` (every figure of both sides and every verdict) and ``compare.txt`` (the lines)."""
    results.mkdir(parents=True, exist_ok=True)
    compare_doc(c).write(results / "compare.json")
    write_atomic(results / "compare.txt", "\n".join(lines(c)) + "\n")
