"""verl's documentation tables ("Time overhead", "Disk usage" in its precision_debugger guide), from results.

Same columns as the guide, so a nightly run can refresh the guide's figures (or show where they drifted).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from harness.artifacts import figures as fig
from harness.artifacts.figures import mb
from harness.gate.observe import Observation
from harness.report.plots import stage_bytes, step_times


def model_label(obs: Observation) -> str:
    """A short model name: the settings' model, else the run spec's (a tiny config or a checkpoint path)."""
    if isinstance(obs.settings.get("model"), str):
        return obs.settings["model"]
    spec_path = obs.source / "on" / "spec.json" if obs.source else None
    try:
        spec = json.loads(spec_path.read_text()) if spec_path else {}
    except (OSError, ValueError):
        spec = {}
    model = spec.get("model")
    if isinstance(model, dict) and "hidden_size" in model:
        return f"tiny Qwen2 ({model.get('num_hidden_layers', '?')} layers, hidden {model['hidden_size']})"
    if isinstance(model, str) and model:
        return Path(model).name
    for k, v in spec.items():
        if "model" in k and isinstance(v, str) and v:
            return Path(v).name
    return str(obs.settings.get("workload", "?"))


def _level(obs: Observation) -> str:
    return str(obs.settings.get("precision_debugger", {}).get("level", "?"))


def _about(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"about `{mb(lo)}`" if mb(lo) == mb(hi) else f"about `{mb(lo).removesuffix(' MB')}-{mb(hi)}`"


def time_overhead(observations: list[Observation]) -> str:
    rows = ["| Run | Model | Profiled steps | Measured step time |", "|---|---|---:|---:|"]
    for obs in observations:
        model, level = f"`{model_label(obs)}`", _level(obs)
        profiled = set(obs.settings.get("precision_debugger", {}).get("steps", []))
        t = step_times(obs)
        later = [n for n in sorted(t["off"]) if n > 1]  # step 1 warms up (allocations, caches)
        if base := [t["off"][n] for n in later]:
            steady = f"about `{statistics.median(base):.3g} s/step` in steady state"
            rows.append(f"| Baseline ({obs.scenario}) | {model} | None | {steady} |")
        for n in sorted(profiled):
            if n in t["on"]:
                ratio = f" ({t['on'][n] / t['off'][n]:.1f}x)" if t["off"].get(n) else ""
                rows.append(f"| {level} ({obs.scenario}) | {model} | `step {n}` | `{t['on'][n]:.3g} s`{ratio} |")
        if unprof := [t["on"][n] for n in sorted(t["on"]) if n > 1 and n not in profiled]:
            rows.append(
                f"| {level} ({obs.scenario}) | {model} | non-profiled later steps | "
                f"about `{statistics.median(unprof):.3g} s/step` |"
            )
    return "\n".join(rows)


def disk_usage(observations: list[Observation]) -> str:
    rows = ["| Level | Model | Stages | Scope | Disk usage |", "|---|---|---|---|---:|"]
    for obs in observations:
        model, level = f"`{model_label(obs)}`", f"{_level(obs)} ({obs.scenario})"
        stages = stage_bytes(obs)
        per_step = {int(f.step or 0): v for f, v in obs.parsed("disk.step")}
        if not per_step:
            continue
        all_stages = ", ".join(f"`{s}`" for s in sorted(stages))
        steps = " and ".join(f"`step_{n}`" for n in sorted(per_step))
        total = float(obs.figures.get(fig.DISK_TOTAL, sum(per_step.values())))
        rows.append(f"| {level} | {model} | {all_stages} | total for {steps} | `{mb(total)}` |")
        rows.append(f"| {level} | {model} | {all_stages} | per step | {_about(list(per_step.values()))} |")
        for stage, n in sorted(stages.items()) if len(stages) > 1 else ():
            rows.append(f"| {level} | {model} | `{stage}` | per step | about `{mb(n)}` |")
    return "\n".join(rows)


def doc_tables(observations: list[Observation]) -> str:
    return (
        "### Time overhead\n\n"
        + time_overhead(observations)
        + "\n\n### Disk usage\n\n"
        + disk_usage(observations)
        + "\n"
    )
