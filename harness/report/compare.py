"""Reports for a base-against-head comparison: the markdown summary and one PNG per scenario, side by side."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # CI has no display; must precede pyplot
import matplotlib.pyplot as plt

from harness import outcomes
from harness.artifacts.figures import family, fmt
from harness.checks.stats import CONFIDENCE_CHANGE
from harness.gate.judge import Judgement, ScenarioVerdict
from harness.gate.observe import Observation
from harness.report.plots import stage_bytes, step_times
from harness.report.summary import phases_table
from harness.report.verdicts import compare_line, head_lines, notes_of, ratio_text, word
from harness.safeio import write_atomic

ICON = {"ok": "✅ ok", "regressed": "❌ regressed", "inconclusive": f"⚠️ {outcomes.INCONCLUSIVE}", "error": "❌ error"}
COLORS = {"base": "tab:blue", "head": "tab:red"}


def _figure_rows(s: ScenarioVerdict) -> list[str]:
    interval = f"{100 * CONFIDENCE_CHANGE:g}% interval"  # the interval a change is called on (harness.checks.stats)
    rows = [f"| figure | base | head | head/base [{interval}], samples, noise | verdict |", "|---|---:|---:|---|---|"]
    for f in s.figures:
        if family(f.metric) == "structure" and f.verdict == "ok":
            continue  # hundreds of unchanged entry counts say nothing; a changed one is listed
        base = fmt(f.metric, statistics.median(f.base)) if f.base else "-"
        head = fmt(f.metric, statistics.median(f.head)) if f.head else "-"
        rows.append(f"| `{f.metric}` | {base} | {head} | {ratio_text(f).removeprefix('head/base ')} | {word(f)} |")
    return rows


def compare_markdown(c: Judgement, png_dir: Path | None = None, wall_s: float | None = None) -> str:
    first = [f"- **{line}**" if line.startswith(outcomes.REGRESSED) else f"- {line}" for line in head_lines(c)]
    out = [
        "## precision_debugger: base against head",
        "",
        *first,
        *([""] if first else []),
        f"- base: {c.base}",
        f"- head: {c.head}",
        f"- run order per scenario, on one machine: {', '.join(c.order)}",
        f"- verdict: **{c.verdict[1]}**",
        *(f"- skipped: {why}" for why in c.skipped),
        "",
        "| scenario | verdict | figures within tolerance | findings | numerics (msprobe compare) |",
        "|---|---|---:|---|---|",
    ]
    for s in c.scenarios:
        ok, judged, apart = s.counts()
        within = f"{ok}/{judged}" + (f" ({apart} not judged)" if apart else "")
        numerics = s.numerics.summary() if s.numerics else "-"
        out.append(f"| {s.scenario} | {ICON[s.status]} | {within} | {len(s.findings) + len(s.errors)} | {numerics} |")
    for s in c.scenarios:
        out += ["", f"### {s.scenario}: {ICON[s.status]}", ""]
        lines = [*s.errors, *s.findings, *s.undecided, *(compare_line(f) for f in s.figures if f.verdict != "ok")]
        out += [f"- `{line}`" for line in lines]
        out += [f"- reproduce: `{s.reproduce}`"] if s.reproduce and lines else []
        out += [f"- {n}" for n in notes_of(s)]
        if not s.errors:
            out += ["", *_figure_rows(s)]
    if png_dir is not None:
        out += ["", f"Plots (step time and disk per stage, base and head): `{png_dir}/*.png` in the run's artifacts."]
    if c.phases:
        out += ["", *phases_table(c.phases, wall_s)]
    return "\n".join(out) + "\n"


def _steps(observations: list[Observation]) -> dict[str, dict[int, list[float]]]:
    """Per run mode and step, the step time of every repeat."""
    runs = [step_times(o) for o in observations]
    return {
        mode: {n: [r[mode][n] for r in runs if n in r[mode]] for n in {n for r in runs for n in r[mode]}}
        for mode in ("off", "on")
    }


def plot_compare(name: str, base: list[Observation], head: list[Observation], path: Path) -> Path:
    """Left: step time per global step, off and on, base and head (median over repeats, a band from the fastest
    to the slowest repeat: the spread the overhead intervals come from). Right: the largest
    dump of each stage in one step (all ranks), base and head."""
    fig, (ax_t, ax_d) = plt.subplots(1, 2, figsize=(12, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    for side, observations in (("base", base), ("head", head)):
        times = _steps(observations)
        for mode, style in (("off", "o--"), ("on", "s-")):
            steps = sorted(times[mode])
            medians = [statistics.median(times[mode][n]) for n in steps]
            ax_t.plot(steps, medians, style, color=COLORS[side], label=f"{side}, {mode} (median, band: repeats)")
            low, high = [min(times[mode][n]) for n in steps], [max(times[mode][n]) for n in steps]
            ax_t.fill_between(steps, low, high, color=COLORS[side], alpha=0.15, linewidth=0)  # the spread
    if any(step_times(o)[mode] for o in (*base, *head) for mode in ("off", "on")):
        ax_t.set_yscale("log")
        ax_t.set_xticks(sorted({n for obs in (*base, *head) for mode in step_times(obs).values() for n in mode}))
        ax_t.set_xlabel("global training step")
        ax_t.set_ylabel("step time (s, log scale)")
        ax_t.grid(True, which="both", axis="y", alpha=0.3)
        ax_t.legend(fontsize=8)
    else:  # on runs alone (overhead not compared): no step time was measured, and no log axis of nothing
        ax_t.text(0.5, 0.5, "step times NOT MEASURED: on runs alone, no off run", ha="center", va="center",
                  transform=ax_t.transAxes)  # fmt: skip
        ax_t.set_axis_off()
    ax_t.set_title("step time, precision_debugger off and on")

    per_side = {side: stage_bytes(obs[0]) if obs else {} for side, obs in (("base", base), ("head", head))}
    stages = sorted(set(per_side["base"]) | set(per_side["head"]))
    if stages:
        height = 0.4
        for i, side in enumerate(("base", "head")):
            values = [per_side[side].get(s, 0.0) / 1e6 for s in stages]
            ys = [k + (i - 0.5) * height for k in range(len(stages))]
            ax_d.barh(ys, values, height=height, color=COLORS[side], label=side)
        ax_d.set_yticks(range(len(stages)))
        ax_d.set_yticklabels(stages, fontsize=8)
        ax_d.invert_yaxis()
        ax_d.legend(fontsize=8)
    else:
        ax_d.text(0.5, 0.5, "no dumps", ha="center", va="center", transform=ax_d.transAxes)
    ax_d.set_xlabel("dump size per step, all ranks (MB)")
    ax_d.set_title("disk per stage")
    ax_d.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"{name}: base (blue) against head (red)", fontsize=12, fontweight="bold")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(observed: dict[str, dict[str, list[Observation]]], out: Path) -> list[Path]:
    """A PNG per scenario (base and head side by side) under ``out``: the reports' costly part (matplotlib)."""
    out.mkdir(parents=True, exist_ok=True)
    return [
        plot_compare(name, sides["base"], sides["head"], out / f"{name}.png")
        for name, sides in observed.items()
        if sides["base"] or sides["head"]
    ]


def write_summary(c: Judgement, out: Path, wall_s: float | None = None) -> Path:
    """summary.md under ``out`` (the plots' folder), the job's phases at its end; ``wall_s``: the job's wall."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "summary.md", compare_markdown(c, png_dir=out, wall_s=wall_s))
    return out / "summary.md"


def write_reports(c: Judgement, observed: dict[str, dict[str, list[Observation]]], out: Path) -> list[Path]:
    """summary.md and a PNG per scenario (base and head side by side) under ``out``."""
    return [write_summary(c, out), *write_plots(observed, out)]
