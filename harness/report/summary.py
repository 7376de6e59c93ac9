"""The markdown summary a person reads in the GitHub UI ($GITHUB_STEP_SUMMARY): one table per run."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from harness.artifacts import figures as fig
from harness.checks.known_gap import is_gap
from harness.gate.baseline import Baseline
from harness.gate.observe import Observation
from harness.gate.verdicts import GateReport, ScenarioGate, rel_change

ICON = {
    "ok": "✅ ok",
    "regressed": "❌ regressed",
    "inconclusive": "⚠️ INCONCLUSIVE: more repeats",
    "improved": "⬆️ improved: refresh the baseline",
    "new scenario": "🆕 new (no baseline yet)",
    "missing scenario": "⚠️ missing from this run",
    "environment differs": "⚠️ not compared: other environment",
    "settings changed": "⚠️ not compared: settings changed",
    "error": "❌ error",
}


def _x(v: object) -> str:
    return fig.ratio(float(v)) if isinstance(v, int | float) else "-"


def _interval(obs: Observation, metric: str) -> str:
    """A ratio with its interval, samples and noise where the check recorded them (older results: the ratio)."""
    text = obs.figures.get(fig.overhead_interval(metric))
    return str(text) if isinstance(text, str) else _x(obs.figures.get(metric))


def disk_per_step(obs: Observation) -> float | None:
    values = [v for _, v in obs.parsed("disk.step")]
    return statistics.fmean(values) if values else None


def _pct(base: float | None, now: float | None) -> str:
    if base is None or now is None:
        return "?"
    c = rel_change(base, now)
    if not math.isfinite(c):
        return "new"
    return "±0%" if abs(c) < 0.005 else f"{100 * c:+.0f}%"


def change_against(obs: Observation | None, g: ScenarioGate | None, baseline: Baseline | None) -> str:
    """The few changes a reader wants first: profiled overhead, disk per step, and whether the structure moved."""
    if g is None or baseline is None or obs is None or g.status in ("new scenario", "error"):
        return "-"
    sb = baseline.scenarios.get(obs.scenario)
    if sb is None:
        return "-"
    base_obs = Observation(obs.scenario, sb.settings, sb.environment, sb.figures, None)
    parts = [
        f"overhead {_pct(_num(sb.figures.get(fig.OVERHEAD_PROFILED)), _num(obs.figures.get(fig.OVERHEAD_PROFILED)))}",
        f"disk/step {_pct(disk_per_step(base_obs), disk_per_step(obs))}",
    ]
    structure = [m for m in g.metrics if m.metric.startswith("structure.") and m.verdict != "ok"]
    if any(m.metric.startswith("structure.") for m in g.metrics):
        parts.append(f"structure {'changed (' + str(len(structure)) + ')' if structure else 'same'}")
    return " · ".join(parts)


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def _checks(obs: Observation) -> str:
    failed = [name for name, ok in obs.checks.items() if not ok and not is_gap(name)]
    gaps = [name for name, ok in obs.checks.items() if is_gap(name) and ok]
    if obs.errors:
        return "❌ run failed"
    judged = [n for n in obs.checks if not is_gap(n)]
    text = f"❌ {', '.join(failed)}" if failed else f"✅ {len(judged)}/{len(judged)}"
    return text + (" · gap fixed?" if gaps else "")


def _target(env: dict) -> str:
    dirty = " (uncommitted changes)" if env.get("verl_dirty") else ""
    return (
        f"verl {env.get('verl', '?')} `{env['target']}`{dirty} from `{env.get('verl_source', '?')}`, "
        f"series `{env.get('series', '?')}`, msprobe {env.get('mindstudio-probe', '?')}"
    )


def target_line(observations: dict[str, Observation]) -> list[str]:
    """What was tested: verl (version, commit, dirty or not, where from), its series and msprobe."""
    targets = sorted({_target(o.environment) for o in observations.values() if o.environment.get("target")})
    return [f"Target: {'; '.join(targets)}.", ""] if targets else []


def run_table(label: str, observations: dict[str, Observation], report: GateReport | None) -> list[str]:
    gates = {g.scenario: g for g in report.scenarios} if report else {}
    baseline = report.baseline if report else None
    lines = [
        f"### {label}",
        "",
        *target_line(observations),
        "| scenario | level | profiled-step overhead | unprofiled ratio | disk per step | checks | verdict "
        "| change against baseline |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for name in sorted(set(observations) | set(gates)):
        obs, g = observations.get(name), gates.get(name)
        if obs is None:
            lines.append(f"| {name} | - | - | - | - | - | {ICON['missing scenario']} | - |")
            continue
        pd = obs.settings.get("precision_debugger", {})
        level = f"{pd.get('level', '?')} {pd.get('task', '')}".strip()
        dps = disk_per_step(obs)
        unjudged = "❌ run failed" if obs.errors else "❌ crashed (crash check)" if obs.crashes else "no baseline"
        verdict = ICON[g.status] if g else unjudged
        lines.append(
            f"| {name} | {level} | {_interval(obs, fig.OVERHEAD_PROFILED)} | "
            f"{_interval(obs, fig.OVERHEAD_UNPROFILED)} | {fig.mb(dps) if dps is not None else '-'} | "
            f"{_checks(obs)} | {verdict} | {change_against(obs, g, baseline)} |"
        )
    return lines


def details(observations: dict[str, Observation], report: GateReport | None) -> list[str]:
    """Every regression line, improvement and failed check, under the table (collapsed when long)."""
    out: list[str] = []
    if report:
        for g in report.scenarios:
            out += [f"- `{m.line()}`" for m in g.of("regressed", "missing", "inconclusive", "improved")]
            if g.status not in ("ok", "regressed", "inconclusive", "improved"):
                out += [f"- {g.status} {g.scenario}: {n}" for n in g.notes]
    for name, obs in sorted(observations.items()):
        for check, problems in (obs.problems | obs.inconclusive).items():
            if not is_gap(check) and not obs.checks.get(check, True):
                out += [f"- {name} {check} check: {p}" for p in problems[:3]]
    if not out:
        return []
    body = "\n".join(out)
    if len(out) <= 8:
        return ["", body]
    return ["", f"<details><summary>{len(out)} findings</summary>", "", body, "", "</details>"]


def summary_markdown(
    runs: list[tuple[str, dict[str, Observation]]], reports: list[GateReport | None], png_dir: Path | None = None
) -> str:
    out = ["## precision_debugger overhead and dumps", ""]
    baseline = next((r.baseline for r in reports if r), None)
    if baseline:
        env = baseline.environment
        out.append(
            f"Baseline: commit `{(baseline.commit or '?')[:12]}` from {baseline.created}, "
            f"{env.get('device_kind', '?')}, msprobe {env.get('mindstudio-probe', '?')}, verl {env.get('verl', '?')} "
            f"({env.get('target', '?')}, series {env.get('series', '?')}). "
            "Overhead = step time on / off at the same step; tolerances come with the baseline."
        )
    else:
        out.append("No baseline given: absolute budgets only (`--baseline` adds the comparison).")
    for (label, observations), report in zip(runs, reports, strict=True):
        out += ["", *run_table(label, observations, report), *details(observations, report)]
    if png_dir is not None:
        out += ["", f"Plots (step time off vs on, disk per stage): `{png_dir}/*.png` in the run's artifacts."]
    return "\n".join(out) + "\n"
