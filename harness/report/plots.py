"""One PNG per scenario: step time off vs on across the steps (profiled steps marked) and disk per stage."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # CI has no display; must precede pyplot
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator

from harness.artifacts import figures as fig
from harness.gate.observe import Observation


def step_times(obs: Observation) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {"off": {}, "on": {}}
    for f, v in obs.parsed("time"):
        out[str(f.mode)][int(f.step or 0)] = v
    return out


def stage_bytes(obs: Observation) -> dict[str, float]:
    return {str(f.stage): v for f, v in obs.parsed("disk.stage")}


def plot_scenario(obs: Observation, path: Path) -> Path:
    """Left: seconds per global step, off and on, profiled steps shaded and labelled with their on/off ratio.
    Right: the largest dump of each stage in one step (all ranks), in MB."""
    pd = obs.settings.get("precision_debugger", {})
    profiled = set(pd.get("steps", []))
    times = step_times(obs)
    stages = stage_bytes(obs)
    figure, (ax_t, ax_d) = plt.subplots(1, 2, figsize=(12, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    steps = sorted(set(times["off"]) | set(times["on"]))
    for n in sorted(profiled):
        ax_t.axvspan(n - 0.4, n + 0.4, color="tab:orange", alpha=0.15, lw=0)
    ax_t.plot(steps, [times["off"].get(n) for n in steps], "o-", color="tab:blue", label="precision_debugger off")
    ax_t.plot(steps, [times["on"].get(n) for n in steps], "s-", color="tab:red", label="precision_debugger on")
    ax_t.plot([], [], "s", color="tab:orange", alpha=0.3, markersize=12, label="profiled step (dumps written)")
    for n in steps:
        off, on = times["off"].get(n), times["on"].get(n)
        if n in profiled and off and on:
            ax_t.annotate(
                f"{on / off:.1f}x",
                (n, on),
                textcoords="offset points",
                xytext=(0, 8),
                ha="center",
                fontsize=9,
                fontweight="bold",
                color="tab:red",
            )
    values = [v for mode in times.values() for v in mode.values() if v > 0]
    if values:  # headroom above for the ratio labels, below for the legend; no log axis of nothing (an on run alone)
        ax_t.set_yscale("log")
        ax_t.set_ylim(min(values) / 2.5, max(values) * 4)
        seconds = FuncFormatter(lambda v, _: f"{v:g}")  # 0.1, 0.2, 0.5, 1 rather than powers of ten
        ax_t.yaxis.set_major_formatter(seconds)
        ax_t.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax_t.yaxis.set_minor_formatter(seconds)
    ax_t.set_xticks(steps)
    ax_t.set_xticklabels(
        [f"{n}\nprofiled" if n in profiled else (f"{n}\nwarm-up" if n == 1 else str(n)) for n in steps]
    )
    ax_t.set_xlabel("global training step")
    ax_t.set_ylabel("step time (s, log scale)")
    ax_t.set_title("step time, precision_debugger off vs on (label: on/off ratio)")
    ax_t.grid(True, which="both", axis="y", alpha=0.3)
    ax_t.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8, frameon=False)

    if stages:
        names = sorted(stages)
        mb = [stages[s] / 1e6 for s in names]
        bars = ax_d.barh(range(len(names)), mb, color="tab:green")
        ax_d.set_yticks(range(len(names)))
        ax_d.set_yticklabels(names, fontsize=8)
        ax_d.bar_label(bars, labels=[fig.mb(stages[s]) for s in names], fontsize=8, padding=3)
        ax_d.set_xlim(0, max(mb) * 1.35 or 1)
        ax_d.invert_yaxis()
    else:
        ax_d.text(0.5, 0.5, "no dumps", ha="center", va="center", transform=ax_d.transAxes)
    total = obs.figures.get(fig.DISK_TOTAL)
    ax_d.set_xlabel("dump size per step, all ranks (MB)")
    ax_d.set_title("disk per stage" + (f" (all steps: {fig.mb(float(total))})" if total else ""))
    ax_d.grid(True, axis="x", alpha=0.3)

    level = " ".join(str(pd.get(k, "")) for k in ("level", "task")).strip()
    shape = f"{obs.settings.get('engine', '?')}, world size {obs.settings.get('world_size', '?')}"
    figure.suptitle(f"{obs.scenario}: {level}, {shape}", fontsize=12, fontweight="bold")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
