"""Overhead: step (and stage) time with precision_debugger on / off at the same global step number."""

from __future__ import annotations

import statistics

from harness.artifacts import MetricsError
from harness.checks.base import CheckContext, CheckResult

STATISTICS = {"median": statistics.median, "mean": statistics.fmean, "max": max}


def ratios(on: dict[int, float], off: dict[int, float], steps: list[int]) -> dict[int, float]:
    return {s: on[s] / off[s] for s in steps if s in on and s in off and off[s] > 0}


def check_overhead(ctx: CheckContext) -> CheckResult:
    s, budget = ctx.scenario, ctx.scenario.budgets.overhead
    res = CheckResult("overhead")
    try:
        off, on = ctx.metrics_off, ctx.metrics_on
    except MetricsError as exc:
        res.problems.append(str(exc))
        return res
    stat = STATISTICS[budget.statistic]
    t_off, t_on = off.step_times(), on.step_times()
    warm = budget.warmup_steps
    profiled = [n for n in sorted(s.precision_debugger.steps) if n > warm]
    unprofiled = [n for n in s.unprofiled_steps if n > warm]
    if missing := [n for n in range(1, s.steps + 1) if n not in t_off or n not in t_on]:
        res.problems.append(f"steps {missing} have no timing_s/step in both runs' metrics")
    step_ratio = ratios(t_on, t_off, list(range(1, s.steps + 1)))
    for n, r in sorted(step_ratio.items()):
        res.figures[f"overhead.step{n}"] = round(r, 3)
        res.figures[f"time_off.step{n}_s"] = round(t_off[n], 4)
        res.figures[f"time_on.step{n}_s"] = round(t_on[n], 4)

    for label, steps, limit in (
        ("profiled", profiled, budget.max_profiled_ratio),
        ("unprofiled", unprofiled, budget.max_unprofiled_ratio),
    ):
        values = [step_ratio[n] for n in steps if n in step_ratio]
        if not values:
            continue
        value = stat(values)
        res.figures[f"overhead.{label}"] = round(value, 3)
        detail = ", ".join(f"step {n}: {step_ratio[n]:.2f}x" for n in steps if n in step_ratio)
        if value > limit:
            res.problems.append(
                f"{label} steps: {budget.statistic} on/off ratio {value:.2f}x > max {limit:g}x ({detail})"
            )
        else:
            res.notes.append(f"{label} steps: {budget.statistic} {value:.2f}x <= {limit:g}x ({detail})")

    res.summary = ", ".join(
        f"{k} {res.figures[f'overhead.{k}']:.2f}x" for k in ("profiled", "unprofiled") if f"overhead.{k}" in res.figures
    )
    st_off, st_on = off.stage_times(), on.stage_times()
    for stage in sorted(set(st_on) & set(st_off)):
        values = list(ratios(st_on[stage], st_off[stage], profiled).values())
        if not values:
            continue
        value = stat(values)
        res.figures[f"overhead.stage.{stage}"] = round(value, 3)
        limit = budget.max_stage_ratio.get(stage)  # type: ignore[call-overload]
        if limit is not None and value > limit:
            res.problems.append(f"stage {stage}: {budget.statistic} on/off ratio {value:.2f}x > max {limit:g}x")
    if missing_stage := sorted(set(budget.max_stage_ratio) - set(st_on)):
        res.problems.append(f"max_stage_ratio names stages with no timer in the metrics: {missing_stage}")
    return res
