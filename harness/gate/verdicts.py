"""The PR gate: a fresh run against the nightly baseline, metric by metric, within the baseline's tolerances.

Overhead ratios and dump bytes regress when they grow beyond tolerance and improve when they shrink
beyond it (then the baseline is stale and should be refreshed). Dump structure has no better or worse:
entry counts outside tolerance and any change in the set of (normalised) entry names are regressions.
Measurements from another device kind or msprobe version are reported and not compared.

Overhead ratios are decided by ``harness.checks.stats``: now/baseline as an interval from the per-step, per-rank
samples of the baseline's runs and of this run, against the tolerance; INCONCLUSIVE when it straddles it.

Exit codes (``python -m harness gate``): 0 nothing regressed; 1 a regression; 2 an error (a failed run,
an unreadable baseline or results); 3 inconclusive (nothing regressed, the noise left a figure undecided).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness import outcomes
from harness.artifacts.figures import family, fmt, samples_of, structure_names
from harness.checks import stats
from harness.checks.base import CheckResult
from harness.gate.baseline import BLOCKING_ENV, INFO_ENV, OVERHEAD_ENV, Baseline
from harness.gate.observe import Observation, observe_dir
from harness.gate.structure import name_diff

MetricVerdict = Literal["ok", "regressed", "improved", "inconclusive", "new", "missing"]
Status = Literal[
    "ok",
    "regressed",
    "inconclusive",
    "improved",
    "new scenario",
    "missing scenario",
    "environment differs",
    "settings changed",
    "error",
]
MAX_NAMES = 6  # a structural change lists this many names, then a count


def rel_change(base: float, now: float) -> float:
    if base == 0:
        return 0.0 if now == 0 else math.inf
    return (now - base) / abs(base)


@dataclass
class MetricResult:
    scenario: str
    metric: str
    verdict: MetricVerdict
    base: float | None = None
    now: float | None = None
    tolerance: float | None = None
    detail: str = ""
    decision: stats.Decision | None = None  # the interval behind an overhead verdict

    @property
    def change(self) -> float | None:
        return rel_change(self.base, self.now) if self.base is not None and self.now is not None else None

    def limit(self) -> float | None:
        """The value beyond which this verdict was given (tolerances are multiplicative: x(1+t) up, /(1+t) down)."""
        if self.base is None or self.tolerance is None or self.now is None:
            return None
        return self.base * (1 + self.tolerance) if self.now >= self.base else self.base / (1 + self.tolerance)

    def tolerance_text(self) -> str:
        t = self.tolerance
        if not t:
            return "tolerance exact"
        if self.now is None or self.base is None:
            return f"tolerance +{100 * t:.3g}%"
        up = self.now >= self.base
        pct = 100 * t if up else 100 * (1 - 1 / (1 + t))
        return f"tolerance {'+' if up else '-'}{pct:.3g}% (limit {fmt(self.metric, self.limit())})"

    def line(self) -> str:
        """One readable line: scenario, metric, baseline, now, tolerance."""
        head = f"{self.verdict.upper()} {self.scenario}: {self.metric}"
        if self.detail:
            return f"{head} {self.detail} ({self.tolerance_text()})"
        if self.verdict == "missing":
            return f"{head} baseline {fmt(self.metric, self.base)}, now not measured"
        if self.verdict == "new":
            return f"{head} now {fmt(self.metric, self.now)} (not in the baseline)"
        pct = f"{100 * self.change:+.0f}%" if self.change is not None and math.isfinite(self.change) else "from 0"
        line = (
            f"{head} baseline {fmt(self.metric, self.base)} now {fmt(self.metric, self.now)} ({pct}), "
            f"{self.tolerance_text()}"
        )
        if self.decision is not None and self.decision.estimate is not None:
            line += f"; now/baseline {self.decision.text()}"
        if self.verdict == "improved":
            line += ": better than the baseline, refresh it if this is intended"
        return line


@dataclass
class ScenarioGate:
    scenario: str
    status: Status
    metrics: list[MetricResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)  # verl or msprobe crashed a training: nothing else compared

    @property
    def compared(self) -> bool:
        """A verdict was reached on something measured on both sides (a crash is one)."""
        judged = self.status in ("ok", "regressed", "improved", "inconclusive")
        return judged and bool(self.metrics or self.crashes)

    def of(self, *verdicts: MetricVerdict) -> list[MetricResult]:
        return [m for m in self.metrics if m.verdict in verdicts]

    def as_check_result(self) -> CheckResult:
        """For the pytest ``regression`` item: regressions and errors fail, the rest are notes."""
        res = CheckResult("regression")
        res.problems = [f"REGRESSED {self.scenario}: {c}" for c in self.crashes]
        res.problems += [m.line() for m in self.of("regressed", "missing")]
        res.inconclusive = [m.line() for m in self.of("inconclusive")]
        if self.status == "error":
            res.problems += self.notes
        else:
            res.notes = [m.line() for m in self.of("improved", "new")] + self.notes
        res.summary = f"{self.status}: {len(self.of('ok'))} of {len(self.metrics)} metrics within tolerance"
        res.figures = {
            "regression.status": self.status,
            "regression.compared": len(self.metrics),
            "regression.regressed": len(self.of("regressed", "missing")),
            "regression.improved": len(self.of("improved")),
            "regression.inconclusive": len(self.of("inconclusive")),
        }
        return res


@dataclass
class GateReport:
    baseline: Baseline
    scenarios: list[ScenarioGate]

    @property
    def verdict(self) -> tuple[int, str]:
        compared = sum(s.compared for s in self.scenarios)
        return outcomes.final((s.status for s in self.scenarios), compared, len(self.scenarios))

    @property
    def exit_code(self) -> int:
        return self.verdict[0]

    def count(self, status: Status) -> int:
        return sum(s.status == status for s in self.scenarios)

    def lines(self) -> list[str]:
        b = self.baseline
        env = ", ".join(
            f"{k} {b.environment[k]}"
            for k in ("device_kind", "mindstudio-probe", "verl", "target", "series", "torch")
            if k in b.environment
        )
        out = [f"baseline: {len(b.scenarios)} scenarios, commit {(b.commit or '?')[:12]}, created {b.created}; {env}"]
        for s in self.scenarios:
            if s.crashes:
                out += [f"REGRESSED {s.scenario}: {c}" for c in s.crashes]
            elif s.status in ("ok", "improved", "regressed", "inconclusive"):
                out.append(f"{s.status} {s.scenario}: {len(s.of('ok'))} of {len(s.metrics)} metrics within tolerance")
            else:
                out.append(f"{s.status.upper()} {s.scenario}: " + "; ".join(s.notes))
            out += [m.line() for m in s.of("regressed", "missing", "inconclusive", "improved", "new")]
            if s.status in ("ok", "regressed", "improved", "inconclusive"):
                out += [f"  note {s.scenario}: {n}" for n in s.notes]
        counts = ", ".join(
            f"{self.count(st)} {st}"
            for st in (
                "regressed",
                "inconclusive",
                "improved",
                "ok",
                "new scenario",
                "missing scenario",
                "environment differs",
                "settings changed",
                "error",
            )
            if self.count(st)
        )
        out.append(f"gate: {counts or 'no scenarios'} -> {self.verdict[1]}")
        return out


def _settings_diff(base: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Keys present in both that differ (a key only one side records is a format change, not a setting)."""
    return [f"{k}: baseline {base[k]!r}, now {now[k]!r}" for k in sorted(set(base) & set(now)) if base[k] != now[k]]


def _compare(
    scenario: str, metric: str, base: float, now: float, tol: float, samples: tuple[list[dict[str, float]], ...] = ()
) -> MetricResult:
    """Overhead: now/baseline from the per-step, per-rank samples (``samples``: the baseline's runs and this run),
    an interval against the tolerance; a baseline without samples leaves it INCONCLUSIVE (one number each side
    says nothing about noise). Disk and structure: exactly (``stats.exact``), structure both ways."""
    fam = family(metric)
    if fam == "overhead":
        base_s, now_s = samples or ([{"run": base}], [{"run": now}])
        d = stats.against_tolerance(stats.paired(base_s, now_s), tol)
        return MetricResult(scenario, metric, d.outcome, base, now, tol, decision=d)
    d = stats.exact([base], [now], tol, two_sided=fam == "structure")
    return MetricResult(scenario, metric, d.outcome, base, now, tol)


def compare_scenario(name: str, baseline: Baseline, obs: Observation | None, across_env: bool = False) -> ScenarioGate:
    sb = baseline.scenarios.get(name)
    if sb is None:
        return ScenarioGate(name, "new scenario", notes=["not in the baseline; gated once a baseline holds it"])
    if obs is None:
        return ScenarioGate(name, "missing scenario", notes=["in the baseline but not in these results"])
    if obs.errors:
        return ScenarioGate(name, "error", notes=obs.errors)
    if obs.crashes:
        return ScenarioGate(name, "regressed", crashes=obs.crashes)
    notes: list[str] = []
    blocking = [
        f"{k} baseline {sb.environment.get(k)!r}, now {obs.environment.get(k)!r}"
        for k in BLOCKING_ENV
        if k in sb.environment and sb.environment.get(k) != obs.environment.get(k)  # absent: an older baseline
    ]
    info = [
        f"{k} {sb.environment.get(k)} -> {obs.environment.get(k)}"
        for k in INFO_ENV
        if k in sb.environment and sb.environment.get(k) != obs.environment.get(k)
    ]
    if blocking and not across_env:
        return ScenarioGate(
            name,
            "environment differs",
            notes=[f"not compared: {'; '.join(blocking)} (--compare-across-env compares anyway)"],
        )
    if blocking:
        notes.append(f"compared across environments (--compare-across-env): {'; '.join(blocking)}")
    if info:
        notes.append(f"environment changed, compared anyway: {', '.join(info)}")
    if "packages_dir" in sb.environment and sb.environment.get("packages_dir") != obs.environment.get("packages_dir"):
        notes.append("disk figures move with the install path: msprobe's stack.json records each frame's source path")
    if diff := _settings_diff(sb.settings, obs.settings):
        return ScenarioGate(name, "settings changed", notes=[f"not compared, refresh the baseline: {'; '.join(diff)}"])

    base_fig = {m: float(v) for m, v in sb.figures.items() if family(m) and isinstance(v, int | float)}
    now_fig = obs.gated()
    elsewhere = [
        f"{k} baseline {sb.environment.get(k)!r}, now {obs.environment.get(k)!r}"
        for k in OVERHEAD_ENV
        if k in sb.environment and sb.environment.get(k) != obs.environment.get(k)
    ]
    if elsewhere and not across_env:
        notes.append(f"overhead not compared: {'; '.join(elsewhere)} (step times move with it); dump structure "
                     "and disk compared")  # fmt: skip
        base_fig = {m: v for m, v in base_fig.items() if family(m) != "overhead"}
        now_fig = {m: v for m, v in now_fig.items() if family(m) != "overhead"}
    if obs.structure is None or sb.structure is None:
        notes.append(
            "dump structure not compared: "
            + ("no dumps in these results" if obs.structure is None else "the baseline has none")
        )
        base_fig = {m: v for m, v in base_fig.items() if family(m) != "structure"}
        now_fig = {m: v for m, v in now_fig.items() if family(m) != "structure"}
    metrics: list[MetricResult] = []
    for m in sorted(set(base_fig) | set(now_fig)):
        if m not in now_fig:
            metrics.append(MetricResult(name, m, "missing", base=base_fig[m], tolerance=baseline.tolerance(name, m)))
        elif m not in base_fig:
            metrics.append(MetricResult(name, m, "new", now=now_fig[m]))
        else:
            now_samples = samples_of(m, obs.figures)
            samples = (sb.ratio_samples[m], [now_samples]) if m in sb.ratio_samples and now_samples else ()
            metrics.append(_compare(name, m, base_fig[m], now_fig[m], baseline.tolerance(name, m), samples))
    if obs.structure is not None and sb.structure is not None:
        for k in sorted(set(sb.structure) & set(obs.structure)):
            base_names, now_names = sb.structure[k].names, obs.structure[k]["names"]
            diff = name_diff(base_names, now_names, ignore=sb.structure[k].unstable)
            metric = structure_names(k)
            if not diff:
                metrics.append(MetricResult(name, metric, "ok", tolerance=0.0))
                continue
            shown = ", ".join(diff[:MAX_NAMES]) + (f" (+{len(diff) - MAX_NAMES} more)" if len(diff) > MAX_NAMES else "")
            detail = f"baseline {len(base_names)} names, now {len(now_names)} names: {shown}"
            metrics.append(MetricResult(name, metric, "regressed", tolerance=0.0, detail=detail))
    worst: Status = "ok"
    if any(m.verdict in ("regressed", "missing") for m in metrics):
        worst = "regressed"
    elif any(m.verdict == "inconclusive" for m in metrics):
        worst = "inconclusive"
    elif any(m.verdict == "improved" for m in metrics):
        worst = "improved"
    return ScenarioGate(name, worst, metrics, notes)


def gate(baseline: Baseline, observations: dict[str, Observation], across_env: bool = False) -> GateReport:
    names = sorted(set(baseline.scenarios) | set(observations))
    return GateReport(baseline, [compare_scenario(n, baseline, observations.get(n), across_env) for n in names])


def gate_dirs(baseline: Baseline, results: list[Path], across_env: bool = False) -> GateReport:
    observations: dict[str, Observation] = {}
    for d in results:
        observations.update(observe_dir(d))
    return gate(baseline, observations, across_env)
