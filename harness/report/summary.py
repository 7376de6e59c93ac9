"""The markdown summary a person reads in the GitHub UI ($GITHUB_STEP_SUMMARY): one table per run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness import outcomes
from harness.artifacts import figures as fig
from harness.artifacts.results import PHASES, PhaseDoc
from harness.checks.known_gap import is_gap
from harness.gate.files import GateDoc, disk_per_step
from harness.gate.judge import JUDGED
from harness.gate.observe import Observation

ICON = {
    "ok": "✅ ok",
    "regressed": "❌ regressed",
    "inconclusive": f"⚠️ {outcomes.INCONCLUSIVE}: more repeats",
    "improved": "⬆️ improved: refresh the baseline",
    "new scenario": "🆕 new (no baseline yet)",
    "missing scenario": "⚠️ missing from this run",
    "environment differs": "⚠️ not compared: other environment",
    "settings changed": "⚠️ not compared: settings changed",
    "error": "❌ error",
}


def phases_table(phases: Sequence[PhaseDoc], wall_s: float | None = None) -> list[str]:
    """Where the minutes went (#85): one row a phase, its seconds summed over what it was of (each training's
    start-up, each side's environment, ...) and its share; then every entry, in order, folded. ``wall_s``: the
    whole's own wall, said beside the phases' sum (what they leave out: imports, waits for a lock)."""
    if not phases:
        return []
    total = sum(p.seconds for p in phases) or 1e-9
    by = {name: sum(p.seconds for p in phases if p.phase == name) for name in PHASES}
    rows = [f"| {name} | {seconds:.1f} | {100 * seconds / total:.0f}% |" for name, seconds in by.items() if seconds]
    said = f"{total:.1f} s" + (f" of {wall_s:.1f} s wall" if wall_s else "")
    out = ["### Where the minutes went", "", "| phase | seconds | share |", "|---|---:|---:|", *rows]
    out += [f"| **all** | **{total:.1f}** | {said} |", "", "<details><summary>each phase</summary>", ""]
    out += ["| phase | of | seconds |", "|---|---|---:|"]
    out += [f"| {p.phase} | {p.of or '-'} | {p.seconds:.1f} |" for p in phases]
    return [*out, "", "</details>"]


def _x(v: object) -> str:
    return fig.ratio(float(v)) if isinstance(v, int | float) else "-"


def _interval(obs: Observation, metric: str) -> str:
    """A ratio with its interval, samples and noise where the check recorded them (older results: the ratio)."""
    text = obs.figures.get(fig.overhead_interval(metric))
    return str(text) if isinstance(text, str) else _x(obs.figures.get(metric))


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


def run_table(label: str, observations: dict[str, Observation], report: GateDoc | None) -> list[str]:
    gates = {g.scenario: g for g in report.scenarios} if report else {}
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
        unjudged = next(
            (word for bad, word in ((obs.errors, "❌ run failed"), (obs.crashes, "❌ crashed (crash check)"),
                                    (obs.known_crash, "xfail: crashed as declared (known bug)")) if bad),
            "no baseline",
        )  # fmt: skip
        verdict = ICON[g.status] if g else unjudged
        lines.append(
            f"| {name} | {level} | {_interval(obs, fig.OVERHEAD_PROFILED)} | "
            f"{_interval(obs, fig.OVERHEAD_UNPROFILED)} | {fig.mb(dps) if dps is not None else '-'} | "
            f"{_checks(obs)} | {verdict} | {g.change if g else '-'} |"
        )
    return lines


def details(observations: dict[str, Observation], report: GateDoc | None) -> list[str]:
    """Every regression line, improvement and failed check, under the table (collapsed when long)."""
    out: list[str] = []
    if report:
        for g in report.scenarios:
            shown = ("regressed", "missing", "inconclusive", "improved")
            found = [f"- `{m.line}`" for m in g.figures if m.verdict in shown]
            out += found + ([f"- reproduce {g.scenario}: `{g.reproduce}`"] if found and g.reproduce else [])
            if g.status not in JUDGED:
                out += [f"- {g.status} {g.scenario}: {n}" for n in g.errors + g.notes]
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
    runs: list[tuple[str, dict[str, Observation]]], reports: list[GateDoc | None], png_dir: Path | None = None
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
    elif any(reports):
        out.append("Baseline: not named by the gate's file (schema 1). Overhead = step time on / off at the same step.")
    else:
        out.append("No gate given: absolute budgets only (`--gate`, what `gate --json` wrote, adds the comparison).")
    for (label, observations), report in zip(runs, reports, strict=True):
        out += ["", *run_table(label, observations, report), *details(observations, report)]
    if png_dir is not None:
        out += ["", f"Plots (step time off vs on, disk per stage): `{png_dir}/*.png` in the run's artifacts."]
    phases = [
        p.model_copy(update={"of": f"{name} {p.of}".strip()})
        for _, observations in runs
        for name, o in observations.items()
        for p in o.phases
    ]
    if phases:  # each scenario's own (results.json): its trainings and judge, the job's set-up outside them
        out += ["", *phases_table(phases)]
    return "\n".join(out) + "\n"
