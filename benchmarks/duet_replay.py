"""Duets replayed from a pool of real runs: each recorded night's duet decided again on runs resampled from it.

Not a test. The pool is a history of nights whose duets ran (``history append --duet``: per run its samples and its
identity, small JSON; benchmarks/duet_series.py records one end to end, benchmarks/data/ keeps them). For each night
with a duet, ``--draws`` times: ``--runs`` runs a side drawn with replacement from that night's base runs and from its
tonight's runs (the same night: what one duet of that night could have measured), decided by the harness's own
two-sided decision (``checks.stats.paired`` and ``against_tolerance`` at compare's minimum of runs a side); prints,
per night and figure, how often it was REGRESSED, ok and INCONCLUSIVE.

    .venv/bin/python benchmarks/duet_replay.py benchmarks/data/duet_series_wait.json [--draws 200 --runs 3]
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from pathlib import Path

from harness.checks import stats
from harness.history.store import History

FIGURES = ("overhead.wall.profiled", "overhead.wall.first_profiled", "overhead.wall.unprofiled")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("history", type=Path)
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--runs", type=int, default=stats.MIN_RUNS_CHANGE, help="runs a side a replayed duet decides on")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)
    history = History.read(a.history)
    for i, night in enumerate(history.nights, 1):
        duet = night.duet
        if duet is None or duet.mode == "history":
            print(f"night {i} ({night.identity.commit_text()}): no duet ({duet.verdict if duet else 'none'})")
            continue
        for scenario, base_runs in sorted(duet.base_runs.items()):
            head_runs = [r for r in night.scenarios.get(scenario, []) if r.status == "ok"]
            base_runs = [r for r in base_runs if r.status == "ok"]
            for metric in FIGURES:
                base = [r.samples[metric] for r in base_runs if r.samples.get(metric)]
                head = [r.samples[metric] for r in head_runs if r.samples.get(metric)]
                if len(base) < 2 or len(head) < 2:
                    continue
                tolerance = next(r.tolerances[metric] for r in head_runs if metric in r.tolerances)
                said: Counter[str] = Counter()
                for _ in range(a.draws):
                    b, h = rng.choices(base, k=a.runs), rng.choices(head, k=a.runs)
                    said[stats.against_tolerance(stats.paired(b, h), tolerance, a.runs).outcome] += 1
                whole = stats.paired(base, head)
                print(
                    f"night {i} ({night.identity.commit_text()}, {duet.mode}: {duet.verdict}) {scenario} {metric}: "
                    f"{len(base)} base / {len(head)} tonight's runs, head/base {whole.value:.3f}x "
                    f"[{whole.low:.3f}x-{whole.high:.3f}x]; {a.draws} replays at {a.runs} a side: "
                    + ", ".join(f"{k} {v}" for k, v in sorted(said.items()))
                )


if __name__ == "__main__":
    main()
