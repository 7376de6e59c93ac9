"""Power of the overhead decision on this machine: false alarms (A/A), detection of +15 % and +30 %, cost.

Not a test: each pair (off + on training of the scenario) takes tens of seconds to minutes on a loaded runner.
The series is one stream of pairs: ``--reference`` clean pairs first, then clean, +15 % CPU, +15 % waiting, clean,
+30 % CPU, +30 % waiting, ... Both kinds are a share of each profiled stage's own time (wall less runnable waiting,
the gated clock): CPU burned (HARNESS_TEST_STAGE_SLOWDOWN_PCT, msprobe's own kind of cost) and time slept
(HARNESS_TEST_STAGE_WAIT_PCT: a lock, a synced write, a device sync, which CPU time never saw). Every pair after the
first ones is one decision against the clean pairs before it, through the product's decision
(``harness.gate.judge.compare_runs``, the one base-against-head uses, on ``harness.checks.stats``); an
INCONCLUSIVE one gets another pair of its kind, up to ``--max-pairs`` (sequential sampling). The absolute
budget (the overhead check of each pair) is counted too. Beside it, the rule it replaced (the provisional one:
medians of the wall-clock ratios, tolerance +25 %; budgets on the median wall ratio) on the same pairs,
computed here only.

    .venv/bin/python benchmarks/overhead_power.py run --out /tmp/power --busy-core --until 14:20   # the pairs
    .venv/bin/python benchmarks/overhead_power.py table --out /tmp/power                          # the decisions

``run`` appends one JSON line per pair to ``<out>/pairs.jsonl`` as it finishes, so a series cut short still
has its table; ``table`` re-checks every pair with the code as it is and replays the decisions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from harness.artifacts.figures import family
from harness.artifacts.reader import Metrics
from harness.artifacts.results import read_results
from harness.artifacts.rundir import ScenarioDir
from harness.checks import CHECKS
from harness.checks.base import CheckContext
from harness.gate.judge import compare_runs
from harness.gate.observe import Observation, observe_results
from harness.pipeline.session import Session, check_doc
from harness.report import verdicts
from harness.scenario.loader import load_scenario
from harness.scenario.stages import TIMER_TO_STAGE
from harness.targets.environment import ensure_env
from harness.targets.spec import pinned_target
from harness.training.workloads.fault_injection import SLOWDOWN_ENV, WAIT_ENV

OLD_FLOOR = 0.25  # the provisional rule's overhead tolerance (medians of the repeats)
# each kind of pair: the knob the "on" run gets, and its share of the stage
KINDS: dict[str, tuple[str | None, int]] = {
    "A/A": (None, 0),
    "+15% cpu": (SLOWDOWN_ENV, 15),
    "+15% wait": (WAIT_ENV, 15),
    "+30% cpu": (SLOWDOWN_ENV, 30),
    "+30% wait": (WAIT_ENV, 30),
}
LEGACY = {"+15%": "+15% cpu", "+30%": "+30% cpu"}  # series before the waiting kind (CPU burned only)


def plan(aa: int, p15: int, p30: int) -> list[str]:
    """clean, +15 CPU, +15 waiting, clean, +30 CPU, +30 waiting, ... until each count is reached (``p15``, ``p30``:
    per injected kind; a series cut short has some of each)."""
    left = {"A/A": aa, "+15% cpu": p15, "+15% wait": p15, "+30% cpu": p30, "+30% wait": p30}
    order: list[str] = []
    cycle = ["A/A", "+15% cpu", "+15% wait", "A/A", "+30% cpu", "+30% wait"]
    while any(left.values()):
        for kind in cycle:
            if left[kind]:
                order.append(kind)
                left[kind] -= 1
    return order


def run_pair(scenario: Any, out: Path, kind: str) -> tuple[Observation, float, Path]:
    """One off + on pair in its own results dir; ``kind``: the slowdown injected into the on run's profiled stages."""
    where = out / "pairs" / uuid.uuid4().hex[:8]
    knob, pct = KINDS[kind]
    if knob:
        os.environ[knob] = str(pct)
    started = time.monotonic()
    try:
        Session(where).evaluate(scenario, ensure_env(pinned_target()))
    finally:
        if knob:
            os.environ.pop(knob, None)
    d = ScenarioDir(where / scenario.name)
    return observe_results(d.results), time.monotonic() - started, d.root


def old_figures(run_root: Path, profiled: list[int], unprofiled: list[int]) -> dict[str, float]:
    """The figures the old rule judged: medians of wall-clock on/off ratios (verl's timers, rank 0)."""
    off, on = Metrics.read(run_root / "off" / "metrics.jsonl"), Metrics.read(run_root / "on" / "metrics.jsonl")
    out: dict[str, float] = {}
    for label, steps in (("profiled", profiled), ("unprofiled", unprofiled)):
        t_on, t_off = on.step_times(), off.step_times()
        out[f"overhead.{label}"] = statistics.median(t_on[n] / t_off[n] for n in steps)
    s_on, s_off = on.stage_times(), off.stage_times()
    for stage in sorted(set(s_on) & set(s_off) & set(TIMER_TO_STAGE.values())):
        out[f"overhead.stage.{stage}"] = statistics.median(s_on[stage][n] / s_off[stage][n] for n in profiled)
    return out


def old_verdict(reference: list[dict[str, float]], head: list[dict[str, float]]) -> str:
    """The provisional rule: head median against base median, +25 % / -20 % (1/1.25), per figure; worst wins."""
    found = []
    for metric in head[0]:
        b = statistics.median(r[metric] for r in reference)
        h = statistics.median(r[metric] for r in head)
        found.append("regressed" if h > b * (1 + OLD_FLOOR) else "improved" if h < b / (1 + OLD_FLOOR) else "ok")
    return "regressed" if "regressed" in found else "improved" if "improved" in found else "ok"


def old_budget(scenario: Any, figures: dict[str, float]) -> bool:
    """The old absolute budget: the median wall ratio against its max, no interval."""
    b = scenario.budgets.overhead
    return figures["overhead.profiled"] <= b.max_profiled_ratio and figures["overhead.unprofiled"] <= (
        b.max_unprofiled_ratio
    )


def stream(args: argparse.Namespace) -> None:
    """Run the pairs, clean and injected, interleaved; one line per pair in ``<out>/pairs.jsonl``."""
    scenario = load_scenario(Path(args.scenario))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = args.max_pairs
    kinds = ["A/A"] * args.reference + plan(args.aa * n, args.p15 * n, args.p30 * n)
    deadline = _deadline(args.until) if args.until else math.inf
    busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if args.busy_core else None
    try:
        with (out / "pairs.jsonl").open("a") as log:
            for i, kind in enumerate(kinds, 1):
                if time.time() >= deadline:
                    print(f"stopped at {args.until} UTC after {i - 1} pairs", flush=True)
                    break
                _, wall, root = run_pair(scenario, out, kind)
                rec = {"i": i, "kind": kind, "dir": str(root), "wall_s": round(wall, 1), "load1": os.getloadavg()[0]}
                log.write(json.dumps(rec) + "\n")
                log.flush()
                print(f"pair {i}/{len(kinds)} {kind}: {wall:.0f} s, load {rec['load1']:.1f}", flush=True)
    finally:
        if busy is not None:
            busy.terminate()


def _deadline(hhmm: str) -> float:
    """The next ``HH:MM`` UTC from now (a series started at 22:25 ``--until 00:10`` runs past midnight)."""
    now = datetime.datetime.now(datetime.UTC)
    at = datetime.datetime.combine(now.date(), datetime.time.fromisoformat(hhmm), datetime.UTC)
    return (at if at > now else at + datetime.timedelta(days=1)).timestamp()


def recheck(scenario: Any, root: Path) -> Observation:
    """The pair's checks again, with this code (a series outlives the code it started with)."""
    ctx = CheckContext(scenario, ScenarioDir(root))
    doc = read_results(ctx.dir.results)
    doc.checks |= {name: check_doc(check(ctx)) for name, check in CHECKS.items()}
    doc.write(ctx.dir.results)
    return observe_results(ctx.dir.results)


def decisions(args: argparse.Namespace) -> None:
    """Replay the pairs through the decision: each pair of a kind (the next ones of its kind join it while it is
    INCONCLUSIVE, up to ``--max-pairs``) against the clean pairs before it."""
    scenario = load_scenario(Path(args.scenario))
    warm = scenario.budgets.overhead.warmup_steps
    profiled = [n for n in sorted(scenario.precision_debugger.steps) if n > warm]
    unprofiled = [n for n in scenario.unprofiled_steps if n > warm]
    pairs = [json.loads(line) for line in (Path(args.out) / "pairs.jsonl").read_text().splitlines() if line.strip()]
    for p in pairs:
        p["kind"] = LEGACY.get(p["kind"], p["kind"])
        p["obs"] = recheck(scenario, Path(p["dir"]))
        p["old"] = old_figures(Path(p["dir"]), profiled, unprofiled)
    reference: list[dict[str, Any]] = []
    pending: dict[str, list[dict[str, Any]]] = {}
    recs: list[dict[str, Any]] = []
    for p in pairs:
        if len(reference) < args.reference:
            reference.append(p)
            continue
        heads = [*pending.pop(p["kind"], []), p]
        ref = reference[-args.window :] if args.window else reference
        cmp = compare_runs(scenario.name, [r["obs"] for r in ref], [h["obs"] for h in heads])
        if cmp.status == "inconclusive" and len(heads) < args.max_pairs:
            pending[p["kind"]] = heads  # sequential: the next pair of this kind joins the decision
            continue
        recs.append(_record(scenario, ref, heads, cmp, len(recs) + 1))
        if p["kind"] == "A/A":
            reference += heads  # clean pairs join the reference of the decisions after them
    # The series ended before their next pair: not a verdict (compare would have added pairs), said apart.
    unfinished = [f"{h[0]['kind']} after {len(h)} of at most {args.max_pairs} pairs" for h in pending.values()]
    table(recs)
    if unfinished:
        print(f"unfinished, not counted (the series ended before their next pair): {'; '.join(unfinished)}")


def _record(
    scenario: Any, reference: list[dict[str, Any]], heads: list[dict[str, Any]], cmp: Any, n: int
) -> dict[str, Any]:
    rec = {
        "kind": heads[0]["kind"],
        "verdict": cmp.status,
        "pairs": len(heads),
        "reference": len(reference),
        "wall_s": sum(h["wall_s"] for h in heads),
        "load1": heads[-1]["load1"],
        "budget": [_budget(h["obs"]) for h in heads],
        "old_verdict": old_verdict([r["old"] for r in reference], [h["old"] for h in heads]),
        "old_budget_ok": all(old_budget(scenario, h["old"]) for h in heads),
    }
    print(
        f"{n:3d} {rec['kind']:9s} {rec['verdict']:12s} pairs {rec['pairs']} ref {rec['reference']:2d} "
        f"wall {rec['wall_s']:4.0f}s load {rec['load1']:4.1f} budget {','.join(rec['budget'])} | "
        f"old rule {rec['old_verdict']}, old budget {'ok' if rec['old_budget_ok'] else 'FAILED'}"
    )
    for f in cmp.figures:
        if family(f.metric) == "overhead" or f.verdict != "ok":
            print(f"      {f.metric}: {f.verdict}: {verdicts.ratio_text(f)}")
    return rec


def _budget(obs: Observation) -> str:
    if obs.problems.get("overhead"):
        return "failed"
    return "ok" if obs.checks["overhead"] else "inconclusive"


def table(recs: list[dict[str, Any]]) -> None:
    print(f"\n{len(recs)} decisions")
    print(
        f"{'series':9s} {'n':>3s} {'regressed':>9s} {'ok':>4s} {'improved':>8s} {'inconcl.':>8s} {'budget':>6s} "
        f"{'rate':>22s} {'wall/decision':>14s} {'pairs':>5s} | old rule: regressed improved budget-failed"
    )
    for kind in KINDS:
        rs = [r for r in recs if r["kind"] == kind]
        if not rs:
            continue
        c = {v: sum(r["verdict"] == v for r in rs) for v in ("regressed", "ok", "improved", "inconclusive")}
        budget_failed = sum("failed" in r["budget"] for r in rs)
        rate = (
            f"false alarms {c['regressed'] + budget_failed}/{len(rs)}"
            if kind == "A/A"
            else f"detected {c['regressed']}/{len(rs)}"
        )
        wall = statistics.median(r["wall_s"] for r in rs)
        pairs = statistics.fmean(r["pairs"] for r in rs)
        old = [sum(r["old_verdict"] == v for r in rs) for v in ("regressed", "improved")]
        old_b = sum(not r["old_budget_ok"] for r in rs)
        print(
            f"{kind:9s} {len(rs):3d} {c['regressed']:9d} {c['ok']:4d} {c['improved']:8d} {c['inconclusive']:8d} "
            f"{budget_failed:6d} {rate:>22s} {wall:12.0f} s {pairs:5.1f} | {old[0]:19d} {old[1]:8d} {old_b:13d}"
        )
    if recs:
        loads = sorted(r["load1"] for r in recs)
        print(f"load average (1 min) after each decision's last pair: {loads[0]:.1f}-{loads[-1]:.1f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("run", "table"), help="run the pairs, or decide the pairs that ran")
    p.add_argument("--scenario", default="scenarios/tiny_fsdp_l1.yaml")
    p.add_argument("--out", required=True, help="results of every pair, and pairs.jsonl")
    p.add_argument("--aa", type=int, default=20, help="A/A decisions")
    p.add_argument("--p15", type=int, default=10, help="+15 %% decisions of each kind (CPU, waiting)")
    p.add_argument("--p30", type=int, default=10, help="+30 %% decisions of each kind (CPU, waiting)")
    p.add_argument("--reference", type=int, default=3, help="clean pairs before the first decision")
    p.add_argument("--max-pairs", type=int, default=2, help="pairs per decision at most (sequential sampling)")
    p.add_argument(
        "--window", type=int, default=0, help="table: only the last N clean pairs as reference (0: all; drift)"
    )
    p.add_argument("--busy-core", action="store_true", help="run: keep one core busy (python -c 'while 1: pass')")
    p.add_argument("--until", help="run: start no pair at or after this UTC time (HH:MM)")
    args = p.parse_args()
    (stream if args.command == "run" else decisions)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
