"""Overhead: step (and stage) time with precision_debugger on / off at the same global step number."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from harness import figures as fig
from harness.checks.base import CheckContext, CheckResult
from harness.errors import MetricsError
from harness.rundir import MODES

STATISTICS: dict[str, Callable[[list[float]], float]] = {
    "median": statistics.median,
    "mean": statistics.fmean,
    "max": max,
}


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
    outside = []
    for mode, times in zip(MODES, (t_off, t_on), strict=True):
        if (wall := ctx.wall_s(mode)) is not None and times:
            res.figures[fig.outside_steps(mode)] = round(wall - sum(times.values()), 3)
            outside.append(f"{mode} {wall - sum(times.values()):.1f} s (steps {sum(times.values()):.1f} s)")
    if outside:  # real trainers spend a minute starting Ray and the models: never part of a ratio
        res.notes.append(f"outside the steps (start-up, teardown): {', '.join(outside)}")
    step_ratio = ratios(t_on, t_off, list(range(1, s.steps + 1)))
    for n, r in sorted(step_ratio.items()):
        res.figures[fig.overhead_step(n)] = round(r, 3)
        res.figures[fig.step_time("off", n)] = round(t_off[n], 4)
        res.figures[fig.step_time("on", n)] = round(t_on[n], 4)

    for label, steps, limit in (
        ("profiled", profiled, budget.max_profiled_ratio),
        ("unprofiled", unprofiled, budget.max_unprofiled_ratio),
    ):
        values = [step_ratio[n] for n in steps if n in step_ratio]
        if not values:
            continue
        value = stat(values)
        res.figures[fig.overhead(label)] = round(value, 3)
        detail = ", ".join(f"step {n}: {step_ratio[n]:.2f}x" for n in steps if n in step_ratio)
        if value > limit:
            res.problems.append(
                f"{label} steps: {budget.statistic} on/off ratio {value:.2f}x > max {limit:g}x ({detail})"
            )
        else:
            res.notes.append(f"{label} steps: {budget.statistic} {value:.2f}x <= {limit:g}x ({detail})")

    res.summary = ", ".join(
        f"{k} {fig.ratio(float(res.figures[fig.overhead(k)]))}"
        for k in ("profiled", "unprofiled")
        if fig.overhead(k) in res.figures
    )
    st_off, st_on = off.stage_times(), on.stage_times()
    for stage in sorted(set(st_on) & set(st_off)):
        values = list(ratios(st_on[stage], st_off[stage], profiled).values())
        if not values:
            continue
        ratio = stat(values)
        res.figures[fig.overhead_stage(stage)] = round(ratio, 3)
        if (stage_max := budget.stage_limit(stage)) is not None and ratio > stage_max:
            res.problems.append(f"stage {stage}: {budget.statistic} on/off ratio {ratio:.2f}x > max {stage_max:g}x")
    if missing_stage := sorted(set(budget.max_stage_ratio) - set(st_on)):
        res.problems.append(f"max_stage_ratio names stages with no timer in the metrics: {missing_stage}")
    return res
