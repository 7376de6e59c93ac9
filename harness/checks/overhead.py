"""Overhead: step (and stage) time with precision_debugger on against off, in the time the user pays.

Each ratio is estimated from its samples, one per step and rank, and decided against its max by
``harness.checks.stats``: over only when the whole interval is, INCONCLUSIVE when the interval straddles the max.

The gated clock is wall time, so a slowdown that waits (a lock, a synced write, a device sync, a back-off) counts
as a user pays it. The embedded workload logs every rank's own wall, CPU and runnable-waiting seconds per timer
(``cpu_ppo.train.Clocks``); a rank's gated time is its wall time less the time its thread was runnable but had no
core (schedstat), i.e. CPU time plus blocked time: the runner's contention (another process on the core doubles a
rank's wall time here) is the one part left out, and it is the loud one. Where the kernel keeps no schedstat the
gated time is the raw wall time, and the check says so. The process's CPU time is kept beside it
(``overhead.cpu.*``), recorded, not gated. The workload does the same work every step, so a profiled step is divided
by the same rank's unprofiled steps of the same run (``in_run``: one process, one minute of the machine) and the
unprofiled steps by the off run. verl's trainer logs wall time (rank 0's view) and its steps differ (rollouts):
every ratio is on/off at one step."""

from __future__ import annotations

import statistics

from harness import outcomes
from harness.artifacts import figures as fig
from harness.artifacts.rundir import MODES
from harness.checks import stats
from harness.checks.base import OFF_UNTRAINED, CheckContext, CheckResult, provisional
from harness.errors import MetricsError

# what a budget line says where timing is recorded, not gated (``CheckContext.gate_timing``)
NOT_GATED = "not gated (--harness-timing record)"
UNGATED_WORDS = {"ok": "within", "regressed": "over", "inconclusive": "undecided"}


def ratios(on: dict[int, float], off: dict[int, float], steps: list[int]) -> dict[int, float]:
    return {s: on[s] / off[s] for s in steps if s in on and s in off and off[s] > 0}


def samples(on: dict[tuple[int, int], float], off: dict[tuple[int, int], float], steps: list[int]) -> dict[str, float]:
    """on/off per (step, rank) at ``steps``, keyed ``step<N>.rank<R>`` (``figures.overhead_sample``)."""
    return {f"step{n}.rank{r}": on[n, r] / off[n, r] for n, r in sorted(on) if n in steps and off.get((n, r), 0) > 0}


def in_run(on: dict[tuple[int, int], float], steps: list[int], reference: list[int]) -> dict[tuple[int, int], float]:
    """Each rank's median at the ``reference`` (unprofiled) steps of the same run, as that rank's denominator at
    every one of ``steps``: ``samples(on, in_run(on, ...), steps)`` is profiled against unprofiled in one process.

    Measured with another process keeping one of two cores busy (8 rounds, on and off runs interleaved): one
    process ran every step of a run, profiled or not, up to ~20 % faster than another, so against the off run each
    ratio carried both processes' offsets. The run-to-run spread of the profiled step ratio was 15.2 % against the
    off run at the same step and 5.4 % against the run's own unprofiled steps (ranks pinned; 18.3 % and 10.1 %
    unpinned). Valid only where every step does the same work (the embedded workload: same shapes every step).

    The median, not the mean: the reference is shared by every sample of the run, so its error is the run's, and a
    contention burst on the shared runner (a step waiting on the other rank in a collective, several times its
    usual ~0.3 s) moved the mean of a run's unprofiled steps and with it all of its samples. Over the duets run on
    the shared 2-core machine (benchmarks/duet_noise.py, load 2-14), pooled, the run-to-run spread of the profiled
    step's figure was 13.0 % against 17.8 % on tiny_fsdp_l1 (4 reference steps) and 5.6 % against 6.2 % on
    tiny_fsdp_duet (21): the median takes out a run with a burst (one duet 3.7 % against 7.1 %) and costs a little
    where none had one (3.1 % against 1.5 %). (On a quieter machine, 62 A/A pairs of tiny_fsdp_l1 had put the mean
    slightly ahead for the small stages: 7.9-8.2 % against 9.0-9.5 %.)"""
    by_rank: dict[int, list[float]] = {}
    for (n, r), v in on.items():
        if n in reference:
            by_rank.setdefault(r, []).append(v)
    return {(n, r): statistics.median(vs) for r, vs in by_rank.items() for n in steps}


def around(unprofiled: list[int], profiled: list[int]) -> list[int]:
    """The unprofiled steps among the profiled ones (from the one before the first to the one after the last), or
    all of them where none is: ``in_run``'s reference. The machine drifts within a run: over 24 A/A runs of
    tiny_fsdp_l1 with 13 steps, profiled [2, 4, 6, 8], the run-to-run spread of the profiled step ratio was 5.2 %
    against unprofiled steps 3-9, 7.7 % against all of 3-13 and 11.7 % against 9-13 alone (old log-prob 7.4 /
    10.0 / 13.5 %)."""
    if not profiled:
        return unprofiled
    return [n for n in unprofiled if profiled[0] - 1 <= n <= profiled[-1] + 1] or unprofiled


def _clock(times: dict[int, float]) -> dict[tuple[int, int], float]:
    """Wall-clock step or stage times (verl's timers, rank 0's view) as samples of rank 0."""
    return {(n, 0): t for n, t in times.items()}


def check_overhead(ctx: CheckContext) -> CheckResult:
    s, budget = ctx.scenario, ctx.scenario.budgets.overhead
    if ctx.untrained("off"):  # an on run alone: no ratio to measure, and none said to pass
        return CheckResult("overhead", not_checked=f"{outcomes.NOT_MEASURED}: {OFF_UNTRAINED}")
    if stopped := [m for m, r in ctx.records.items() if r.stopped]:  # its later steps never ran: nothing to time
        return CheckResult("overhead", not_checked=f"the {' and '.join(stopped)} run stopped at the dump cap: see "
                           "the disk check")  # fmt: skip
    res = CheckResult("overhead")
    try:
        off, on = ctx.metrics_off, ctx.metrics_on
    except MetricsError as exc:
        res.problems.append(str(exc))
        return res
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

    wall_off, wall_on = off.rank_times("wall"), on.rank_times("wall")
    cpu_off, cpu_on = off.rank_times("cpu"), on.rank_times("cpu")
    in_process = bool(wall_off and wall_on)  # the embedded workload; verl's trainer logs wall time only
    if in_process:
        wait_off, wait_on = off.rank_times("wait"), on.rank_times("wait")
        schedstat = bool(wait_off and wait_on)
        paid_off, paid_on = (_less(w, q) for w, q in ((wall_off, wait_off), (wall_on, wait_on)))
        clock = (
            "wall time less runnable waiting, per rank"
            if schedstat
            else "wall time per rank, the runner's contention included (no schedstat on this host)"
        ) + "; profiled against the run's own unprofiled steps"
        res.notes.append(_split(wall_on, cpu_on, wait_on, profiled))
    else:
        clock = "wall time"
        paid_off = {"step": _clock(t_off)} | {k: _clock(v) for k, v in off.stage_times().items()}
        paid_on = {"step": _clock(t_on)} | {k: _clock(v) for k, v in on.stage_times().items()}
    # timing recorded (--harness-timing record) or budgets never measured on their device: decided, not gated
    ungated_by = NOT_GATED if not ctx.gate_timing else provisional(s.budgets)
    ungated: list[str] = []
    judged = [
        (label, "step", steps, limit)
        for label, steps, limit in (
            ("profiled", profiled, budget.max_profiled_ratio),
            ("unprofiled", unprofiled, budget.max_unprofiled_ratio),
        )
    ] + [
        (stage, stage, profiled, budget.stage_limit(stage)) for stage in sorted(set(paid_on) & set(paid_off) - {"step"})
    ]
    for label, timer, steps, limit in judged:
        metric = fig.overhead(label) if timer == "step" else fig.overhead_stage(label)
        values = _samples(paid_on, paid_off, timer, steps, profiled, unprofiled, in_process)
        if not values:
            continue
        est = stats.one_side([values])
        res.figures[metric] = round(est.value, 3)
        res.figures[fig.overhead_interval(metric)] = est.text()
        res.figures.update({fig.overhead_sample(metric, *_key(k)): round(v, 4) for k, v in values.items()})
        if in_process and (cpu := _samples(cpu_on, cpu_off, timer, steps, profiled, unprofiled, True)):
            cpu_metric = fig.overhead(label, "cpu") if timer == "step" else fig.overhead_stage(label, "cpu")
            cpu_est = stats.one_side([cpu])
            res.figures[cpu_metric] = round(cpu_est.value, 3)
            res.figures[fig.overhead_interval(cpu_metric)] = cpu_est.text()
        if limit is None:
            res.notes.append(f"{metric}: {est.text()} ({clock})")
            continue
        decision = stats.against_max(est, limit)
        line = f"{metric}: {decision.text()} ({clock})"
        if ungated_by:
            res.notes.append(f"{line}: {decision.outcome}, {ungated_by}")
            ungated.append(f"{metric} {fig.ratio(est.value)} [{fig.ratio(est.low)}-{fig.ratio(est.high)}] against "
                           f"max {limit:g}x: {UNGATED_WORDS[decision.outcome]}")  # fmt: skip
            continue
        {"regressed": res.problems, "inconclusive": res.inconclusive}.get(decision.outcome, res.notes).append(line)
    if ungated:  # every maximum recorded and none gated: not a pass, its figures said
        res.not_gated = f"{ungated_by}: {'; '.join(ungated)}"
    res.summary = ", ".join(
        f"{k} {fig.ratio(float(res.figures[fig.overhead(k)]))}"
        for k in ("profiled", "unprofiled")
        if fig.overhead(k) in res.figures
    ) + (f" ({ungated_by})" if ungated_by else "")
    if missing_stage := sorted(set(budget.max_stage_ratio) - set(paid_on)):
        res.problems.append(f"max_stage_ratio names stages with no timer in the metrics: {missing_stage}")
    return res


def _samples(
    on: dict[str, dict[tuple[int, int], float]],
    off: dict[str, dict[tuple[int, int], float]],
    timer: str,
    steps: list[int],
    profiled: list[int],
    unprofiled: list[int],
    in_process: bool,
) -> dict[str, float]:
    """One ratio's samples: profiled steps against the run's own unprofiled ones where the run is one process doing
    the same work every step (``in_run``), else on against off at each step."""
    on_t = on.get(timer, {})
    within = in_process and steps == profiled
    return samples(on_t, in_run(on_t, profiled, around(unprofiled, profiled)) if within else off.get(timer, {}), steps)


def _less(
    wall: dict[str, dict[tuple[int, int], float]], wait: dict[str, dict[tuple[int, int], float]]
) -> dict[str, dict[tuple[int, int], float]]:
    """Each timer's wall seconds less its runnable waiting, where it was measured."""
    return {k: {n: v - wait.get(k, {}).get(n, 0.0) for n, v in times.items()} for k, times in wall.items()}


def _split(
    wall: dict[str, dict[tuple[int, int], float]],
    cpu: dict[str, dict[tuple[int, int], float]],
    wait: dict[str, dict[tuple[int, int], float]],
    profiled: list[int],
) -> str:
    """Where a profiled step's wall time went (the on run, mean over its profiled steps and ranks): CPU (the
    process's, every thread), runnable waiting (the rank's thread), blocked (the rest: sleeps, locks, I/O)."""
    keys = [k for k in wall.get("step", {}) if k[0] in profiled]
    if not keys:
        return "profiled steps: none timed"
    mean = {name: statistics.fmean(d.get("step", {}).get(k, 0.0) for k in keys) for name, d in
            (("wall", wall), ("cpu", cpu), ("wait", wait))}  # fmt: skip
    waited = f"{mean['wait']:.3f} s" if wait else "not measured (no schedstat)"
    return (
        f"profiled steps (on run, per rank): wall {mean['wall']:.3f} s = CPU {mean['cpu']:.3f} s + runnable waiting "
        f"{waited} + blocked {mean['wall'] - mean['cpu'] - mean['wait']:.3f} s"
    )


def _key(key: str) -> tuple[int, int]:
    step, rank = key.removeprefix("step").split(".rank")
    return int(step), int(rank)
