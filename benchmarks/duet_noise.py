"""Where a duet's noise comes from, and duets replayed from a pool of real runs (per step and rank, not only samples).

Not a test. ``record POOL DIR...`` reads compare's or the duet's results dirs (``<DIR>/<base|head>/r<i>/<scenario>/``,
each run an off and an on training) and keeps, per run, each overhead figure's samples as the run's overhead check
wrote them (results.json: what compare decides on) and, from the on training's metrics, every step's time on each
rank (wall and runnable waiting, for the step and each stage): small JSON, no dumps. ``DIR`` may be ``LABEL=DIR``
(the label names the duet in the replay; default the dir's name); a series dir (benchmarks/duet_series.py) gives one
duet a night.

``replay POOL`` prints, per scenario:

- the noise of one run's profiled step figure, taken apart: the step-to-step spread of a profiled step's and an
  unprofiled step's time within one run (the paid clock: wall less runnable waiting, ``checks.overhead``; the ranks'
  geometric mean, as they wait for each other), what that alone makes of the run's figure (``sP^2/nP + sU^2/nU``),
  and each in-run figure's run-to-run spread (pooled within each duet's side) with the in-run reference as shipped
  (each rank's median of its unprofiled steps, ``checks.overhead.in_run``) and as it was (their mean);
- per duet, ``--draws`` replays at ``--runs`` runs a side, drawn without replacement from that duet's base and head
  runs (the same night: what one duet could have measured; a run drawn twice would hide its own noise), decided by
  compare's own rule (``checks.stats.paired`` and ``against_tolerance`` at compare's minimum of runs a side) on each
  run's samples recomputed from its step times by this harness (``--reference mean``: as before the median), the
  unprofiled step's as recorded: REGRESSED, ok, INCONCLUSIVE.
- ``--merge NAME=LABEL,...``: those duets' runs pooled as one (a series' nights whose sides ran the same code), replayed
  as above and as nights: every figure decided on the same draw, a night REGRESSED where any figure is, and how often
  one of two nights drawn is (a change named on the night it lands or the next; a false alarm of two quiet nights).

    .venv/bin/python benchmarks/duet_noise.py record benchmarks/data/duet_steps.json S/night04/nightly/duet ...
    .venv/bin/python benchmarks/duet_noise.py replay benchmarks/data/duet_steps.json [--draws 300 --runs 3 6]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from collections import Counter
from pathlib import Path

from harness.artifacts import figures as fig
from harness.artifacts.results import read_results
from harness.checks import overhead, stats
from harness.checks.overhead import around
from harness.gate.baseline import floor
from harness.scenario.loader import load_scenario
from harness.scenario.model import Scenario
from harness.scenario.stages import TIMER_TO_STAGE

ROOT = Path(__file__).resolve().parent.parent
FIGURES = (fig.OVERHEAD_PROFILED, fig.OVERHEAD_UNPROFILED, "overhead.wall.stage.actor_compute_log_prob",
           "overhead.wall.stage.ref_compute_log_prob", "overhead.wall.stage.actor_update")  # fmt: skip
TIMERS = ("step", "old_log_prob", "ref", "update_actor")


def _steps(metrics: Path) -> dict[str, dict[str, list[float]]]:
    """``timer -> "step.rank" -> [wall, wait]`` seconds from a training's metrics.jsonl (wait: runnable waiting)."""
    out: dict[str, dict[str, list[float]]] = {}
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        data = row["data"]
        for timer in TIMERS:
            for rank in range(8):
                if f"wall_s/{timer}/rank{rank}" not in data:
                    break
                out.setdefault(timer, {})[f"{row['step']}.{rank}"] = [
                    round(data[f"{c}_s/{timer}/rank{rank}"], 4) for c in ("wall", "wait")
                ]
    return out


def _run(path: Path) -> dict | None:
    doc = read_results(path / "results.json")
    figures = {k: v for c in doc.checks.values() for k, v in c.figures.items()}
    metrics = path / "on" / "metrics.jsonl"
    if not doc.checks.get("overhead") or not doc.checks["overhead"].figures or not metrics.exists():
        return None
    return {
        "verl_commit": doc.environment.get("verl_commit"),
        "samples": {m: fig.samples_of(m, figures) for m in FIGURES if fig.samples_of(m, figures)},
        "on": _steps(metrics),
    }


def record(pool: Path, dirs: list[str]) -> None:
    duets = []
    for spec in dirs:
        label, _, where = spec.rpartition("=")
        d = Path(where)
        sides: dict[str, dict[str, list[dict]]] = {}
        for side in ("base", "head"):
            for run_dir in sorted((d / side).glob("r*"), key=lambda p: int(p.name[1:])):
                for scenario_dir in sorted(p for p in run_dir.iterdir() if (p / "results.json").exists()):
                    if (run := _run(scenario_dir)) is not None:
                        sides.setdefault(scenario_dir.name, {}).setdefault(side, []).append(run)
        for scenario, runs in sorted(sides.items()):
            duets.append({"duet": label or d.name, "scenario": scenario, **runs})
            sides_said = ", ".join(f"{len(runs.get(side, []))} {side}" for side in ("base", "head"))
            print(f"{label or d.name} {scenario}: {sides_said} runs")
    pool.write_text(json.dumps({"duets": duets}, separators=(",", ":")) + "\n")
    print(f"{pool}: {len(duets)} duets")


def _paid(run: dict, timer: str) -> dict[tuple[int, int], float]:
    """A timer's paid time per (step, rank) in the on training: wall less runnable waiting (``checks.overhead``)."""
    out = {}
    for key, (wall, wait) in run["on"].get(timer, {}).items():
        step, rank = key.split(".")
        out[int(step), int(rank)] = wall - wait
    return out


def _mean_reference(on: dict[tuple[int, int], float], steps: list[int], reference: list[int]) -> dict:
    """``checks.overhead.in_run`` as it was before the median: each rank's mean at the reference steps."""
    by_rank: dict[int, list[float]] = {}
    for (n, r), v in on.items():
        if n in reference:
            by_rank.setdefault(r, []).append(v)
    return {(n, r): statistics.fmean(vs) for r, vs in by_rank.items() for n in steps}


def in_run_samples(run: dict, scenario: Scenario, reference: str) -> dict[str, dict[str, float]]:
    """The run's samples of every figure its overhead check computes within the on training (the profiled step and
    each stage), recomputed from its step times with this harness's ``checks.overhead`` (``reference`` median, as
    shipped, or mean, as before); the unprofiled step's (on against off) as the run recorded them."""
    warm = scenario.budgets.overhead.warmup_steps
    profiled = [n for n in sorted(scenario.precision_debugger.steps) if n > warm]
    unprofiled = around([n for n in scenario.unprofiled_steps if n > warm], profiled)
    make = overhead.in_run if reference == "median" else _mean_reference
    out = {fig.OVERHEAD_UNPROFILED: run["samples"][fig.OVERHEAD_UNPROFILED]}
    for timer in TIMERS:
        on = _paid(run, timer)
        name = fig.OVERHEAD_PROFILED if timer == "step" else fig.overhead_stage(TIMER_TO_STAGE[timer])
        out[name] = overhead.samples(on, make(on, profiled, unprofiled), profiled)
    return out


def _figure(samples: dict[str, float], first: int) -> float:
    """A run's figure as paired() sees it (the mean of its log-samples), its first profiled step left out."""
    return statistics.fmean(math.log(v) for k, v in samples.items() if fig.step_of_sample(k) != first)


def _pooled(variances: list[tuple[float, int]]) -> float:
    """The pooled standard deviation of groups given as (variance, degrees of freedom)."""
    return math.sqrt(sum(v * k for v, k in variances) / sum(k for _, k in variances))


def decompose(scenario: Scenario, duets: list[dict]) -> None:
    """The profiled step's noise in one run: step-to-step within runs against run to run; the run-to-run spread of
    each in-run figure with the median reference (shipped) and the mean (before)."""
    warm = scenario.budgets.overhead.warmup_steps
    profiled = [n for n in sorted(scenario.precision_debugger.steps) if n > warm]
    unprofiled = around([n for n in scenario.unprofiled_steps if n > warm], profiled)
    within_p, within_u = [], []
    spread: dict[tuple[str, str], list[tuple[float, int]]] = {}
    per_duet: dict[str, dict[str, list[tuple[float, int]]]] = {}
    for duet in duets:
        for side in ("base", "head"):
            runs = duet.get(side, [])
            for run in runs:
                on = _paid(run, "step")
                step = {n: math.exp(statistics.fmean(math.log(v) for (m, _), v in on.items() if m == n)) for n in
                        profiled[1:] + unprofiled}  # fmt: skip  # the ranks' geometric mean: they wait for each other
                within_p.append(statistics.variance([math.log(step[n]) for n in profiled[1:]]))
                within_u.append(statistics.variance([math.log(step[n]) for n in unprofiled]))
            for reference in ("median", "mean"):
                figures = [in_run_samples(r, scenario, reference) for r in runs]
                for metric in figures[0] if len(figures) > 1 else []:
                    values = [_figure(f[metric], profiled[0]) for f in figures]
                    spread.setdefault((metric, reference), []).append((statistics.variance(values), len(values) - 1))
                    if metric == fig.OVERHEAD_PROFILED:
                        per_duet.setdefault(duet["duet"], {}).setdefault(reference, []).append(
                            (statistics.variance(values), len(values) - 1)
                        )
    sp, su = math.sqrt(statistics.fmean(within_p)), math.sqrt(statistics.fmean(within_u))
    n_p, n_u = len(profiled) - 1, len(unprofiled)
    runs = sum(len(d.get("base", [])) + len(d.get("head", [])) for d in duets)
    print(
        f"{scenario.name}: {scenario.steps} steps, {n_p} profiled after the first and {n_u} unprofiled as the "
        f"reference, {runs} runs; within a run, one step's spread (log of the paid clock, the ranks' geometric mean): "
        f"profiled {sp:.3f}, unprofiled {su:.3f}, which alone make a run's profiled step figure spread "
        f"{math.sqrt(sp**2 / n_p + su**2 / n_u):.3f} (profiled steps {sp / math.sqrt(n_p):.3f}, reference "
        f"{su / math.sqrt(n_u):.3f})"
    )
    for metric in dict.fromkeys(m for m, _ in spread):
        if metric == fig.OVERHEAD_UNPROFILED:
            continue
        said = [f"{ref} reference {_pooled(spread[metric, ref]):.3f}" for ref in ("median", "mean")]
        print(f"  {metric}: run-to-run spread (log, pooled within each duet's side): {', '.join(said)}")
    for name, refs in per_duet.items():
        said = [f"{ref} reference {_pooled(refs[ref]):.3f}" for ref in ("median", "mean")]
        print(f"  {name}: the profiled step's run-to-run spread: {', '.join(said)}")


def merged(duets: list[dict], merges: list[str]) -> list[dict]:
    """``NAME=LABEL,LABEL,...``: those duets' base runs and head runs as one duet NAME (the nights of a series whose
    base and head ran the same code: its quiet nights, or the nights after a step against the last good night), so
    that a replayed night draws from every night's runs, not one night's few."""
    out = []
    for spec in merges:
        name, _, labels = spec.partition("=")
        parts = [d for d in duets if d["duet"] in labels.split(",")]
        if len(parts) != len(labels.split(",")) or len({d["scenario"] for d in parts}) != 1:
            raise SystemExit(f"--merge {spec}: every label must name a duet of the pool, all of one scenario")
        out.append({"duet": name, "scenario": parts[0]["scenario"],
                    **{side: [r for d in parts for r in d.get(side, [])] for side in ("base", "head")}})  # fmt: skip
    return out


def replay(pool: Path, draws: int, runs: list[int], seed: int, reference: str, merges: list[str]) -> None:
    rng = random.Random(seed)
    duets = json.loads(pool.read_text())["duets"]
    duets += merged(duets, merges)
    names = {m.partition("=")[0] for m in merges}  # replayed as nights too
    scenarios = {name: load_scenario(ROOT / "scenarios" / f"{name}.yaml") for name in {d["scenario"] for d in duets}}
    for name, scenario in sorted(scenarios.items()):
        decompose(scenario, [d for d in duets if d["scenario"] == name])
    for duet in duets:
        scenario = scenarios[duet["scenario"]]
        base = [in_run_samples(r, scenario, reference) for r in duet.get("base", [])]
        head = [in_run_samples(r, scenario, reference) for r in duet.get("head", [])]
        if len(base) < 2 or len(head) < 2:
            continue
        for metric in FIGURES:
            b, h = [r[metric] for r in base if r.get(metric)], [r[metric] for r in head if r.get(metric)]
            whole = stats.paired(b, h)
            said = []
            for k in runs:
                if k > min(len(b), len(h)):
                    continue
                c: Counter[str] = Counter()
                for _ in range(draws):  # k of the duet's runs a side (never one run twice: that hides its noise)
                    c[_decide(rng.sample(b, k), rng.sample(h, k), metric)] += 1
                said.append(f"{k} a side: " + ", ".join(f"{w} {c[w]}" for w in ("regressed", "ok", "inconclusive")))
            print(
                f"{duet['duet']} {duet['scenario']} {metric}: {len(b)} base / {len(h)} head runs, head/base "
                f"{whole.value:.3f}x [{whole.low:.3f}x-{whole.high:.3f}x]; {draws} replays: " + "; ".join(said)
            )
        if duet["duet"] in names:
            nights(rng, duet["duet"], base, head, draws, runs)


def _decide(base: list[dict], head: list[dict], metric: str) -> str:
    """Compare's rule on one figure's runs: its tolerance, at compare's minimum of runs a side."""
    return stats.against_tolerance(stats.paired(base, head), floor(metric), stats.MIN_RUNS_CHANGE).outcome


def nights(rng: random.Random, name: str, base: list[dict], head: list[dict], draws: int, runs: list[int]) -> None:
    """A merged duet replayed as nights: k runs a side drawn once for every figure, the night REGRESSED where any
    figure is (the duet's verdict); and a second night drawn where the first was not: how often the change is named
    on the night it lands or the next (a quiet pool: how often two quiet nights raise a false alarm)."""

    def night(k: int) -> bool:
        b, h = rng.sample(base, k), rng.sample(head, k)
        return any(
            _decide([r[m] for r in b if r.get(m)], [r[m] for r in h if r.get(m)], m) == "regressed" for m in FIGURES
        )

    said = []
    for k in (k for k in runs if k <= min(len(base), len(head))):
        first = [night(k) for _ in range(draws)]
        either = sum(f or night(k) for f in first)
        said.append(f"{k} a side: REGRESSED on the first night {sum(first)}, on the first or the second {either}")
    print(f"{name}: {draws} replayed nights, any figure: " + "; ".join(said))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("pool", type=Path)
    r.add_argument("dirs", nargs="+")
    q = sub.add_parser("replay")
    q.add_argument("pool", type=Path)
    q.add_argument("--draws", type=int, default=300)
    q.add_argument("--runs", type=int, nargs="+", default=[3, 4, 5])
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--reference", choices=("median", "mean"), default="median",
                   help="the in-run reference: median (checks.overhead.in_run) or mean (before it)")  # fmt: skip
    q.add_argument("--merge", action="append", default=[], metavar="NAME=LABEL,LABEL,...",
                   help="replay those duets' runs pooled as one duet NAME, and as nights: how often one drawn from it "
                   "is REGRESSED (any figure), and one of two")  # fmt: skip
    a = p.parse_args()
    if a.cmd == "record":
        record(a.pool, a.dirs)
    else:
        replay(a.pool, a.draws, a.runs, a.seed, a.reference, a.merge)


if __name__ == "__main__":
    main()
