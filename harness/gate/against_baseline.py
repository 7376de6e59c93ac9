"""The gate: a results dir judged against a baseline (the last good night), the one judge under the gate's policy
(``harness.gate.judge``). A scenario only one of them holds is reported, not judged."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from harness.artifacts.figures import FAMILIES
from harness.gate.baseline import Baseline
from harness.gate.judge import GatePolicy, Judgement, ScenarioVerdict, Side, judge
from harness.gate.observe import Observation, observe_dir
from harness.targets.spec import reproduce_compare, reproducible


def gate_scenario(
    name: str,
    baseline: Baseline,
    obs: Observation | None,
    across_env: bool = False,
    families: Collection[str] = FAMILIES,
) -> ScenarioVerdict:
    """Now against the baseline: a scenario only one of them holds is reported, not judged. ``families``: the figure
    families decided (the nightly's duet decides overhead side by side: its gate decides disk and structure)."""
    policy = GatePolicy.of(baseline, across_env, families)
    if name not in baseline.scenarios:
        why = "not in the baseline; gated once a baseline holds it"
        return ScenarioVerdict(name, policy, notes=[why], standing="new scenario")
    if obs is None:
        why = "in the baseline but not in these results"
        return ScenarioVerdict(name, policy, notes=[why], standing="missing scenario")
    verdict = judge(name, Side.of_baseline(baseline, name), Side.of_runs([obs]), policy)
    base, now = (reproducible(e.get("verl_commit"), e.get("verl_source"), e.get("verl"))
                 for e in (baseline.scenarios[name].environment, obs.environment))  # fmt: skip
    verdict.reproduce = reproduce_compare(name, base, now)  # the last good night's verl against this night's
    return verdict


def describe_baseline(b: Baseline) -> str:
    env = ", ".join(
        f"{k} {b.environment[k]}"
        for k in ("device_kind", "mindstudio-probe", "verl", "target", "series", "torch")
        if k in b.environment
    )
    return f"{len(b.scenarios)} scenarios, commit {(b.commit or '?')[:12]}, created {b.created}; {env}"


def gate(
    baseline: Baseline,
    observations: dict[str, Observation],
    across_env: bool = False,
    families: Collection[str] = FAMILIES,
) -> Judgement:
    names = sorted(set(baseline.scenarios) | set(observations))
    verdicts = [gate_scenario(n, baseline, observations.get(n), across_env, families) for n in names]
    return Judgement("gate", describe_baseline(baseline), "these results", verdicts)


def gate_dirs(baseline: Baseline, results: list[Path], across_env: bool = False) -> Judgement:
    observations: dict[str, Observation] = {}
    for d in results:
        observations.update(observe_dir(d))
    return gate(baseline, observations, across_env)
